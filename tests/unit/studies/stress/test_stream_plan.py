"""The streaming case's seeded stream and its exact answers (no store involved).

The exact answer is checked against a plain brute force that replays the batches one by one, so the
per-document event arrays of `State` are held to the obvious definition of "what is visible now".
"""

from __future__ import annotations

import numpy as np
import pytest

from repo_paths import TESTS
from retbench.config.streaming import StreamSettings
from retbench.errors import ConfigError
from retbench.results.stress import read_stress
from retbench.results.stress_stream import read_live_queries
from retbench.studies.stress.config import parse_config
from retbench.studies.stress.stream_plan import STEPS, State, bucket_limit, filter_of, make_plan, recall
from retbench.studies.stress.stream_score import live_summary


def _texts(n: int) -> list[str]:
    return [f"doc {i} " + "word " * (i % 7) for i in range(n)]


def _plan(n: int = 400, **kw):
    s = StreamSettings(**{"batch_size": 30, "update_fraction": 0.1, "delete_fraction": 0.1, **kw})
    return make_plan(_texts(n), s)


def _flat(plan) -> list[tuple]:
    return [plan.initial.tolist(), plan.checkpoints, plan.bucket.tolist()] + [
        (b.inserts.tolist(), b.updates.tolist(), b.deletes.tolist()) for b in plan.batches
    ]


def test_the_same_seed_makes_the_same_stream_and_another_seed_another() -> None:
    assert _flat(_plan(seed=5)) == _flat(_plan(seed=5))
    assert _flat(_plan(seed=5)) != _flat(_plan(seed=6))


def test_every_document_is_indexed_first_or_inserted_once_and_changed_at_most_once() -> None:
    plan = _plan()
    inserted = np.concatenate([plan.initial, *(b.inserts for b in plan.batches)])
    assert sorted(inserted.tolist()) == list(range(400))
    updates = np.concatenate([b.updates for b in plan.batches])
    deletes = np.concatenate([b.deletes for b in plan.batches])
    assert len(updates) == 20 and len(deletes) == 20  # 10% of the 200 initial documents each
    assert not set(updates.tolist()) & set(deletes.tolist())
    assert set(updates.tolist()) | set(deletes.tolist()) <= set(plan.initial.tolist())
    assert plan.checkpoints[0] == 0 and plan.checkpoints[-1] == len(plan.batches)
    assert all(plan.update_text[int(i)] != _texts(400)[i] for i in updates)


def test_a_filter_selects_its_share_of_the_corpus() -> None:
    plan = _plan(n=20000, selectivities=[0.5, 0.1, 0.01, 0.001])
    state = State(plan, 20000)
    for sel in (0.5, 0.1, 0.01, 0.001):
        share = state.mask(len(plan.batches), sel).sum() / state.alive(len(plan.batches)).sum()
        assert abs(share - sel) <= 5 * np.sqrt(sel * (1 - sel) / 18000) + 1e-9, (sel, share)
    assert filter_of(0.001) == {"bucket": {"lt": bucket_limit(0.001)}} == {"bucket": {"lt": 1}}
    assert filter_of(None) is None


def test_the_exact_answer_is_the_brute_force_over_the_documents_visible_after_each_write() -> None:
    n, k = 300, 10
    plan = _plan(n=n, seed=2)
    rng = np.random.default_rng(0)
    vec = rng.normal(size=(n, 8)).astype(np.float32)
    vec[7] = vec[11]  # a tie, broken by document id descending
    upd = rng.normal(size=(n, 8)).astype(np.float32)
    ids = np.array([f"d{i:03d}" for i in range(n)], dtype=object)
    q = vec[11].copy()
    state = State(plan, n)
    alive, version = set(plan.initial.tolist()), {}
    writes = [(plan.batches[0], "none")] + [(batch, kind) for batch in plan.batches for kind in ("ins", "upd", "del")]
    for step, (batch, kind) in enumerate(writes):  # write by write: inserts, then updates, then deletes
        if kind == "ins":
            alive |= set(batch.inserts.tolist())
        elif kind == "upd":
            version.update({int(i): 1 for i in batch.updates})
        elif kind == "del":
            alive -= set(batch.deletes.tolist())
        for sel in (None, 0.5, 0.1):
            limit = bucket_limit(sel) if sel is not None else None
            passing = [i for i in alive if limit is None or plan.bucket[i, version.get(i, 0)] < limit]
            score = {i: float((upd[i] if version.get(i) else vec[i]) @ q) for i in passing}
            want = sorted(score, key=lambda i: (-score[i], [-ord(c) for c in ids[i]]))[:k]
            got = state.exact(step, state.scores(step, q, vec, upd), sel, k, ids)
            assert got == want, (step, sel)
    assert step == STEPS * len(plan.batches)


def test_recall_counts_the_exact_documents_found_and_has_no_value_when_there_is_nothing_to_find() -> None:
    assert recall(["a", "x", "b"], ["a", "b", "c", "d"], 3) == 0.5
    assert recall(["a", "b", "c"], ["a", "b", "c"], 2) == 2 / 3
    assert recall(["a"], [], 10) is None


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ({"selectivities": [0.1, 0.1]}, "selectivities"),
        ({"selectivities": [0.0]}, "streaming"),
        ({"batch_size": 0}, "batch_size"),
        ({"order": "sorted"}, "order"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_a_bad_streaming_block_is_one_error_naming_the_field(block: dict, field: str) -> None:
    raw = {
        "name": "s",
        "datasets": [{"name": "scifact"}],
        "systems": [{"name": "l", "adapter": "lancedb", "params": {"path": "x"}}],
        "stress": {"streaming": block},
    }
    with pytest.raises(ConfigError) as err:
        parse_config(raw, "stress.yaml")
    assert field in str(err.value) and "stress.yaml" in str(err.value)


def test_the_live_figures_summarise_the_scored_live_queries_as_stored() -> None:
    """The live block of a stored streaming run is recomputed from its stream_queries.jsonl, key for key."""
    stored = TESTS / "fixtures" / "stress_v1" / "streaming"
    st = read_stress(stored).streaming
    selectivities = st.settings["selectivities"] if st is not None else None
    assert st is not None and isinstance(selectivities, list)
    sels = [None, *(float(x) for x in selectivities)]
    live = live_summary(list(read_live_queries(stored / "stream_queries.jsonl")), sels)
    assert live == st.live and live.to_dict() == st.live.to_dict()
