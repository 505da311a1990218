"""TREC qrels (`qid iter docid grade`) and run files (`qid Q0 docid rank score tag`).

Written files round-trip byte-stably: scores are written with Python's shortest exact float repr,
queries and judgements keep their order, and the rank column is the 1-based position in
trec_eval order (trec_eval itself ignores that column and re-sorts by score).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from retbench.data import Qrels, Run, _fnv1a_rows
from retbench.errors import InputError
from retbench.io.files import iter_lines, open_text


def _grade(token: str, path: Path, lineno: int) -> int:
    try:
        return int(token)
    except ValueError:
        try:
            value = float(token)
        except ValueError:
            value = float("nan")
        if value.is_integer():
            return int(value)
        raise InputError(f"grade must be an integer, got {token!r}", path=path, line=lineno, field="grade") from None


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file; a repeated (query, doc) judgement keeps the last grade, as trec_eval does."""
    p = Path(path)
    judgements: dict[str, dict[str, int]] = {}
    for lineno, line in iter_lines(p):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise InputError(
                f"expected 4 columns (query-id iteration doc-id grade), got {len(parts)}", path=p, line=lineno
            )
        qid, _, doc, grade = parts
        judgements.setdefault(qid, {})[doc] = _grade(grade, p, lineno)
    return Qrels(judgements)


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    with open_text(path, "wt") as fh:
        for qid, docs in qrels.items():
            for doc, grade in docs.items():
                fh.write(f"{qid} 0 {doc} {grade}\n")


def read_run(path: str | Path, name: str | None = None) -> Run:
    """Read a TREC run file. The rank column is ignored (trec_eval re-sorts by score).

    Large files are parsed column-wise with NumPy (about ten times faster than line by line); a
    file that does not parse cleanly that way (wrong column count, a bad score, non-ASCII ids) is
    read again line by line, which names the offending line.
    """
    p = Path(path)
    fast = _read_run_fast(p)
    if fast is None:
        return _read_run_lines(p, name)
    qids, offsets, docs, scores, hashes, tag = fast
    return Run(qids, offsets, docs, scores, name=name if name is not None else tag or p.stem, _owned=True, _doc_hash=hashes)


def _read_run_lines(p: Path, name: str | None) -> Run:
    qids: list[str] = []
    seen: dict[str, int] = {}
    per_query_docs: list[list[str]] = []
    per_query_scores: list[list[float]] = []
    tag = ""
    for lineno, line in iter_lines(p):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise InputError(
                f"expected 6 columns (query-id Q0 doc-id rank score tag), got {len(parts)}", path=p, line=lineno
            )
        qid, _, doc, _, score, tag = parts
        try:
            value = float(score)
        except ValueError:
            raise InputError(f"score must be a number, got {score!r}", path=p, line=lineno, field="score") from None
        if not np.isfinite(value):
            raise InputError(f"score must be finite, got {score!r}", path=p, line=lineno, field="score")
        i = seen.get(qid)
        if i is None:
            i = seen[qid] = len(qids)
            qids.append(qid)
            per_query_docs.append([])
            per_query_scores.append([])
        per_query_docs[i].append(doc)
        per_query_scores[i].append(value)
    lengths = [len(d) for d in per_query_docs]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    docs = np.array([d for ds in per_query_docs for d in ds], dtype=object)
    scores = np.array([s for ss in per_query_scores for s in ss], dtype=np.float64)
    return Run(qids, offsets, docs, scores, name=name if name is not None else tag or p.stem)


_BLOCK = 1 << 24  # bytes parsed at a time: bounds the temporary arrays


class _NotSimple(Exception):
    """The fast parser met something only the line reader handles (or reports) properly."""


