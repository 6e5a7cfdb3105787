"""The reduce step: one COPY file for the run, plus the psql script that loads it."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import numpy as np

from ncreel.cells import CellContext, field_columns
from ncreel.io import atomic_path
from ncreel.pgcopy import concatenate, load_script
from ncreel.source import open_series

log = logging.getLogger(__name__)


def reduce_cells(parts: Sequence[str | os.PathLike], copy_path: str | os.PathLike,
                 sql_path: str | os.PathLike, *, series: Mapping, table: str, run: str) -> int:
    """Join shard COPY files (in the given time order) and write ``cells.sql``.

    Parameters
    ----------
    parts : sequence of path
        Shard COPY files, in time order.
    copy_path : path
        Output COPY text file (``cells.copy``).
    sql_path : path
        Output psql script: creates `table` and ``\\copy``-loads `copy_path` by its base
        name, so run it from the directory holding both files.
    series : mapping
        ``paths``, ``variable``, ``time_dim``, ``select`` of the input (only its header is
        read, for the column types).
    table : str
        PostgreSQL table name.
    run : str
        Run name, written into the script's comment.

    Returns
    -------
    int
        Bytes in the COPY file.
    """
    with open_series(series["paths"], series["variable"], time_dim=series["time_dim"],
                     select=series["select"]) as s:
        ctx = CellContext(time=s.time_axis(), cell_mean=np.empty(0), lat=None, lon=None,
                          value_type="real" if s.dtype == np.float32 else "double precision")
        inputs = ", ".join(s.paths)
        variable = s.variable
    size = concatenate(parts, copy_path)
    comment = (f"ncreel run '{run}': '{variable}' from {inputs}\n"
               f"Load with: cd {os.path.dirname(os.fspath(sql_path)) or '.'} && "
               f"psql -f {os.path.basename(sql_path)} DBNAME")
    if not ctx.time.decoded:
        comment += f"\ntime could not be decoded ({ctx.time.note}); column time is NULL"
    script = load_script(table, field_columns(ctx), os.path.basename(copy_path), comment=comment)
    with atomic_path(sql_path) as tmp:
        tmp.write_text(script)
    log.info("%s: %d bytes from %d shard files", copy_path, size, len(parts))
    return size
