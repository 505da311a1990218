"""How a whitespace-separated TREC file (qrels or run) becomes Arrow columns, fast, or None for the line reader.

`io/trec.py` reads qrels and runs through `read_columns` first and falls back to its line reader (which names
the offending line) whenever this returns None: a line another column count, a field `str.split()` would read
differently, a score that is not a finite float, or a comment line (one whose first field starts with `#`, which
trec_eval 10.0 skips; the line reader skips it too, keeping the file's line numbers).
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retbench.data.keys import keys_from_bytes
from retbench.data.threads import cpus, thread_map

if TYPE_CHECKING:
    import gzip
    import io

    import pyarrow as pa


def _delimiter(p: Path) -> str | None:
    """The single separator of the file's first line (space or tab), None when it mixes them."""
    try:
        with _open_binary(p) as fh:
            head = fh.read(1 << 16)
    except (OSError, EOFError):
        return None
    first = next((line for line in head.splitlines() if line.strip()), b"")
    has_space, has_tab = b" " in first, b"\t" in first
    if has_space == has_tab:
        return None
    return " " if has_space else "\t"


def _open_binary(p: Path) -> gzip.GzipFile | io.BufferedReader:
    import gzip

    return gzip.open(p, "rb") if p.suffix == ".gz" else open(p, "rb")


_TAB_TO_SPACE = bytes.maketrans(b"\t", b" ")


def _normalized(p: Path) -> bytes | None:
    """The file with every run of spaces and tabs made one space and none at line ends: what
    str.split() sees, in a form Arrow parses. None for non-ASCII files (the line reader decodes them)."""
    try:
        with _open_binary(p) as fh:
            data = fh.read()
    except (OSError, EOFError, ValueError):
        return None
    if not data.isascii():
        return None
    if b"\t" in data:  # each pass below copies the file: only the ones needed run
        data = data.translate(_TAB_TO_SPACE)
    while b"  " in data:
        data = data.replace(b"  ", b" ")
    edges = [(b" \n", b"\n"), (b"\n ", b"\n")]
    if b"\r" in data:
        edges += [(b" \r", b"\r"), (b"\r ", b"\r")]
    for edge, plain in edges:
        if edge in data:
            data = data.replace(edge, plain)
    return data.strip(b" ")


def read_columns(p: Path, fields: tuple[str, ...], number: str) -> pa.Table | None:
    """The file as an Arrow table of binary columns plus one float64 column `number`, or None.

    Arrow's CSV parser (one thread per part of the file) reads it directly when one space or one tab separates
    the fields; any other spacing of spaces and tabs is first collapsed in memory (a few C-level
    passes, ASCII files only). None means "use the line reader": pyarrow is missing, a line has
    another column count, a text field is empty, holds a control byte or a Unicode space (str.split()
    would cut at some of those) or is not UTF-8, or the number is not a finite float. Arrow parses floats exactly as float()
    does (correctly rounded).
    """
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    delimiter = _delimiter(p)
    if delimiter is not None:
        try:
            table = _parse_parts(_in_memory(str(p)), delimiter, fields, number)
        except (pa.ArrowException, OSError, EOFError, ValueError):
            table = None
        if table is not None:
            return table
    data = _normalized(p)
    if data is None or not data.strip():
        return None
    return _parse_parts(pa.py_buffer(data), " ", fields, number)


def _in_memory(path: str) -> pa.Buffer:
    """The file's bytes as an Arrow buffer: a memory map (plain files) or what gzip gives (`.gz`).

    Arrow reads a stream ahead on its IO threads; from memory those reads are slices, so no file read is
    left running on a thread when the process exits right after (a bad score: exit 2). Arrow would also
    guess a compression from any suffix; the line reader knows `.gz` only, and so does this."""
    import pyarrow as pa

    if path.endswith(".gz"):
        with _open_binary(Path(path)) as fh:
            return pa.py_buffer(fh.read())
    with pa.memory_map(path) as mapped:
        return mapped.read_buffer()  # the buffer keeps the mapping alive after the file object closes


_PART_BYTES = 1 << 20  # a part smaller than this is not worth a thread


