"""Train a small cross-encoder: no published cross-encoder weights can be installed from a registry here.

`training_pairs` draws (query, document, label) triples from a dataset split, the relevant documents
as positives and, as negatives, either BM25's best non-relevant documents (hard negatives: what a
reranker must learn to push down) or random ones. `train_cross_encoder` fine-tunes a
sentence-transformers `CrossEncoder` with one output from any BERT-style folder (e.g. the packaged
all-MiniLM-L6-v2: its encoder weights plus a fresh classification head) with AdamW and a linear
warm-up, then saves it as a CrossEncoder folder. Two losses:

- `lce` (default): localized contrastive estimation (Gao, Dai and Callan, "Rethink Training of BERT
  Rerankers in Multi-Stage Retrieval Pipeline", ECIR 2021): each positive forms a group with its query's
  negatives and the loss is the softmax cross-entropy of the positive within the group,
  -log(exp(s_pos) / sum_group exp(s)). It trains the ordering a reranker is used for.
- `bce`: binary cross-entropy on each pair's logit. On a few thousand pairs with hard negatives it tends
  to settle on the base rate (every pair scored near the share of positives), which ranks nothing.

A model trained here is the project's own model: label it so wherever its numbers appear, and train
it on a train split only (SciFact's test queries must never be seen).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retbench.data import Dataset


def training_pairs(
    dataset: Dataset,
    split: str = "train",
    *,
    max_queries: int | None = None,
    negatives: int = 3,
    hard: bool = True,
    seed: int = 0,
) -> list[tuple[str, str, float]]:
    """(query, document text, 1.0 or 0.0) triples from `split`'s qrels (see the module docstring)."""
    qrels = dataset.split(split)
    corpus = dataset.corpus
    qids = [q for q in qrels if q in dataset.queries and any(g > 0 for g in qrels[q].values())]
    rng = random.Random(seed)
    if max_queries is not None and max_queries < len(qids):
        qids = sorted(rng.sample(qids, max_queries), key=qids.index)
    ranked: dict[str, list[str]] = {}
    if hard and negatives:
        from retbench.retrievers.bm25 import BM25SRetriever

        bm25 = BM25SRetriever()
        bm25.index(corpus)
        rankings = bm25.search_batch([dataset.queries[q] for q in qids], negatives + 20)
        ranked = {q: [d for d, _ in r] for q, r in zip(qids, rankings, strict=True)}
    out: list[tuple[str, str, float]] = []
    ids = list(corpus.ids)
    for q in qids:
        text = dataset.queries[q]
        relevant = {d for d, g in qrels[q].items() if g > 0}
        for d in sorted(relevant):
            if d in corpus:
                out.append((text, corpus.joined(corpus.index[d]), 1.0))
        pool = [d for d in ranked.get(q, []) if d not in relevant]
        while len(pool) < negatives:
            d = rng.choice(ids)
            if d not in relevant and d not in pool:
                pool.append(d)
        for d in pool[:negatives]:
            out.append((text, corpus.joined(corpus.index[d]), 0.0))
    return out


def train_cross_encoder(
    base_model: str | Path,
    examples: Sequence[tuple[str, str, float]],
    output: str | Path,
    *,
    epochs: int = 1,
    batch_size: int = 16,
    learning_rate: float = 3e-5,
    max_length: int = 256,
    warmup: float = 0.1,
    seed: int = 0,
    loss: str = "lce",
    head_learning_rate: float | None = 1e-3,
    log: Any = None,
) -> Path:
    """Fine-tune a one-output CrossEncoder from `base_model` on `examples`; save it to `output`.

    `batch_size` counts pairs per step; with `lce` a step takes as many whole groups as fit (at least one).
    """
    if loss not in ("lce", "bce"):
        raise ValueError(f"loss must be 'lce' or 'bce', got {loss!r}")
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(seed)
    rng = random.Random(seed)
    ce = CrossEncoder(str(base_model), num_labels=1, max_length=max_length, device="cpu")
    model, tokenizer = ce.model, ce.tokenizer
    batches = _batches(examples, batch_size, loss)
    # The new head (and the pooler in front of it, untrained in a mean-pooling sentence encoder) gets its own,
    # larger rate: its outputs start near 0.05 in size, so at the encoder's rate Adam's bounded steps cannot
    # spread the logits within a few hundred steps and every pair keeps the same score.
    head: list[Any] = []
    body: list[Any] = []
    for n, p in model.named_parameters():
        (head if n.startswith("classifier.") or ".pooler." in n else body).append(p)
    optimizer = torch.optim.AdamW(
        [{"params": body, "lr": learning_rate}, {"params": head, "lr": head_learning_rate or learning_rate}],
        weight_decay=0.01,
    )
    steps = max(1, epochs * len(batches(random.Random(seed))))
    warm = max(1, int(warmup * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    bce = torch.nn.BCEWithLogitsLoss()
    model.train()
    step = 0
    for epoch in range(epochs):
        for batch, sizes in batches(rng):
            features = tokenizer(
                [q for q, _, _ in batch],
                [d for _, d, _ in batch],
                padding=True,
                truncation="longest_first",
                max_length=max_length,
                return_tensors="pt",
            )
            logits = model(**features).logits.view(-1)
            if loss == "bce":
                value = bce(logits, torch.tensor([y for _, _, y in batch], dtype=torch.float32))
            else:  # each group: the positive first, then its negatives
                groups = torch.split(logits, sizes)
                value = torch.stack([torch.logsumexp(g, 0) - g[0] for g in groups]).mean()
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            if log is not None and step % 50 == 0:
                log(f"epoch {epoch + 1} step {step}/{steps} loss {value.item():.4f}")
    model.eval()
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    ce.save(str(out))
    return out


def _batches(examples: Sequence[tuple[str, str, float]], batch_size: int, loss: str) -> Any:
    """A function of a seeded Random giving one epoch's shuffled batches as (pairs, group sizes).

    `bce`: single pairs, `batch_size` per batch. `lce`: each positive with all of its query's negatives
    (the positive first), as many groups per batch as fit in `batch_size` pairs.
    """
    if loss == "bce":
        units = [[e] for e in examples]
    else:
        negatives: dict[str, list[tuple[str, str, float]]] = {}
        for e in examples:
            if e[2] <= 0:
                negatives.setdefault(e[0], []).append(e)
        units = [[e, *negatives.get(e[0], [])] for e in examples if e[2] > 0 and negatives.get(e[0])]
        if not units:
            raise ValueError("the lce loss needs queries with both a positive and a negative example")

    def epoch(rng: random.Random) -> list[tuple[list[tuple[str, str, float]], list[int]]]:
        order = list(range(len(units)))
        rng.shuffle(order)
        out: list[tuple[list[tuple[str, str, float]], list[int]]] = []
        pairs: list[tuple[str, str, float]] = []
        sizes: list[int] = []
        for i in order:
            if pairs and len(pairs) + len(units[i]) > batch_size:
                out.append((pairs, sizes))
                pairs, sizes = [], []
            pairs += units[i]
            sizes.append(len(units[i]))
        if pairs:
            out.append((pairs, sizes))
        return out

    return epoch
