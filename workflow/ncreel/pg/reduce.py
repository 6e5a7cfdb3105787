"""The reduce step: one COPY file for the run, plus the psql script that loads it.

This module imports no numpy/xarray/polars: the job only streams bytes, so its resident
memory stays at the interpreter's few tens of MB whatever the files' size.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from ncreel.core.io import atomic_path
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


def merge_cells(parts: Sequence[str | os.PathLike], output: str | os.PathLike) -> int:
    """Join the shards' cells files, keeping each ``cell_id`` once (its first line).

    Every shard writes the cells it has rows for; most cells are in every shard. Lines
    are compared by their first field only (the ``cell_id``), streamed, so memory holds
    the set of ids, not the polygons.

    Parameters
    ----------
    parts : sequence of path
        The shards' cells COPY files (compressed by their suffix).
    output : path
        The run's cells COPY file, compressed as its suffix says.

    Returns
    -------
    int
        Cells written.
    """
    from ncreel.pg.copytext import open_copy_reader, open_copy_writer

    name = os.fspath(output)
    compression = "gzip" if name.endswith(".gz") else "zstd" if name.endswith(".zst") \
        else "none"
    seen: set[bytes] = set()
    n = 0
    with atomic_path(output) as tmp, open_copy_writer(tmp, compression) as out:
        for part in parts:
            with open_copy_reader(part) as src:
                rest = b""
                while block := src.read(8 * 2**20):
                    lines = (rest + block).split(b"\n")
                    rest = lines.pop()
                    keep = []
                    for line in lines:
                        key = line[:line.find(b"\t")]
                        if key not in seen:
                            seen.add(key)
                            keep.append(line)
                    if keep:
                        out.write(b"\n".join(keep) + b"\n")
                        n += len(keep)
                if rest:
                    raise ValueError(f"{part}: last line has no end of line")
    return n


#: File names of the normalised layout's cells and steps COPY files, beside the values
#: file ``cells.copy`` (suffix as configured).
NORMALISED_FILES = {"cells": "cells_cells", "steps": "cells_steps"}


def reduce_normalised(parts: Sequence[str | os.PathLike], cell_parts: Sequence[str],
                      step_parts: Sequence[str], copy_path: str | os.PathLike,
                      cells_path: str | os.PathLike, steps_path: str | os.PathLike,
                      sql_path: str | os.PathLike, *, columns: Sequence[Sequence[str]],
                      table: str, run: str, note: str = "") -> dict:
    r"""Join the shards' files of the normalised layout and write ``cells.sql``.

    Parameters
    ----------
    parts, cell_parts, step_parts : sequence of path
        The shards' values, cells and steps COPY files, in time order.
    copy_path, cells_path, steps_path : path
        The run's values (joined), cells (each cell once, :func:`merge_cells`) and steps
        (joined) COPY files.
    sql_path : path
        The psql script (:func:`ncreel.pg.layout.load_script`); run it from the directory
        holding the files.
    columns, table, run, note
        As :func:`reduce_cells` (the wide layout's columns; `table` names the view).

    Returns
    -------
    dict
        ``bytes`` of the values file, ``cells`` written.
    """
    from ncreel.pg.layout import load_script as normalised_script

    size = concatenate(parts, copy_path)
    concatenate(step_parts, steps_path)
    n_cells = merge_cells(cell_parts, cells_path)
    comment = (f"ncreel run '{run}' (cells.layout: normalised)\n{note}\n"
               f"Load with: cd {os.path.dirname(os.fspath(sql_path)) or '.'} && "
               f"psql -f {os.path.basename(sql_path)} DBNAME").replace("\n\n", "\n")
    files = {"values": os.path.basename(copy_path), "cells": os.path.basename(cells_path),
             "steps": os.path.basename(steps_path)}
    script = normalised_script(table, [tuple(c) for c in columns], files, run=run,
                               comment=comment)
    with atomic_path(sql_path) as tmp:
        tmp.write_text(script)
    log.info("%s: %d bytes from %d shard files; %d cells", copy_path, size, len(parts),
             n_cells)
    return {"bytes": size, "cells": n_cells}
