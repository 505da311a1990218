"""Columnar run files: a run as an Arrow IPC file (`run.arrow`) or Parquet, beside its TREC text.

The TREC text stays the interchange (trec_eval, ranx and pytrec_eval read it); the columnar copy is what
retbench reads fastest. Reading 10M text lines is bound by parsing them; an uncompressed Arrow IPC file
is memory-mapped and its columns are used where they lie, so a run is ready in the time it takes to
check it. `read_run` (io/trec.py) tells the formats apart by their first bytes (`ARROW1`, `PAR1`), so every
reader that takes a run file takes a columnar one.

The table has one row per ranked document, queries contiguous and each ranking in trec_eval order (score
descending, ties by doc id descending), as `write_run` writes the text:

    query    dictionary<int32, string>   the query id (the dictionary lists the queries in file order)
    doc      string                      the document id
    score    float64
    doc_key  uint64                      the doc id's 64-bit key (`data.keys`), what judging compares

and schema metadata: `retbench.format` (`run-columns/1`), `retbench.name` (the run tag), `retbench.rows` and
`retbench.queries` (the counts written), `retbench.keys` (the key scheme, and whether every key is exact) and
`retbench.fingerprint`: `sha256:` of the rankings (`table_fingerprint`), the same for a run whichever form it was
read from, so `retbench runs convert` prints the same fingerprint for a text file and its copy. A file whose
metadata and counts match is known to hold distinct ids per query and its stored keys are used; the ranking
order is checked all the same. Files from elsewhere (pandas, Polars, DuckDB) need only `query` and `doc` as
strings (dictionary-encoded or not, in any row order) and a numeric `score`; they are checked as a text file is
(ids non-empty, without whitespace or control bytes; scores finite; a doc listed twice in a query keeps its
first row), and ordered as trec_eval orders them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retbench.data import Run
from retbench.errors import InputError
from retbench.io.files import replace_atomically
from retbench.io.trec_columns import (
    _UNICODE_SPACE,
    ArrowIds,
    array_buffers,
    column_keys,
    columnar_kind,
    numbers,
    offsets_of,
    query_segments,
    run_tag,
    take_rows,
)

if TYPE_CHECKING:
    import pyarrow as pa

FORMAT = "run-columns/1"
#: the scheme of the `doc_key` column: `retbench.data.keys.keys_from_bytes` of each doc id's UTF-8 bytes
KEYS = "keys/1"
PARQUET_SUFFIXES = (".parquet", ".pq")


def _strings(values: Sequence[str] | np.ndarray) -> pa.Array:
    """A UTF-8 string array built from its buffers: `pa.array` on Python objects imports pandas to ask whether
    they are array-like (about 0.4 s, and the unit tier promises no pandas). Beyond 32-bit offsets it falls
    back to `pa.array`, which picks the layout."""
    import pyarrow as pa

    encoded = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    if offsets[-1] >= 2**31:
        return pa.array(values, pa.string())
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


# -- writing ----------------------------------------------------------------------------------------------
def run_table(run: Run, tag: str | None = None) -> pa.Table:
    """The run's rankings as the columnar table (queries without a ranked doc are left out, as in the text),
    with its fingerprint in the schema metadata."""
    import pyarrow as pa

    lengths = np.diff(run.offsets)
    ranked = np.flatnonzero(lengths > 0)
    query_ids = [run.query_ids[i] for i in ranked.tolist()]
    rows = np.repeat(np.arange(len(ranked), dtype=np.int32), lengths[ranked])
    query = pa.DictionaryArray.from_arrays(
        pa.Array.from_buffers(pa.int32(), len(rows), [None, pa.py_buffer(rows)]), _strings(query_ids)
    )
    doc = _strings(run.doc_ids)
    score = pa.Array.from_buffers(pa.float64(), len(run.scores), [None, pa.py_buffer(run.scores)])
    keys, exact = column_keys(pa.chunked_array([doc], pa.string()))
    doc_key = pa.Array.from_buffers(pa.uint64(), len(keys), [None, pa.py_buffer(keys)])
    table = pa.table({"query": query, "doc": doc, "score": score, "doc_key": doc_key})
    meta = {
        "retbench.format": FORMAT,
        "retbench.rows": str(len(table)),
        "retbench.queries": str(len(query_ids)),
        "retbench.keys": KEYS + (":exact" if exact else ":hashed"),
        "retbench.name": run_tag(tag or run.name),
        "retbench.fingerprint": table_fingerprint(query_ids, lengths[ranked], doc, run.scores),
    }
    return table.replace_schema_metadata(meta)


def table_fingerprint(
    query_ids: list[str], lengths: np.ndarray, doc: pa.Array | pa.ChunkedArray, scores: np.ndarray
) -> str:
    """`sha256:` of a run's rankings: each query id with its ranking's length, then every doc id's length
    and bytes, then the scores as little-endian float64, all in trec_eval order (so chunking or the file's
    form do not change it)."""
    h = hashlib.sha256()
    h.update("\n".join(query_ids).encode("utf-8") + b"\n")
    h.update(np.ascontiguousarray(lengths, dtype="<i8").tobytes())
    ids = hashlib.sha256()
    for chunk in getattr(doc, "chunks", [doc]):
        offsets, data = array_buffers(chunk)
        h.update(np.diff(offsets).astype("<i8").tobytes())
        ids.update(data[int(offsets[0]) : int(offsets[-1])].tobytes())
    h.update(ids.digest())
    h.update(np.ascontiguousarray(scores, dtype="<f8").tobytes())
    return "sha256:" + h.hexdigest()


def run_fingerprint(run: Run) -> str:
    """The fingerprint a columnar copy of `run` carries (`table_fingerprint`)."""
    return str(run_table(run).schema.metadata[b"retbench.fingerprint"].decode())


def write_run_columns(run: Run, path: str | Path, tag: str | None = None) -> str:
    """Write the columnar file, atomically: Parquet for a `.parquet` path, else Arrow IPC. Returns its fingerprint."""
    import pyarrow as pa

    p = Path(path)
    table = run_table(run, tag)

    def write(tmp: Path) -> None:
        if p.suffix in PARQUET_SUFFIXES:
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        else:
            with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table, max_chunksize=_BATCH_ROWS)

    replace_atomically(p, write)
    return str(table.schema.metadata[b"retbench.fingerprint"].decode())


_BATCH_ROWS = 1 << 24  # rows per record batch: a run of up to 16M ranked docs is one batch, read without a copy


# -- reading ----------------------------------------------------------------------------------------------
def read_run_columns(path: str | Path, name: str | None = None) -> Run:
    """Read a columnar run file (Arrow IPC or Parquet; see the module docstring for its columns)."""
    import pyarrow as pa

    p = Path(path)
    kind = columnar_kind(p)
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            table = pq.ParquetFile(p, memory_map=True).read()  # read_table loads the dataset layer (and pandas)
        else:
            with pa.memory_map(str(p)) as source:
                table = pa.ipc.open_file(source).read_all()  # zero-copy: the columns stay in the mapped file
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable {kind or 'columnar'} run file: {exc}", path=p) from None
    meta = {k.decode(): v.decode(errors="replace") for k, v in (table.schema.metadata or {}).items()}
    for field in ("query", "doc", "score"):
        if field not in table.column_names:
            have = ", ".join(table.column_names) or "none"
            raise InputError(f"a columnar run needs columns query, doc and score (have: {have})", path=p, field=field)
    trusted = _written_here(meta, table)
    segments = _dictionary_segments(table.column("query"))
    query = None if segments is not None else _ids(table, "query", p)
    doc = _ids(table, "doc", p)
    score = table.column("score")
    if not pa.types.is_floating(score.type) and not pa.types.is_integer(score.type):
        raise InputError(f"scores must be numbers, not {score.type}", path=p, field="score")
    _no_nulls(score, "score", p)
    scores = _flat(score if score.type == pa.float64() else score.cast(pa.float64()), np.float64)
    if len(scores) and not np.isfinite(scores.sum()):
        raise InputError(
            f"score of row {int(np.flatnonzero(~np.isfinite(scores))[0])} is not finite", path=p, field="score"
        )
    key_column = table.column("doc_key") if "doc_key" in table.column_names else None
    del table
    qids, lens, order = segments if segments is not None else query_segments(query)
    if order is not None:  # a query's rows are not contiguous: gather them, keeping row order within the query
        taken = take_rows(doc, order)
        if taken is None:
            raise InputError("more than 2 GiB of doc ids in one column: write the queries' rows together", path=p)
        doc, scores = taken, scores[order]
    stored = _stored_keys(meta, key_column) if trusted and order is None else None
    keys, exact = stored if stored is not None else column_keys(doc)
    tag = meta.get("retbench.name", "")
    return Run.from_keyed_ids(
        qids,
        offsets_of(lens),
        ArrowIds(doc),
        keys,
        exact,
        scores,
        name=name if name is not None else tag or p.stem,
        unique=trusted and order is None,
    )


def _written_here(meta: dict[str, str], table: pa.Table) -> bool:
    """Whether the file is as `write_run_columns` wrote it: its format, row count and query count recorded, so
    each query's doc ids are known distinct (the duplicate check is skipped; the order is still checked). A
    table filtered or joined by other tools keeps the metadata but not the counts, and is checked in full."""
    if meta.get("retbench.format") != FORMAT:
        return False
    try:
        return int(meta.get("retbench.rows", -1)) == len(table) and int(meta.get("retbench.queries", -1)) == len(
            table.column("query").chunk(0).dictionary if table.column("query").num_chunks else []
        )
    except (ValueError, AttributeError):
        return False


def _stored_keys(meta: dict[str, str], column: pa.ChunkedArray | None) -> tuple[np.ndarray, bool] | None:
    """The `doc_key` column `write_run_columns` stored (the keys `column_keys` would compute), when present."""
    import pyarrow as pa

    scheme, _, kind = meta.get("retbench.keys", "").partition(":")
    if column is None or scheme != KEYS or column.type != pa.uint64() or column.null_count:
        return None
    return _flat(column, np.uint64), kind == "exact"


def _flat(column: pa.ChunkedArray, dtype: type | np.dtype) -> np.ndarray:
    """A numeric column without nulls as one array: the mapped file's own memory when it is one chunk (read-only,
    no copy), else the chunks joined."""
    if column.num_chunks == 1:
        chunk = column.chunk(0)
        return np.frombuffer(chunk.buffers()[1], dtype=dtype)[chunk.offset : chunk.offset + len(chunk)]
    return numbers(column, dtype)


def _dictionary_segments(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray, None] | None:
    """(query ids, rows per query, None) read from a dictionary-encoded query column whose rows come in the
    dictionary's order (as written here): no id is read per row. None for any other column (the general path)."""
    import pyarrow as pa

    if not pa.types.is_dictionary(column.type) or not pa.types.is_string(column.type.value_type):
        return None
    if column.null_count or not column.num_chunks:
        return None
    dictionary = column.chunk(0).dictionary
    if any(not c.dictionary.equals(dictionary) for c in column.chunks[1:]):
        return None
    indices = pa.chunked_array([c.indices for c in column.chunks], column.type.index_type)
    index = column.type.index_type  # its NumPy twin by hand: pyarrow's to_pandas_dtype() imports pandas
    codes = _flat(indices, np.dtype(f"{'' if pa.types.is_signed_integer(index) else 'u'}int{index.bit_width}"))
    if len(codes) and (codes[0] < 0 or (codes[1:] < codes[:-1]).any()):
        return None
    qids = dictionary.to_pylist()
    # codes in order: each query's rows end where the next code starts (a binary search per query, not a count per row)
    ends = np.searchsorted(codes, np.arange(1, len(qids) + 1, dtype=codes.dtype), side="left")
    counts = np.diff(ends, prepend=0).astype(np.int64)
    if len(codes) and int(codes[-1]) >= len(qids):
        return None  # a code past the dictionary (a malformed file): the general path reads the values
    if len(set(qids)) != len(qids) or any(not q or q.split() != [q] or not q.isprintable() for q in qids):
        return None  # a repeated or malformed query id: the general path sorts it out or names it
    kept = counts > 0  # a query without a ranked doc has no line in the text either
    if not kept.all():
        qids = [q for q, k in zip(qids, kept.tolist(), strict=True) if k]
    return qids, counts[kept], None


