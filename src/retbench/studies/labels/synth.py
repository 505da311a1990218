"""Synthetic questions for corpora without queries, written as a golden set for people to review.

For each sampled document the model writes one question and quotes the evidence that answers it;
the evidence is located in the document (exact, then case- and whitespace-insensitive) and stored as
a character span (`source_span`), or left null when the model quoted text that is not there.
Every sample carries `review: pending`; a person sets `accept` or `reject`. Re-running keeps every
reviewed sample exactly as it is (its document is not asked again), and the golden-set reader drops
rejected samples.

Lexical overlap per question = |stemmed content words of the question that occur in the document| /
|stemmed content words of the question| (the BM25 tokenizer: English stopwords removed, Snowball
stemming). Questions that copy the document's words inflate BM25 recall against dense retrievers
(Thakur et al. 2021 discuss this bias for BEIR's lexically built sets); the diagnostic shows how large it is.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retbench.data import Corpus
from retbench.io.files import write_jsonl
from retbench.jsontypes import JSONObject
from retbench.llm.judge import Judge
from retbench.llm.verdicts import parse_fields

if TYPE_CHECKING:  # loaded on first use: its stemmer is not needed to read reviewed documents
    from retbench.retrievers.tokenize import Tokenizer

REVIEW_STATES = ("pending", "accept", "reject")


def parse_question(text: str) -> tuple[dict[str, str] | None, str]:
    return parse_fields(text, ("question", "evidence"))


def reviewed_documents(path: Path) -> dict[str, JSONObject]:
    """Samples of an existing golden set that a person has accepted or rejected, by source document."""
    out: dict[str, JSONObject] = {}
    if not path.is_file():
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                if rec.get("review") in ("accept", "reject"):
                    out[rec["metadata"]["source_span"]["doc_id"]] = rec
    return out


def sample_documents(corpus: Corpus, n: int, seed: int, keep: Mapping[str, object] | None = None) -> list[str]:
    """A seeded sample of n document ids, excluding documents whose question was already reviewed."""
    keep = keep or {}
    ids = [d for d in corpus.ids if d not in keep]
    return random.Random(seed).sample(ids, min(n, len(ids)))


def synth_items(corpus: Corpus, doc_ids: Sequence[str], max_chars: int) -> list[tuple[str, dict[str, str]]]:
    return [(d, {"passage": _text(corpus, d)[:max_chars]}) for d in doc_ids]


def _text(corpus: Corpus, doc_id: str) -> str:
    return corpus.joined(corpus.index[doc_id])


def find_span(document: str, evidence: str) -> tuple[int, int] | None:
    """Where the quoted evidence is in the document: exact, else ignoring case and runs of whitespace."""
    at = document.find(evidence)
    if at >= 0:
        return at, at + len(evidence)
    words = [re.escape(w) for w in evidence.split()]
    if not words:
        return None
    m = re.search(r"\s+".join(words), document, flags=re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def lexical_overlap(question: str, document: str, tokenizer: Tokenizer | None = None) -> float:
    """Share of the question's stemmed content words that occur in the document (0 when it has none)."""
    if tokenizer is None:
        from retbench.retrievers.tokenize import Tokenizer

        tokenizer = Tokenizer()
    q = set(tokenizer.tokenize([question])[0])
    if not q:
        return 0.0
    return len(q & set(tokenizer.tokenize([document])[0])) / len(q)


def synthesize(
    judge: Judge, corpus: Corpus, doc_ids: Sequence[str], output: Path, *, max_chars: int = 1500
) -> dict[str, Any]:
    """Ask for a question per document; write reviewed samples unchanged plus the new ones as JSONL."""
    from retbench.retrievers.tokenize import Tokenizer

    tokenizer = Tokenizer()
    reviewed = reviewed_documents(output)
    verdicts = judge.judge(synth_items(corpus, doc_ids, max_chars))
    statuses: dict[str, int] = {}
    rows, questions = list(reviewed.values()), []
    identity = judge.identity.to_dict()
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
        if not v.ok:
            continue
        doc = _text(corpus, v.key)
        span = find_span(doc, v.value["evidence"])
        overlap = lexical_overlap(v.value["question"], doc, tokenizer)
        sid = f"synth-{v.key}"
        rows.append(
            {
                "id": sid,
                "input": v.value["question"],
                "expected_output": [v.key],
                "review": "pending",
                "metadata": {
                    "source_span": {
                        "doc_id": v.key,
                        "start": span[0] if span else None,
                        "end": span[1] if span else None,
                        "text": v.value["evidence"],
                        "found": span is not None,
                    },
                    "lexical_overlap": round(overlap, 4),
                    "synthetic": {
                        "judge": identity["key"],
                        "model": identity["model"],
                        "prompt": identity["prompt"]["id"],
                    },
                },
            }
        )
        questions.append({"id": sid, "question": v.value["question"], "overlap": overlap})
    write_jsonl(output, rows)
    overlaps = [q["overlap"] for q in questions]
    return {
        "statuses": statuses,
        "questions": questions,
        "kept_reviewed": len(reviewed),
        "mean_overlap": sum(overlaps) / len(overlaps) if overlaps else 0.0,
    }
