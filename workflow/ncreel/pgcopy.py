"""PostgreSQL COPY text format: encoding rows, joining shard files, and the load script.

The text format is specified in the PostgreSQL documentation, "COPY — File Formats — Text
Format": one line per row, columns separated by a tab, ``\\N`` for NULL, and within a value
a backslash, tab, newline and carriage return written as ``\\\\``, ``\\t``, ``\\n``, ``\\r``.
No end-of-data marker (``\\.``) is written: it is optional for files and would be data-like.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import BinaryIO

import numpy as np
import polars as pl

from ncreel.io import atomic_path

#: numpy dtype kind/size → PostgreSQL type used in the generated DDL.
_PG_TYPES = {
    np.dtype(np.float32): "real",
    np.dtype(np.float64): "double precision",
    np.dtype(np.int16): "smallint",
    np.dtype(np.int32): "integer",
    np.dtype(np.int64): "bigint",
    np.dtype(np.bool_): "boolean",
}


def pg_type_for(values) -> str:
    """PostgreSQL type that holds `values` exactly.

    Parameters
    ----------
    values : numpy.ndarray or sequence
        A column: numeric/bool ndarray, or strings (``text``).

    Returns
    -------
    str
        ``real`` for float32, ``double precision`` for float64, ``smallint``/``integer``/
        ``bigint`` for int16/32/64, ``boolean``, ``timestamp without time zone`` for
        datetime64, else ``text``.
    """
    arr = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind == "M":
        return "timestamp without time zone"
    return _PG_TYPES.get(arr.dtype, "text")


def _to_polars(name: str, values) -> pl.Series:
    if isinstance(values, pl.Series):
        s = values.rename(name)
    elif isinstance(values, np.ndarray) and values.dtype.kind in "fiub":
        s = pl.Series(name, values)
    elif isinstance(values, np.ndarray) and values.dtype.kind == "M":
        s = pl.Series(name, values.astype("datetime64[us]"))
    else:
        s = pl.Series(name, values, dtype=pl.Utf8, strict=False)
    if s.dtype in (pl.Float32, pl.Float64):
        # COPY has no NaN-means-missing convention: NaN is NULL here, by design.
        s = s.fill_nan(None)
    elif s.dtype == pl.Utf8:
        if s.str.contains("\x00", literal=True).any():
            raise ValueError(f"column '{name}': text contains a NUL byte, which PostgreSQL "
                             "text cannot store")
        s = escape_text(s)
    return s


def escape_text(s: pl.Series) -> pl.Series:
    """Escape a text column for COPY text format (backslash first, then TAB, LF, CR).

    Parameters
    ----------
    s : polars.Series of str
        Raw text; nulls stay null (written as ``\\N``).

    Returns
    -------
    polars.Series of str
        Backslash → ``\\\\``, TAB → ``\\t``, LF → ``\\n``, CR → ``\\r``. Other characters,
        including all non-ASCII ones, are written as-is in UTF-8.
    """
    return (s.str.replace_all("\\", "\\\\", literal=True)
             .str.replace_all("\t", "\\t", literal=True)
             .str.replace_all("\n", "\\n", literal=True)
             .str.replace_all("\r", "\\r", literal=True))


def write_copy_rows(fh: BinaryIO, columns: Mapping[str, object]) -> int:
    """Append rows to an open binary file in COPY text format.

    Parameters
    ----------
    fh : binary file object
        Open for writing.
    columns : mapping of str to array-like, each of length n_rows
        Column name → values, in table column order. Floats: NaN → ``\\N``, otherwise the
        shortest decimal that round-trips to the same float32/float64 (Ryu, as in
        polars). Text: ``None`` → ``\\N``, escaped by :func:`escape_text`.

    Returns
    -------
    int
        Rows written.

    Raises
    ------
    ValueError
        If columns differ in length, or text contains a NUL byte.
    """
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


_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def table_name(name: str) -> str:
    """Validate a PostgreSQL table name (lower-case identifier, optional ``schema.``).

    Raises
    ------
    ValueError
        If any part is not ``[a-z_][a-z0-9_]*`` up to 63 characters (PostgreSQL's
        NAMEDATALEN - 1), so it can be written unquoted and matches what users type.
    """
    parts = name.split(".")
    if len(parts) > 2 or not all(_IDENT.match(p) for p in parts):
        raise ValueError(f"table name {name!r}: use lower-case letters, digits and _ "
                         "(optionally schema.table), at most 63 characters each")
    return name


def create_table_sql(table: str, columns: Sequence[tuple[str, str]]) -> str:
    """``CREATE TABLE`` statement for `columns` (name, PostgreSQL type) pairs."""
    table_name(table)
    body = ",\n".join(f"    {table_name(name)} {pgtype}" for name, pgtype in columns)
    return f"CREATE TABLE {table} (\n{body}\n);\n"


def load_script(table: str, columns: Sequence[tuple[str, str]], copy_file: str,
                *, comment: str = "") -> str:
    """Psql script that (re)creates `table` and loads `copy_file` in one transaction.

    Run it from the directory holding `copy_file`: ``psql -f cells.sql DBNAME``. Rerunning
    replaces the table's rows instead of duplicating them. ``ON_ERROR_STOP`` makes psql
    stop, and roll back, at the first error.

    Parameters
    ----------
    table : str
        Table name, see :func:`table_name`.
    columns : sequence of (str, str)
        Column names and PostgreSQL types, in COPY file order.
    copy_file : str
        COPY text file name, relative to where psql runs; a ``.gz`` or ``.zst`` name is
        read through ``gzip -dc``/``zstd -dc`` with ``\\copy … FROM PROGRAM``.
    comment : str
        Text for a leading SQL comment (e.g. the run and input).
    """
    cols = ", ".join(name for name, _ in columns)
    if copy_file.endswith(".gz"):
        source = f"PROGRAM 'gzip -dc {_sql_quote_path(copy_file)}'"
    elif copy_file.endswith(".zst"):
        source = f"PROGRAM 'zstd -dc {_sql_quote_path(copy_file)}'"
    else:
        source = f"'{_sql_quote_path(copy_file)}'"
    lines = [f"-- {line}" for line in comment.splitlines()]
    lines += ["\\set ON_ERROR_STOP on", "BEGIN;", f"DROP TABLE IF EXISTS {table};",
              create_table_sql(table, columns).rstrip(),
              f"\\copy {table} ({cols}) FROM {source} WITH (FORMAT text)", "COMMIT;", ""]
    return "\n".join(lines)


def _sql_quote_path(path: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", path):
        raise ValueError(f"COPY file name {path!r}: use letters, digits, '_', '-', '.', '/'")
    return path