def _text_column(windows: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Variable-length byte fields -> a fixed-width uint8 matrix, one field a row, NUL-padded.

    `windows` is a sliding-window view of the block (row i = the bytes from offset i on), so taking
    rows copies just the fields' bytes.
    """
    lens = ends - starts
    width = int(lens.max()) if len(lens) else 1
    mat = windows[starts, :width]
    mat[np.arange(width) >= lens[:, None]] = 0
    return mat


def _spaced(mat: np.ndarray) -> bytes:
    """A field matrix as one space-separated byte string, ready for str.split() or np.fromstring."""
    out = np.full((mat.shape[0], mat.shape[1] + 1), 32, dtype=np.uint8)
    out[:, :-1] = np.where(mat == 0, np.uint8(32), mat)
    return out.tobytes()


_POW10 = 10.0 ** np.arange(23)  # exact doubles


def _parse_scores(mat: np.ndarray) -> np.ndarray:
    """Score fields (NUL-padded rows) -> float64, exactly as strtod / float() parse them.

    Plain decimals with at most 15 digits (`12.345600`, `-0.5`, `3`: what most retrieval toolkits
    write) take Clinger's fast path: the digits form an integer M < 2^53 and the value is M / 10^f,
    one correctly rounded IEEE division of two exact doubles, hence the correctly rounded result.
    Anything else (more digits, exponents) is parsed by C strtod.
    """
    n, width = mat.shape
    digit = (mat >= 48) & (mat <= 57)
    dot = mat == 46
    sign = (mat[:, 0] == 45) | (mat[:, 0] == 43)
    body = np.ones((n, width), dtype=bool)
    body[:, 0] = ~sign
    filled = mat != 0
    n_digits = digit.sum(axis=1)
    simple = (
        np.all(digit | dot | ~filled | ~body, axis=1)
        & (dot.sum(axis=1) <= 1)
        & (n_digits >= 1)
        & (n_digits <= 15)
    )
    mantissa = np.zeros(n, dtype=np.int64)
    frac = np.zeros(n, dtype=np.int64)
    seen_dot = np.zeros(n, dtype=bool)
    for c in range(width):
        d = digit[:, c]
        mantissa = np.where(d, mantissa * 10 + (mat[:, c].astype(np.int64) - 48), mantissa)
        frac += d & seen_dot
        seen_dot |= dot[:, c]
    values = mantissa.astype(np.float64) / _POW10[np.minimum(frac, 22)]
    values = np.where(mat[:, 0] == 45, -values, values)
    rest = np.flatnonzero(~simple)
    if len(rest):
        try:
            values[rest] = np.fromstring(_spaced(mat[rest]), dtype=np.float64, sep=" ")
        except ValueError:
            raise _NotSimple from None
    return values


# byte classes: 0 part of a field, 1 whitespace as str.split() sees it in ASCII, 2 not ASCII
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = 1
_CLASS[128:] = 2


def _parse_block(block: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bytes]:
    """Whole lines of a run file -> (qids as an `S` array, doc ids as str objects, scores, doc id hashes, last tag)."""
    buf = np.frombuffer(block, dtype=np.uint8)
    cls = _CLASS[buf]
    if cls.max() == 2:
        raise _NotSimple  # non-ASCII ids (and Unicode whitespace): the line reader decodes them properly
    ws = cls.view(bool)
    # field boundaries alternate start, end, start, end, ... (the block ends with a newline)
    edges = np.flatnonzero(ws[1:] != ws[:-1]) + 1
    if not ws[0]:
        edges = np.concatenate([[0], edges])
    starts, ends = edges[0::2], edges[1::2]
    newlines = np.flatnonzero(buf == 10)
    per_line = np.diff(np.searchsorted(starts, newlines), prepend=0)
    if np.any((per_line != 0) & (per_line != 6)) or len(starts) != 6 * np.count_nonzero(per_line):
        raise _NotSimple
    starts, ends = starts.reshape(-1, 6), ends.reshape(-1, 6)
    n = len(starts)
    longest = int((ends - starts)[:, [0, 2, 4]].max()) if n else 1
    windows = np.lib.stride_tricks.sliding_window_view(np.concatenate([buf, np.zeros(longest, dtype=np.uint8)]), longest)
    qmat = _text_column(windows, starts[:, 0], ends[:, 0])
    qid = np.ascontiguousarray(qmat).view(f"S{qmat.shape[1]}").ravel()
    docs = np.empty(n, dtype=object)
    dmat = _text_column(windows, starts[:, 2], ends[:, 2])
    docs[:] = _spaced(dmat).decode("ascii").split()
    hashes = _fnv1a_rows(dmat)
    scores = _parse_scores(_text_column(windows, starts[:, 4], ends[:, 4]))
    if len(scores) != n or not np.isfinite(scores).all():
        raise _NotSimple
    tag = block[starts[-1, 5] : ends[-1, 5]] if n else b""
    return qid, docs, scores, hashes, tag


def _read_run_fast(p: Path) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, str] | None:
    """Column-wise parse of a run file, or None when the line reader must take over."""
    import gzip

    try:
        fh = gzip.open(p, "rb") if p.suffix == ".gz" else open(p, "rb")  # noqa: SIM115
    except OSError:
        return None
    seg_qids: list[str] = []
    seg_lens: list[int] = []
    doc_parts: list[np.ndarray] = []
    score_parts: list[np.ndarray] = []
    hash_parts: list[np.ndarray] = []
    tag = b""
    try:
        with fh:
            rest = b""
            while True:
                chunk = fh.read(_BLOCK)
                data = rest + chunk
                if not chunk:
                    block, rest = data, b""
                else:
                    cut = data.rfind(b"\n") + 1
                    block, rest = data[:cut], data[cut:]
                if block.strip():
                    qid, docs, scores, hashes, last_tag = _parse_block(block if block.endswith(b"\n") else block + b"\n")
                    change = np.flatnonzero(qid[1:] != qid[:-1]) + 1
                    bounds = np.concatenate([[0], change, [len(qid)]])
                    heads = qid[bounds[:-1]].astype("U").tolist()
                    lens = np.diff(bounds).tolist()
                    if seg_qids and heads and heads[0] == seg_qids[-1]:
                        seg_lens[-1] += lens[0]
                        heads, lens = heads[1:], lens[1:]
                    seg_qids.extend(heads)
                    seg_lens.extend(lens)
                    doc_parts.append(docs)
                    score_parts.append(scores)
                    hash_parts.append(hashes)
                    tag = last_tag or tag
                if not chunk:
                    break
    except (_NotSimple, OSError, EOFError):
        return None
    except Exception as exc:  # zlib and gzip errors: the line reader reports them with the line
        if type(exc).__module__ in ("zlib", "gzip") or isinstance(exc, ValueError):
            return None
        raise
    docs_all = np.concatenate(doc_parts) if doc_parts else np.zeros(0, dtype=object)
    scores_all = np.concatenate(score_parts) if score_parts else np.zeros(0)
    hashes_all = np.concatenate(hash_parts) if hash_parts else np.zeros(0, dtype=np.uint64)
    first: dict[str, int] = {}
    seg_query = [first.setdefault(q, len(first)) for q in seg_qids]
    qids = list(first)
    if len(qids) == len(seg_qids):
        lengths = np.asarray(seg_lens, dtype=np.int64)
    else:  # a query's lines are not contiguous: gather them, keeping file order within the query
        line_query = np.repeat(np.asarray(seg_query, dtype=np.int64), seg_lens)
        order = np.argsort(line_query, kind="stable")
        docs_all, scores_all, hashes_all = docs_all[order], scores_all[order], hashes_all[order]
        lengths = np.bincount(line_query, minlength=len(qids)).astype(np.int64)
    offsets = np.zeros(len(qids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return qids, offsets, docs_all, scores_all, hashes_all, tag.decode("ascii", "replace")


def write_run(run: Run, path: str | Path, tag: str | None = None, query_ids: Iterable[str] | None = None) -> None:
    """Write a run in trec_eval order; queries with no ranking write no lines (status lives elsewhere)."""
    tag = (tag or run.name or "retbench").replace(" ", "_")
    with open_text(path, "wt") as fh:
        for qid in query_ids if query_ids is not None else run.query_ids:
            s = run._slice(qid)
            docs = run.doc_ids[s]
            scores = run.scores[s].tolist()
            fh.writelines(
                f"{qid} Q0 {doc} {rank} {score!r} {tag}\n" for rank, (doc, score) in enumerate(zip(docs, scores, strict=True), 1)
            )
