r"""PostgreSQL COPY text format: encoding rows and joining shard files.

The SQL that loads them (table names, DDL, partitions, the load script) is
:mod:`ncreel.pg.sql`.

The text format is specified in the PostgreSQL documentation, "COPY — File Formats — Text
Format": one line per row, columns separated by a tab, ``\N`` for NULL, and within a value
a backslash, tab, newline and carriage return written as ``\\``, ``\t``, ``\n``, ``\r``.
No end-of-data marker (``\.``) is written: it is optional for files and would be data-like.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import BinaryIO

import numpy as np

from ncreel.core.io import atomic_path
from ncreel.pg.types import pg_type_for  # noqa: F401  (its home before ncreel.pg.types)

# polars is imported inside the functions that use it: the reduce and load jobs import
# this module only to stream bytes, and should stay at a few tens of MB resident.

#: Text that needs escaping (or is invalid: NUL) in COPY text format.
_SPECIAL = "[\\x00\\\\\t\n\r]"


def _to_polars(name: str, values):
    import polars as pl

    if isinstance(values, pl.Series):
        s = values.rename(name)
    elif isinstance(values, np.ndarray) and values.dtype.kind in "fiub":
        s = pl.Series(name, values)
    elif isinstance(values, np.ndarray) and values.dtype.kind == "M":
        s = pl.Series(name, values.astype("datetime64[us]"))
    else:
        s = pl.Series(name, values, dtype=pl.Utf8, strict=False)
    if s.dtype in (pl.Categorical, pl.Enum):
        # A few labels repeated over many rows (a block's times): whether any needs
        # escaping is decided on the distinct labels, and polars writes the labels itself.
        if not s.unique().cast(pl.Utf8).str.contains(_SPECIAL).any():
            return s
        s = s.cast(pl.Utf8)
    if s.dtype in (pl.Float32, pl.Float64):
        # COPY has no NaN-means-missing convention: NaN is NULL here, by design. Only a
        # column that has one is changed: a column with a null mask is written slower.
        if s.is_nan().any():
            s = s.fill_nan(None)
    elif s.dtype == pl.Utf8 and s.str.contains(_SPECIAL).any():
        # One scan decides; most text columns (ISO times, class names) need no escaping.
        if s.str.contains("\x00", literal=True).any():
            raise ValueError(f"column '{name}': text contains a NUL byte, which PostgreSQL "
                             "text cannot store")
        s = escape_text(s)
    return s


def escape_text(s):
    r"""Escape a text column for COPY text format (backslash first, then TAB, LF, CR).

    Parameters
    ----------
    s : polars.Series of str
        Raw text; nulls stay null (written as ``\N``).

    Returns
    -------
    polars.Series of str
        Backslash → ``\\``, TAB → ``\t``, LF → ``\n``, CR → ``\r``. Other characters,
        including all non-ASCII ones, are written as-is in UTF-8.
    """
    return (s.str.replace_all("\\", "\\\\", literal=True)
             .str.replace_all("\t", "\\t", literal=True)
             .str.replace_all("\n", "\\n", literal=True)
             .str.replace_all("\r", "\\r", literal=True))


def write_copy_rows(fh: BinaryIO, columns: Mapping[str, object]) -> int:
    r"""Append rows to an open binary file in COPY text format.

    Parameters
    ----------
    fh : binary file object
        Open for writing.
    columns : mapping of str to array-like, each of length n_rows
        Column name → values, in table column order. Floats: NaN → ``\N``, otherwise the
        shortest decimal that round-trips to the same float32/float64 (Ryu, as in
        polars). Text: ``None`` → ``\N``, escaped by :func:`escape_text`.

    Returns
    -------
    int
        Rows written.

    Raises
    ------
    ValueError
        If columns differ in length, or text contains a NUL byte.
    """
    import polars as pl

    series = [_to_polars(name, values) for name, values in columns.items()]
    lengths = {len(s) for s in series}
    if len(lengths) > 1:
        raise ValueError(f"columns differ in length: "
                         f"{ {s.name: len(s) for s in series} }")
    n = lengths.pop() if lengths else 0
    if n:
        pl.DataFrame(series).write_csv(fh, include_header=False, separator="\t",
                                       null_value="\\N", quote_style="never",
                                       line_terminator="\n", datetime_format="%Y-%m-%dT%H:%M:%S%.f")
    return n


_INT_TYPES = {"smallint": ("Int16", np.int16), "integer": ("Int32", np.int32),
              "bigint": ("Int64", np.int64)}
_TEXT_LIKE = ("text", "character varying", "varchar", "geometry", "geography",
              "timestamp", "date", "time", "uuid", "json", "jsonb")


def coerce_column(values, pgtype: str):
    """Check one column against its declared PostgreSQL type and cast it for writing.

    Parameters
    ----------
    values : numpy.ndarray, polars.Series or sequence
        The column.
    pgtype : str
        Declared type. ``real`` needs float32 (float64 would not load exactly);
        ``double precision`` takes any float or integer and is cast to float64, so a
        float32 value is written as its exact float64 value; ``smallint``/``integer``/
        ``bigint`` take integers (bool too) and are range-checked; ``boolean`` takes bool;
        text-like types (text, varchar, timestamp, date, geometry, …) take strings, and
        timestamps/dates also datetime64. Other types pass through unchecked.

    Returns
    -------
    numpy.ndarray or polars.Series
        Same length as `values`.

    Raises
    ------
    TypeError
        If the dtype does not fit `pgtype`.
    ValueError
        If integers overflow the declared integer type.
    """
    import polars as pl

    t = " ".join(pgtype.lower().split())
    if isinstance(values, pl.Series):
        kind = ("f" if values.dtype.is_float() else "i" if values.dtype.is_integer()
                else "b" if values.dtype == pl.Boolean else "M" if values.dtype.is_temporal()
                else "U" if values.dtype in (pl.Utf8, pl.Categorical, pl.Enum, pl.Null)
                else "O")
        is_f32 = values.dtype == pl.Float32
    else:
        values = np.asarray(values)
        if values.ndim != 1:
            raise TypeError(f"must be 1-D, got shape {values.shape}")
        kind, is_f32 = values.dtype.kind, values.dtype == np.float32
        kind = "i" if kind == "u" else kind
    if t == "real":
        if not (kind == "f" and is_f32):
            raise TypeError("'real' needs float32 values (declare 'double precision' for "
                            f"float64), got {getattr(values, 'dtype', type(values))}")
        return values
    if t in ("double precision", "float8"):
        if kind not in "fi":
            raise TypeError(f"needs float or integer values, got {values.dtype}")
        return values.cast(pl.Float64) if isinstance(values, pl.Series) else \
            values.astype(np.float64, copy=False)
    if t in _INT_TYPES:
        if kind not in "ib":
            raise TypeError(f"needs integer values, got {values.dtype}")
        pl_name, np_type = _INT_TYPES[t]
        if isinstance(values, pl.Series):
            try:
                return values.cast(getattr(pl, pl_name), strict=True)
            except pl.exceptions.InvalidOperationError as err:
                raise ValueError(f"values out of range for {t}") from err
        info = np.iinfo(np_type)
        if len(values) and (values.min() < info.min or values.max() > info.max):
            raise ValueError(f"values out of range for {t} ({info.min}..{info.max})")
        return values.astype(np_type, copy=False)
    if t == "boolean":
        if kind != "b":
            raise TypeError(f"needs bool values, got {values.dtype}")
        return values
    if t.startswith(_TEXT_LIKE):
        ok = "UOSM" if t.startswith(("timestamp", "date")) else "UOS"
        if kind not in ok:
            raise TypeError(f"needs strings, got {values.dtype}")
        return values
    return values


def open_copy_writer(path: str | os.PathLike, compression: str = "none",
                     level: int | None = None) -> BinaryIO:
    """Open a COPY file for writing, compressed as configured.

    Compressed shard files concatenate byte-wise into one valid file: a gzip file may hold
    several members (RFC 1952 section 2.2) and a zstd file several frames (RFC 8878
    section 3.1), and ``gzip -dc``/``zstd -dc`` decompress them all in order.

    Parameters
    ----------
    path : path
        File to create.
    compression : {"none", "gzip", "zstd"}
    level : int, optional
        gzip 1–9 (default 6) or zstd 1–19 (default 3).

    Returns
    -------
    binary file object
        Close it (or use ``with``) to flush the compressor.
    """
    if compression == "none":
        return open(path, "wb")
    if compression == "gzip":
        return gzip.open(path, "wb", compresslevel=6 if level is None else level)
    if compression == "zstd":
        import zstandard

        raw = open(path, "wb")
        cctx = zstandard.ZstdCompressor(level=3 if level is None else level)
        return _ClosingWriter(cctx.stream_writer(raw, closefd=True), raw)
    raise ValueError(f"compression {compression!r}: use none, gzip or zstd")


class _ClosingWriter:
    """A compressor's stream that closes its file even when its last write fails.

    zstandard's writer leaves the file open when the flush in its ``close`` fails (a full
    disk), which Python then reports at exit as an unraisable error beside the job's one
    line; gzip closes its file itself.
    """

    def __init__(self, stream, raw) -> None:
        self._stream, self._raw = stream, raw

    def write(self, data) -> int:
        """Compress and write `data`; return its length."""
        return self._stream.write(data)

    def flush(self) -> None:
        """Flush the compressor's buffered output to the file."""
        self._stream.flush()

    def close(self) -> None:
        """Finish the compressed stream and close the file, whatever happens."""
        try:
            self._stream.close()
        finally:
            self._raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def open_copy_reader(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open a COPY file for reading, decompressing ``.gz``/``.zst`` by file name.

    Yields
    ------
    binary file object
        Decompressed COPY text, read in blocks with ``read(n)``.
    """
    name = os.fspath(path)
    if name.endswith(".gz"):
        with gzip.open(name, "rb") as fh:
            yield fh
    elif name.endswith(".zst"):
        import zstandard

        with open(name, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(
                raw, read_across_frames=True) as fh:
            yield fh
    else:
        with open(name, "rb") as fh:
            yield fh


def concatenate(parts: Sequence[str | os.PathLike], output: str | os.PathLike,
                *, chunk_bytes: int = 8 * 2**20) -> int:
    """Stream files into `output` in the given order, with constant memory.

    Uses ``os.copy_file_range`` (kernel-side copy, no user-space buffer) where the
    platform has it, else a fixed-size buffer. `output` appears only when complete.

    Parameters
    ----------
    parts : sequence of path
        Files to join, in order (shard files in time order).
    output : path
        Destination; written via a ``.part`` file and renamed.
    chunk_bytes : int
        Bytes per copy call.

    Returns
    -------
    int
        Total bytes written.
    """
    total = 0
    with atomic_path(output) as tmp, open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                total += _copy(src, out, size, chunk_bytes)
    return total


def _copy(src: BinaryIO, dst: BinaryIO, size: int, chunk_bytes: int) -> int:
    done = 0
    if hasattr(os, "copy_file_range"):
        try:
            while done < size:
                n = os.copy_file_range(src.fileno(), dst.fileno(), min(chunk_bytes, size - done))
                if n == 0:
                    break
                done += n
            return done
        except OSError:
            pass  # e.g. across file systems on old kernels: fall back below
    src.seek(done)
    dst.seek(0, os.SEEK_END)
    while chunk := src.read(chunk_bytes):
        dst.write(chunk)
        done += len(chunk)
    return done