def _line_parts(data: pa.Buffer) -> list[pa.Buffer]:
    """`data` cut at line ends into one part per CPU (fewer for a small file), each at least `_PART_BYTES`."""
    k = min(cpus(), len(data) // _PART_BYTES)
    cuts = [0]
    for i in range(1, k):
        at = len(data) * i // k
        nl = data.slice(at, min(1 << 16, len(data) - at)).to_pybytes().find(b"\n")
        if nl >= 0 and at + nl + 1 > cuts[-1]:
            cuts.append(at + nl + 1)
    cuts.append(len(data))
    return [data.slice(a, b - a) for a, b in pairwise(cuts) if b > a]


def _parse_parts(data: pa.Buffer, delimiter: str, fields: tuple[str, ...], number: str) -> pa.Table | None:
    """`_parse_columns` over the file's parts at once, one Python thread each, the parts' tables joined in order.

    The parse runs in C with the GIL released, so the parts' threads share the CPUs; each part uses Arrow's
    one-thread reader. Arrow's own thread pool is not used: a process that exited right after a read on it
    (a bad score: exit 2) aborted in about 1 of 16 runs ("terminate called without an active exception",
    exit 134), while these threads end before the read returns."""
    import pyarrow as pa

    parts = _line_parts(data)
    if len(parts) <= 1:
        return _parse_columns(pa.BufferReader(data), delimiter, fields, number)
    tables = thread_map(lambda part: _parse_columns(pa.BufferReader(part), delimiter, fields, number), parts)
    if any(t is None for t in tables):
        return None
    return pa.concat_tables(tables)  # type: ignore[arg-type]


def _parse_columns(source: pa.NativeFile, delimiter: str, fields: tuple[str, ...], number: str) -> pa.Table | None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    types = {f: pa.float64() if f == number else pa.binary() for f in fields}
    try:
        table = pacsv.read_csv(
            source,
            # Arrow's one-thread reader: `_parse_parts` runs the parts at once on threads of its own
            read_options=pacsv.ReadOptions(column_names=list(fields), block_size=1 << 22, use_threads=False),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, double_quote=False, escape_char=False
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=False,
            ),
        )
    except (pa.ArrowException, OSError, EOFError, ValueError):
        return None
    if len(table) and pc.any(pc.starts_with(table.column(fields[0]), "#")).as_py():
        return None  # a comment line that happens to have the right number of fields: the line reader skips it
    for f in fields:
        column = table.column(f)
        if f == number:
            if column.null_count or (len(column) and not pc.all(pc.is_finite(column)).as_py()):
                return None
            continue
        ascii_only = True
        for chunk in column.chunks:
            offsets, data = array_buffers(chunk)
            if bool((offsets[1:] == offsets[:-1]).any()):
                return None  # an empty field
            data = data[offsets[0] : offsets[-1]]
            if len(data) and data.min() < 33:
                return None
            ascii_only &= not len(data) or data.max() < 128
        if not ascii_only:  # UTF-8 ids are fine unless invalid or holding a space str.split() cuts at
            try:
                text = column.cast(pa.string())
            except pa.ArrowException:
                return None
            if pc.any(pc.match_substring_regex(text, _UNICODE_SPACE)).as_py():
                return None
    return table


# the non-ASCII characters str.isspace() accepts (tests/test_evaluation_inputs.py checks the list)
_UNICODE_SPACE = r"[\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"


