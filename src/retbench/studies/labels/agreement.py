"""Agreement between a judge's grades and human labels, with percentile bootstrap 95% CIs.

- accuracy = share of pairs where the judge's binary call (grade >= `relevant_from`) equals the human's;
- Cohen's kappa = (p_o - p_e) / (1 - p_e), p_o the accuracy and p_e the agreement expected by chance
  from both sides' marginals (Cohen 1960); undefined (None) when p_e = 1;
- confusion: counts of (human 0/1) x (judge grade 0..3), and each cell's share with its CI;
- Kendall's tau-b between two system orderings (Kendall 1945, ties corrected), for "does the judge rank
  systems the way people do";
- spot-check disagreement (seed rules for judge reliability): grades more than 1 apart, or a different
  binary call, between two judgements of the same pair;
- for a continuous judge score (the expected grade from token probabilities): ROC AUC, the
  Mann-Whitney form P(score of a relevant pair > score of a non-relevant pair) + 1/2 P(tie)
  (Hanley & McNeil 1982), and the threshold on the score that maximizes accuracy on the same pairs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def kappa(human: np.ndarray, judge: np.ndarray) -> float | None:
    if len(human) == 0:
        return None
    po = float(np.mean(human == judge))
    ph, pj = float(np.mean(human)), float(np.mean(judge))
    pe = ph * pj + (1 - ph) * (1 - pj)
    return None if pe >= 1.0 else (po - pe) / (1 - pe)


def _ci(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    vals = [v for v in values if v is not None and not np.isnan(v)]
    if not vals:
        return None, None
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def agreement(
    human: Sequence[int], grades: Sequence[int], relevant_from: int = 2, resamples: int = 1000, seed: int = 0
) -> dict[str, object]:
    """Accuracy, kappa and the confusion matrix of binary human labels vs 0-3 judge grades, with CIs."""
    h = np.asarray(human, dtype=np.int64).clip(0, 1)
    g = np.asarray(grades, dtype=np.int64)
    n = len(h)
    out: dict[str, object] = {"n": n, "relevant_from": relevant_from}
    if n == 0:
        return out
    b = (g >= relevant_from).astype(np.int64)
    confusion = np.zeros((2, 4), dtype=np.int64)
    np.add.at(confusion, (h, g.clip(0, 3)), 1)
    rng = np.random.default_rng(seed)
    accs: list[float] = []
    kaps: list[float | None] = []
    cells: list[np.ndarray] = []
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        accs.append(float(np.mean(h[idx] == b[idx])))
        kaps.append(kappa(h[idx], b[idx]))
        cm = np.zeros((2, 4))
        np.add.at(cm, (h[idx], g[idx].clip(0, 3)), 1)
        cells.append(cm / n)
    acc = float(np.mean(h == b))
    k = kappa(h, b)
    out["accuracy"] = {"value": acc, **dict(zip(("ci_low", "ci_high"), _ci(accs), strict=True))}
    out["kappa"] = {"value": k, **dict(zip(("ci_low", "ci_high"), _ci(kaps), strict=True))}
    out["confusion"] = confusion.tolist()
    stack = np.stack(cells)
    out["confusion_share_ci"] = (
        np.stack([np.percentile(stack, 2.5, axis=0), np.percentile(stack, 97.5, axis=0)], axis=-1).round(4).tolist()
    )
    return out


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Kendall's tau-b of two score lists over the same systems (None with fewer than 2 or all tied)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = len(x)
    if n < 2:
        return None
    i, j = np.triu_indices(n, 1)
    dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    s = float(np.sum(dx * dy))
    tx, ty = float(np.sum(dx != 0)), float(np.sum(dy != 0))
    return None if tx == 0 or ty == 0 else s / np.sqrt(tx * ty)


def disagreement(first: Sequence[int], second: Sequence[int], relevant_from: int = 2) -> float | None:
    """Share of pairs whose two grades differ by more than 1 point or fall on different sides of `relevant_from`."""
    a, b = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    if len(a) == 0:
        return None
    differ = (np.abs(a - b) > 1) | ((a >= relevant_from) != (b >= relevant_from))
    return float(np.mean(differ))


def auc(human: Sequence[int], scores: Sequence[float]) -> float | None:
    """ROC AUC of `scores` for binary `human` labels (ties count half); None unless both classes occur."""
    h = np.asarray(human, dtype=np.int64).clip(0, 1)
    x = np.asarray(scores, dtype=float)
    pos, neg = x[h == 1], x[h == 0]
    if len(pos) == 0 or len(neg) == 0:
        return None
    diff = pos[:, None] - neg[None, :]
    return float((np.sum(diff > 0) + 0.5 * np.sum(diff == 0)) / diff.size)


def _best_threshold(h: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """The cut t on `x` (score >= t is relevant) with the highest accuracy on (h, x), and that accuracy."""
    cuts = np.unique(x)
    accs = ((x[None, :] >= cuts[:, None]) == h[None, :].astype(bool)).mean(axis=1)
    best = int(np.argmax(accs))
    return float(cuts[best]), float(accs[best])


def graded_agreement(
    human: Sequence[int], scores: Sequence[float], resamples: int = 1000, seed: int = 0, folds: int = 5
) -> dict[str, object]:
    """AUC of a continuous judge score with a bootstrap CI, and the accuracy-maximizing threshold
    (score >= t is relevant). The threshold's accuracy on the pairs it was chosen on is optimistic, so
    `accuracy_cross_validated` is also given: each of `folds` seeded folds scored at the threshold the
    other folds choose (the honest figure for a threshold used on new pairs)."""
    h = np.asarray(human, dtype=np.int64).clip(0, 1)
    x = np.asarray(scores, dtype=float)
    out: dict[str, object] = {"n": len(h), "score": "expected grade (sum of grade x probability at the grade token)"}
    rng = np.random.default_rng(seed)
    boots = [
        auc(h[idx].tolist(), x[idx].tolist()) for idx in (rng.integers(0, len(h), len(h)) for _ in range(resamples))
    ]
    value = auc(h.tolist(), x.tolist())
    out["auc"] = {
        "value": value,
        **dict(zip(("ci_low", "ci_high"), _ci(boots) if value is not None else (None, None), strict=True)),
    }
    if len(h) == 0:
        return {**out, "threshold": None, "accuracy_at_threshold": None, "accuracy_cross_validated": None}
    out["threshold"], out["accuracy_at_threshold"] = _best_threshold(h, x)
    fold = rng.permutation(len(h)) % max(2, min(folds, len(h)))
    right = 0
    for f in np.unique(fold):
        t, _ = _best_threshold(h[fold != f], x[fold != f])
        right += int(np.sum((x[fold == f] >= t) == h[fold == f].astype(bool)))
    out["accuracy_cross_validated"] = right / len(h) if len(h) >= 2 else None
    return out


def weighted_kappa(human: Sequence[int], judge: Sequence[int], high: int) -> float | None:
    """Cohen's weighted kappa with quadratic weights on the grades 0..high (Cohen 1968):
    1 - sum(w * observed) / sum(w * expected), w_ij = (i - j)^2 / high^2, expected from the marginals;
    None with no pair or when chance disagreement is 0 (both sides give one grade)."""
    h, j = np.asarray(human, dtype=np.int64), np.asarray(judge, dtype=np.int64)
    if len(h) == 0:
        return None
    size = high + 1
    observed = np.zeros((size, size))
    np.add.at(observed, (h, j), 1.0)
    observed /= len(h)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    grid = np.arange(size)
    w = (grid[:, None] - grid[None, :]) ** 2 / float(high**2)
    chance = float(np.sum(w * expected))
    return None if chance <= 0 else 1.0 - float(np.sum(w * observed)) / chance


def verdict_agreement(
    human: Sequence[int], judge: Sequence[int], high: int | None, resamples: int = 1000, seed: int = 0
) -> dict[str, object]:
    """A rubric's verdicts against people's: accuracy (exact agreement) and Cohen's kappa on a yes/no scale
    (`high` None), or quadratic weighted kappa on the grades 0..high; each with a bootstrap 95% CI."""
    h, j = np.asarray(human, dtype=np.int64), np.asarray(judge, dtype=np.int64)
    n = len(h)
    name = "kappa" if high is None else "weighted_kappa"

    def k(a: np.ndarray, b: np.ndarray) -> float | None:
        return kappa(a, b) if high is None else weighted_kappa(a.tolist(), b.tolist(), high)

    out: dict[str, object] = {"n": n}
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    idxs = [rng.integers(0, n, n) for _ in range(resamples)]
    accs = [float(np.mean(h[i] == j[i])) for i in idxs]
    kaps = [k(h[i], j[i]) for i in idxs]
    out["accuracy"] = {"value": float(np.mean(h == j)), **dict(zip(("ci_low", "ci_high"), _ci(accs), strict=True))}
    out[name] = {"value": k(h, j), **dict(zip(("ci_low", "ci_high"), _ci(kaps), strict=True))}
    return out