def _ids(table: pa.Table, field: str, p: Path) -> pa.ChunkedArray:
    """An id column as binary (what the TREC reader's helpers take), checked as a text file's fields are."""
    import pyarrow as pa

    column = table.column(field)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not (
        pa.types.is_string(column.type) or pa.types.is_large_string(column.type) or pa.types.is_binary(column.type)
    ):
        raise InputError(f"{field} ids must be strings, not {column.type}", path=p, field=field)
    _no_nulls(column, field, p)
    if not pa.types.is_string(column.type):  # (a string column has a binary one's buffers: no copy needed)
        column = column.cast(pa.binary())
    start = 0
    for chunk in column.chunks:
        offsets, data = array_buffers(chunk)
        empty = np.flatnonzero(offsets[1:] == offsets[:-1])
        body = data[offsets[0] : offsets[-1]]
        bad = len(empty) or (len(body) and body.min() < 33)
        if bad or (len(body) and body.max() >= 128 and _unicode_space(chunk)):
            row = start + (int(empty[0]) if len(empty) else _first_bad_row(chunk))
            raise InputError(
                f"{field} id of row {row} is empty or holds whitespace or a control byte (a TREC field cannot)",
                path=p,
                field=field,
            )
        start += len(chunk)
    return column


def _unicode_space(chunk: pa.Array) -> bool:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        text = chunk.cast(pa.string())
    except pa.ArrowException:
        return True  # not UTF-8
    return bool(pc.any(pc.match_substring_regex(text, _UNICODE_SPACE)).as_py())


def _first_bad_row(chunk: pa.Array) -> int:
    """The first row whose id str.split() would not read back as one field (the slow walk, on failure only)."""
    for i, value in enumerate(chunk.to_pylist()):
        text = value if isinstance(value, str) else value.decode("utf-8", errors="replace")
        if not text or text.split() != [text] or any(ord(c) < 33 for c in text):
            return i
    return 0


def _no_nulls(column: pa.ChunkedArray, field: str, p: Path) -> None:
    if column.null_count:
        import pyarrow.compute as pc

        row = int(pc.index(pc.is_null(column), True).as_py())
        raise InputError(f"{field} of row {row} is null", path=p, field=field)
