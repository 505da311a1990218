"""Relevance judges beyond id qrels: spans, documents, anchors, exact text and cosine threshold.

Each judge turns a Run of chunk ids into a `Judgement`: the same `GainMatrix` that id qrels give
(so every rank metric in `metrics.ranking` works with every notion of relevance) plus the gold
*items* each ranked chunk matched, from which item-level recall and multi-hop recall follow.

How the judges decide (a "gold item" is a gold excerpt, anchor, text or embedding of a query):

- spans: a chunk matches a gold excerpt when both lie in the same document and share at least
  `min_chars` characters and at least `min_fraction` of the excerpt;
- anchors: same `rel_path` (the chunk's document id) and the chunk's `heading_path`
  starts with the gold `heading_path`, compared part by part after normalizing the delimiter
  (`>`, `›`, `»`) and whitespace; optionally the chunk text must contain the gold snippet;
- exact text: the chunk text equals a gold text (edges stripped; optionally whitespace
  collapsed);
- cosine: the cosine of the chunk's embedding and a gold embedding is >= threshold.

Grades and counts. A ranked chunk's grade is 1 when it matches any gold item of its query, else 0.
Two different things get counted, on purpose:

- the GainMatrix's relevant count (its ideal) is the number of *chunks of the collection* that match
  a gold item (for spans: every chunk of the chunk set overlapping an excerpt). So every metric of
  `metrics.ranking` (nDCG, MAP, R-precision, P@k, MRR, hit@k, chunk-level recall) reads as on id
  qrels of this chunking and stays within [0, 1];
- `Judgement.recall` (and `recall_any` / `recall_all` / `f1`) count *gold items*: recall@k is the
  share of a query's gold excerpts (anchors, texts, embeddings) matched by some top-k chunk. That
  is the recall@k reported for span relevance (`evaluate(run, judgement, ...)` uses it for `recall@k`).

Why not one count: several chunks can overlap one excerpt and one chunk several excerpts, so
"relevant chunks retrieved / gold excerpts" can exceed 1 (and nDCG with an ideal of one grade per
excerpt can exceed 1), while chunk-level recall rewards a chunker that splits an excerpt into many
relevant chunks and ignores excerpts no chunk covers. Excerpt recall compares chunkers fairly.

Token-level precision, recall and IoU (Chroma's chunking study) are computed on character ranges,
which is exact and tokenizer-free: R = union of the top-k chunks' ranges (overlapping chunks
counted once), G = union of the gold excerpts; precision = |R∩G|/|R|, recall = |R∩G|/|G|,
IoU = |R∩G|/|R∪G|. (Chroma sums the retrieved chunks' lengths without taking their union, so
overlapping chunkers are penalized there for repeated text; here repeated text is counted once.)

A context budget in tokens turns into a per-query cutoff: the top chunks are taken in rank order
while their cumulative token count stays within the budget; the first chunk that would exceed it
and everything after are left out.
"""

from retbench.metrics.gain import GainMatrix, check_level
from retbench.metrics.judges.anchors import Anchor, judge_anchors, normalize_heading_path
from retbench.metrics.judges.common import ITEM_METRICS, Judgement
from retbench.metrics.judges.cosine import judge_cosine
from retbench.metrics.judges.documents import judge_documents, pool_documents, top_documents
from retbench.metrics.judges.qrels import judge_qrels, run_rows
from retbench.metrics.judges.spans import budget_cutoffs, judge_spans, overlap_scores
from retbench.metrics.judges.text import judge_text

__all__ = [
    "ITEM_METRICS",
    "Anchor",
    "GainMatrix",
    "Judgement",
    "budget_cutoffs",
    "check_level",
    "judge_anchors",
    "judge_cosine",
    "judge_documents",
    "judge_qrels",
    "judge_spans",
    "judge_text",
    "normalize_heading_path",
    "overlap_scores",
    "pool_documents",
    "run_rows",
    "top_documents",
]
