"""The reduce step: one COPY file for the run, plus the psql script that loads it.

This module imports no numpy/xarray/polars: the job only streams bytes, so its resident
memory stays at the interpreter's few tens of MB whatever the files' size.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from ncreel.io import atomic_path
from ncreel.pg.copytext import concatenate
from ncreel.pg.sql import load_script

log = logging.getLogger(__name__)


def reduce_cells(parts: Sequence[str | os.PathLike], copy_path: str | os.PathLike,
                 sql_path: str | os.PathLike, *, columns: Sequence[Sequence[str]], table: str,
                 run: str, note: str = "") -> int:
    r"""Join shard COPY files (in the given time order) and write ``cells.sql``.

    Parameters
    ----------
    parts : sequence of path
        Shard COPY files, in time order (compressed ones concatenate as multi-member
        gzip / multi-frame zstd files).
    copy_path : path
        Output COPY file (``cells.copy``, ``cells.copy.gz`` or ``cells.copy.zst``).
    sql_path : path
        Output psql script: creates `table` (partitioned by run) if missing and
        ``\copy``-loads `copy_path`, by its base name, as run `run`'s partition; run it
        from the directory holding both files.
    columns : sequence of (str, str)
        The COPY file's column names and PostgreSQL types (the cell model's declaration,
        from :func:`ncreel.cells.series_columns` at parse time).
    table : str
        PostgreSQL table name.
    run : str
        Run name: the value of the table's ``run`` column.
    note : str
        Extra comment lines for the script (input files, time decoding notes).

    Returns
    -------
    int
        Bytes in the COPY file.
    """
    size = concatenate(parts, copy_path)
    comment = (f"ncreel run '{run}'\n{note}\n"
               f"Load with: cd {os.path.dirname(os.fspath(sql_path)) or '.'} && "
               f"psql -f {os.path.basename(sql_path)} DBNAME").replace("\n\n", "\n")
    script = load_script(table, [tuple(c) for c in columns], os.path.basename(copy_path),
                         run=run, comment=comment)
    with atomic_path(sql_path) as tmp:
        tmp.write_text(script)
    log.info("%s: %d bytes from %d shard files", copy_path, size, len(parts))
    return size