def array_buffers(chunk: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(int32 offsets into data, uint8 data) of one Arrow binary array, without copying anything."""
    _, off_buf, data_buf = chunk.buffers()  # pa.binary(): int32 offsets
    offsets = np.frombuffer(off_buf, dtype=np.int32)[chunk.offset : chunk.offset + len(chunk) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    return offsets, data


def numbers(column: pa.Array | pa.ChunkedArray, dtype: type | np.dtype = np.float64) -> np.ndarray:
    """A numeric Arrow array or column without nulls as one NumPy array, read from its buffers.

    (Arrow's own to_numpy imports pandas, a fifth of a second this path does not need.)
    """
    chunks = getattr(column, "chunks", [column])
    parts: list[np.ndarray] = [np.frombuffer(c.buffers()[1], dtype=dtype)[c.offset : c.offset + len(c)] for c in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def indices(positions: np.ndarray) -> pa.Array:
    import pyarrow as pa

    positions = np.ascontiguousarray(positions, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(positions), [None, pa.py_buffer(positions)])


def take_rows(column: pa.ChunkedArray, order: np.ndarray) -> pa.ChunkedArray | None:
    """The column reordered, or None where Arrow cannot (more than 2 GiB of ids in one array)."""
    import pyarrow as pa

    try:
        return column.take(indices(order))
    except pa.ArrowException:
        return None


# -- the column helpers the run readers share (TREC text here, columnar files in io/run_columns.py) --------
def columnar_kind(path: str | Path) -> str | None:
    """ "arrow" or "parquet" when the file starts with Arrow IPC's (`ARROW1`) or Parquet's (`PAR1`) magic
    bytes, else None (a text file, or none: the text readers name a missing file)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError:
        return None
    return "arrow" if head == b"ARROW1" else "parquet" if head[:4] == b"PAR1" else None


def column_keys(column: pa.ChunkedArray) -> tuple[np.ndarray, bool]:
    """`keys` of every value of an Arrow binary column, and whether all are exact.

    The chunks' keys are made on up to one thread per CPU (NumPy releases the GIL), each copied into the one
    output at once, so the chunks' own key arrays are freed chunk by chunk, not all kept for a final join."""
    chunks = column.chunks
    starts = np.concatenate([[0], np.cumsum([len(c) for c in chunks], dtype=np.int64)]).tolist()
    out = np.empty(len(column), dtype=np.uint64)

    def key_chunk(i: int) -> bool:
        keys, exact = _chunk_keys(chunks[i])
        out[starts[i] : starts[i + 1]] = keys
        return exact

    done = thread_map(key_chunk, range(len(chunks)), parallel=len(column) >= _PARALLEL_IDS)
    return out, all(done)


_PARALLEL_IDS = 1 << 16  # fewer ids are keyed on the calling thread


def _chunk_keys(chunk: pa.Array) -> tuple[np.ndarray, bool]:
    """`keys_from_bytes` of one binary chunk; ids of at most 8 bytes (the usual case) take a shortcut.

    Arrow's `ascii_rpad` appends NUL bytes to every id shorter than 8 bytes (it counts bytes, whatever
    the text), in one C pass. When the padded ids then hold exactly 8 bytes each, no id was longer, and
    the padded data read as little-endian uint64 is the key `keys_from_bytes` computes (the id's bytes
    with zero high bytes), at a third of the cost of its gathers. Longer ids take the general path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets, data = array_buffers(chunk)
    n = len(chunk)
    if n:
        try:
            text = pa.Array.from_buffers(pa.string(), n, chunk.buffers(), offset=chunk.offset)  # no copy, no check
            padded = pc.ascii_rpad(text, width=8, padding="\x00")
        except pa.ArrowException:  # pragma: no cover - the general path below reads any bytes
            padded = None
        if padded is not None:
            p_offsets, p_data = array_buffers(padded)
            start = int(p_offsets[0])
            if int(p_offsets[-1]) - start == 8 * n:
                keys = np.frombuffer(p_data, dtype="<u8", count=n, offset=start)  # (copied out by the caller)
                body = data[int(offsets[0]) : int(offsets[-1])]
                return keys, not len(body) or int(body.min()) > 0  # an id with a NUL byte is not exact
    return keys_from_bytes(data, offsets)


def query_segments(column: pa.ChunkedArray) -> tuple[list[str], np.ndarray, np.ndarray | None]:
    """(query ids in first-appearance order, lines per query, the stable reordering that groups a
    query's lines when they are not contiguous, else None)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def runs(chunk: pa.Array) -> tuple[pa.Array, np.ndarray]:
        encoded = pc.run_end_encode(chunk)
        return encoded.values, numbers(encoded.run_ends, np.int32)

    chunks = [c for c in column.chunks if len(c)]
    heads: list[str] = []
    lens: list[int] = []
    for run_values, ends in thread_map(runs, chunks, parallel=len(column) >= _PARALLEL_IDS):
        values = run_values.cast(pa.string()).to_pylist()
        counts = np.diff(ends, prepend=0).tolist()
        if heads and values[0] == heads[-1]:
            lens[-1] += counts[0]
            values, counts = values[1:], counts[1:]
        heads.extend(values)
        lens.extend(counts)
    if len(dict.fromkeys(heads)) == len(heads):  # each query in one run of lines (the usual file): one C pass
        return heads, np.asarray(lens, dtype=np.int64), None
    first: dict[str, int] = {}
    seg_query = [first.setdefault(q, len(first)) for q in heads]
    line_query = np.repeat(np.asarray(seg_query, dtype=np.int64), lens)
    order = np.argsort(line_query, kind="stable")
    return list(first), np.bincount(line_query, minlength=len(first)).astype(np.int64), order


def offsets_of(lens: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return offsets


class ArrowIds:
    """Doc ids held as an Arrow binary column (UTF-8 without spaces, checked by the reader), read on demand."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        self.column = column

    def all(self) -> np.ndarray:
        import pyarrow as pa

        out = np.empty(len(self.column), dtype=object)
        out[:] = self.column.cast(pa.string()).to_pylist()  # (to_numpy would import pandas)
        return out

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Chunk by chunk: Arrow's take on a many-chunk column would first join the chunks."""
        import pyarrow as pa

        chunks = self.column.chunks
        starts = np.cumsum([0] + [len(c) for c in chunks])
        which = np.searchsorted(starts, positions, side="right") - 1
        out = np.empty(len(positions), dtype=object)
        for c in np.unique(which).tolist():
            at = np.flatnonzero(which == c)
            got = chunks[c].take(indices(positions[at] - starts[c]))
            out[at] = got.cast(pa.string()).to_pylist()
        return out


def run_tag(name: str | None) -> str:
    """A system name as a TREC run tag: one field, so every run of whitespace or control bytes becomes `_`."""
    return re.sub(r"[\s\x00-\x1f\x7f]+", "_", name or "").strip("_") or "retbench"
