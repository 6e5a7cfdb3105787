"""Benchmark of ncreel's per-cell table path; ends with one ``key=value`` line per figure.

In one run (``make bench-cells``):

1. COPY writer: rows/s of :func:`ncreel.pg.copytext.write_copy_rows` vs ``pandas.DataFrame.to_csv``
   (tab-separated) vs a per-cell Python loop building one string (the original job's
   approach), on the same ``field``-model rows, each in its own process (peak RSS each);
2. a synthetic 1 000 000-cell x 100-step run of the real workflow; every process_shard job's
   ``max_rss`` (Snakemake benchmark file) against the ``mem_mb`` it declared;
3. reduce: :func:`ncreel.pg.copytext.concatenate` vs ``cat`` on that run's shard files (GB);
4. load: :func:`ncreel.pg.load.load_copy` with 1 and 2 connections vs ``psql \\copy`` of the
   same file into a throw-away PostgreSQL (``load_fraction_of_psql``, ``…_jobs2``).
5. replace: reload a run of those rows beside another run: the swap's exclusive time
   (``replace_run_seconds``), dead tuples after it (``replace_dead_tuples``), a reader of
   the other run's worst extra wait (``reader_extra_wait_ms``); and the earlier DELETE's
   time and dead tuples on the same rows.
6. layout (``cells.layout``): bytes per row of the demo with geometry, wide over
   normalised (``table_bytes_per_row_ratio``); loads of a 10-million-row run in each
   layout (``load_speedup_vs_wide`` with polygons, ``…_no_geometry`` without); a rerun of
   the normalised run beside a reader of another run (``normalised_replace_*``,
   ``normalised_reader_extra_wait_ms``). ``--layout-only`` runs this phase alone.
7. a shard's row path (``ShardRows.write``: the ``field`` model, its checks and the COPY
   text) for one 0.25-degree step (721 x 1440, float32) against polars' ``write_csv`` of
   the same columns, both with one thread (``POLARS_MAX_THREADS=1``), in CPU seconds, and
   checked to be the same text: ``copy_writer_fraction_of_polars`` (rows per CPU second
   over rows per CPU second; the target is 0.75).
8. rows beside the frames: a 48-step shard of a 200 x 400 grid, frames alone, rows alone
   and both (``run_shard``): ``rows_beside_frames_fraction_of_sum`` (1: no overlap;
   ``rows_beside_frames_floor``: all of the shorter pass hidden). ``--shard-only`` runs
   phases 7 and 8 alone; they run first otherwise.

``--smoke`` runs every phase at tiny sizes in seconds (a CI test runs it).

Every measurement runs in a child process; its peak RSS comes from ``os.wait4``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(ROOT / "tests"))  # pgserver: the throw-away PostgreSQL of the tests


# --- children: one measurement each, print JSON ---------------------------------------

def _rows(n: int):
    """``field``-model rows (8 columns) for n cells over 10 decoded time steps."""
    import numpy as np
    from ncreel.cells import CellContext, field_model
    from ncreel.input.timeaxis import TimeAxis

    n_t = 10
    nx = 1000
    ny = max(1, n // (n_t * nx))
    rng = np.random.default_rng(1)
    block = (rng.normal(280, 10, size=(n_t, ny, nx))).astype(np.float32)
    time_ax = TimeAxis(values=np.arange(n_t) * 30.0,
                       labels=[f"2000-{m + 1:02d}-16T00:00:00" for m in range(n_t)],
                       calendar="standard", units="days since 2000-01-01", decoded=True)
    lat, lon = np.meshgrid(np.linspace(-60, 70, ny), np.linspace(-180, 180, nx),
                           indexing="ij")
    ctx = CellContext(time=time_ax, cell_mean=block.mean(axis=0, dtype=np.float64),
                      lat=lat, lon=lon)
    return field_model(block, 0, ctx)


def child_writer(n: int, out: str) -> dict:
    from ncreel.pg.copytext import write_copy_rows

    cols = _rows(n)
    t = time.perf_counter()
    with open(out, "wb") as fh:
        rows = write_copy_rows(fh, cols)
    return {"rows": rows, "seconds": time.perf_counter() - t}


def child_pandas(n: int, out: str) -> dict:
    import pandas as pd

    cols = _rows(n)
    df = pd.DataFrame({k: (v.to_numpy() if hasattr(v, "to_numpy") else v)
                       for k, v in cols.items()})
    t = time.perf_counter()
    df.to_csv(out, sep="\t", header=False, index=False, na_rep="\\N")
    return {"rows": len(df), "seconds": time.perf_counter() - t}


def child_loop(n: int, out: str) -> dict:
    cols = _rows(n)
    lists = [list(v.to_list() if hasattr(v, "to_list") else v.tolist()) for v in cols.values()]
    t = time.perf_counter()
    text = ""
    parts = []
    for row in zip(*lists, strict=True):  # one Python object per cell, as the original job
        parts.append("\t".join("\\N" if v is None else str(v) for v in row) + "\n")
    text = "".join(parts)
    with open(out, "w") as fh:
        fh.write(text)
    return {"rows": len(parts), "seconds": time.perf_counter() - t}


def child_reduce(out: str, *parts: str) -> dict:
    from ncreel.pg.copytext import concatenate

    t = time.perf_counter()
    size = concatenate(list(parts), out)
    return {"bytes": size, "seconds": time.perf_counter() - t}


def child_load(files: str, conninfo: str, columns: str, jobs: int) -> dict:
    from ncreel.pg.load import load_copy

    s = load_copy(json.loads(files), conninfo=conninfo, table="bench_load", run="bench",
                  columns=json.loads(columns), jobs=jobs)
    return {"rows": s["rows"], "seconds": s["seconds"], "replaced": s["replaced"]}


CHILDREN = {"writer": child_writer, "pandas": child_pandas, "loop": child_loop,
            "reduce": child_reduce, "load": child_load}


# --- parent -----------------------------------------------------------------------------

#: Runs argv and writes its wall time and peak RSS to a file. A separate, tiny process,
#: because a child's ru_maxrss includes the image it was forked from: measured straight from
#: this (large, after numpy/polars imports) process it would report this process's size.
_WRAPPER = """
import os, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t = time.perf_counter()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as fh:
    fh.write(f"{os.waitstatus_to_exitcode(status)} {time.perf_counter() - t} {usage.ru_maxrss}")
"""


def measure(argv: list[str], stdout=None, env=None) -> tuple[float, float, str]:
    """Run argv; return (wall seconds, peak RSS MB, stdout text).

    The peak RSS is the child's own, plus at most the tiny wrapper's few MB it was
    spawned from (``posix_spawn``).
    """
    with tempfile.TemporaryFile() as cap, tempfile.NamedTemporaryFile("r") as res:
        subprocess.run([sys.executable, "-S", "-c", _WRAPPER, res.name, *argv],
                       stdout=stdout or cap, check=True, env=env)
        code, wall, maxrss = res.read().split()
        if int(code) != 0:
            raise SystemExit(f"{argv[:4]} failed with {code}")
        text = ""
        if stdout is None:
            cap.seek(0)
            text = cap.read().decode()
    return float(wall), int(maxrss) / 1024, text


def child(kind: str, *args, env=None) -> tuple[dict, float]:
    _, rss, text = measure([sys.executable, __file__, "--child", kind, *map(str, args)],
                           env=env)
    return json.loads(text.strip().splitlines()[-1]), rss


def split_lines(path: Path, n: int) -> list[str]:
    """Split a COPY file into `n` files at line ends (stand-ins for a run's shard files)."""
    data = path.read_bytes()
    cuts = [0]
    for k in range(1, n):
        cuts.append(data.index(b"\n", max(cuts[-1], len(data) * k // n)) + 1)
    cuts.append(len(data))
    parts = []
    for k in range(n):
        part = path.with_name(f"{path.stem}.part{k}.copy")
        part.write_bytes(data[cuts[k]:cuts[k + 1]])
        parts.append(str(part))
    return parts


def load_vs_psql(rows_file: Path, n_rows: int, repeats: int) -> dict:
    """Seconds of load_copy (1 and 2 connections) and of ``psql \\copy``, best of `repeats`.

    Each measurement starts without the run's rows (psql's plain table truncated, the
    run's partition dropped; not timed). load_copy's time is its own (connect, create
    check, COPY into the run's new table, swap, commit), without the Python start-up;
    psql's is the process's wall time of a ``\\copy`` into a plain table.
    """
    import psycopg
    from ncreel.pg.sql import copy_statement, partition_name
    from pgserver import start_server
    from psycopg import sql

    cols = _field_columns()
    parts = split_lines(rows_file, 4)
    info, stop = start_server(["max_wal_size=4GB"])
    best = {"load1": float("inf"), "load2": float("inf"), "psql": float("inf")}
    # psql's baseline: \copy into a plain table of the same columns.
    copy = "\\" + copy_statement("bench_plain", cols, f"'{rows_file}'")
    try:
        with psycopg.connect(info["conninfo"], autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_plain (run text NOT NULL DEFAULT 'psql', "
                         + ", ".join(f"{n} {t}" for n, t in cols) + ")")
            for _ in range(repeats):
                for kind in best:
                    conn.execute("TRUNCATE bench_plain")
                    # The run's partition: each load is a first load, not a replace.
                    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
                        sql.Identifier(partition_name("bench_load", "bench"))))
                    if kind == "psql":
                        wall, _rss, _out = measure(
                            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", info["host"],
                             "-U", "postgres", "-d", "postgres", "-c", copy])
                        assert conn.execute("SELECT count(*) FROM bench_plain").fetchone()[0] \
                            == n_rows
                    else:
                        files = [str(rows_file)] if kind == "load1" else parts
                        r, _rss = child("load", json.dumps(files), info["conninfo"],
                                        json.dumps(cols), int(kind[-1]))
                        assert (r["rows"], r["replaced"]) == (n_rows, 0)  # a first load
                        wall = r["seconds"]
                    best[kind] = min(best[kind], wall)
                    print(f"# {kind}: {n_rows} rows in {wall:.2f} s", flush=True)
    finally:
        stop()
        for part in parts:
            os.unlink(part)
    return best


def child_replace(files: str, conninfo: str, columns: str, table: str, run: str) -> dict:
    from ncreel.pg.load import load_copy

    return load_copy(json.loads(files), conninfo=conninfo, table=table, run=run,
                     columns=json.loads(columns))


CHILDREN["replace"] = child_replace


def _field_columns():
    from ncreel.cells import field_columns
    from ncreel.input.timeaxis import TimeAxis

    ctx = type("C", (), {"time": TimeAxis(None, [], "standard", "", True),
                         "value_type": "real"})()
    return field_columns(ctx)


def _dead_tuples(conn, table: str, inserted: int) -> int:
    """Dead tuples over `table` and its partitions, from ``pg_stat_user_tables``.

    Backends report their counts to the statistics a little after their transactions end:
    wait (up to 20 s) until the table's counts include `inserted` rows inserted, so that a
    0 is a measurement, not counts still unreported.
    """
    end = time.monotonic() + 20
    while True:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        ins, dead = conn.execute(
            "SELECT coalesce(sum(n_tup_ins), 0), coalesce(sum(n_dead_tup), 0) FROM "
            "pg_stat_user_tables WHERE relid = %s::regclass OR relid IN (SELECT inhrelid FROM "
            "pg_inherits WHERE inhparent = %s::regclass)", (table, table)).fetchone()
        if ins >= inserted:
            return int(dead)
        if time.monotonic() > end:
            raise SystemExit(f"statistics of {table} not reported within 20 s")
        time.sleep(0.2)


def _worst_read(conn, query: str, until) -> tuple[float, int]:
    """Return the slowest time (s) and number of reads of `query`, run 20 times and until `until()`.

    `query` counts 1000 rows (asserted).
    """
    worst, n = 0.0, 0
    while n < 20 or not until():
        t = time.perf_counter()
        assert conn.execute(query).fetchone()[0] == 1000
        worst = max(worst, time.perf_counter() - t)
        n += 1
        time.sleep(0.002)
    return worst, n


def _reload_beside_reader(conn, query: str, child_args: list[str]
                          ) -> tuple[float, float, int, dict]:
    """Run a load child while `conn` reads `query` in a loop.

    Returns
    -------
    tuple
        The reader's worst time alone and during the load (s), its reads during the load,
        and the child's JSON summary.
    """
    quiet, _ = _worst_read(conn, query, lambda: True)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, __file__, "--child", *child_args], stdout=out)
        during, n_reads = _worst_read(conn, query, lambda: proc.poll() is not None)
        assert proc.wait() == 0
        out.seek(0)
        summary = json.loads(out.read().strip().splitlines()[-1])
    return quiet, during, n_reads, summary


def replace_run(rows_file: Path, n_rows: int) -> dict:
    """Replace a run of `n_rows` rows in a table shared with another run.

    Loads run ``big`` (the rows file) and run ``other`` (1000 rows), then reloads ``big``
    in a child process while this one reads run ``other`` over and over: the swap's own
    time (``swap_seconds``: lock, DETACH, DROP, ATTACH, commit), the dead tuples left, and
    the reader's worst query time during the reload against its worst with nothing else
    running. For comparison, the earlier way (DELETE of the run's rows in a plain table,
    then COPY) is timed on the same rows.
    """
    import psycopg
    from pgserver import start_server

    cols = _field_columns()
    info, stop = start_server(["max_wal_size=4GB"])
    other = rows_file.with_name("other.copy")
    with open(rows_file, "rb") as src, open(other, "wb") as dst:
        dst.writelines(line for _, line in zip(range(1000), src, strict=False))
    args = [info["conninfo"], json.dumps(cols), "shared"]
    query = "SELECT count(*) FROM shared WHERE run = 'other'"
    try:
        for run, f in (("big", rows_file), ("other", other)):
            r, _ = child("replace", json.dumps([str(f)]), *args, run)
        with psycopg.connect(info["conninfo"], autocommit=True) as conn:
            quiet, during, n_reads, summary = _reload_beside_reader(
                conn, query, ["replace", json.dumps([str(rows_file)]), *args, "big"])
            assert summary["replaced"] == n_rows == summary["rows"]
            dead = _dead_tuples(conn, "shared", n_rows + 1000)  # the new partition + other
            # The earlier way: DELETE the run's rows from a plain table, then COPY.
            conn.execute("CREATE TABLE plain (LIKE shared)")
            conn.execute("INSERT INTO plain SELECT * FROM shared")
            with psycopg.connect(info["conninfo"], autocommit=True) as other_conn:
                t = time.perf_counter()  # its own session: exiting, it reports its counts
                other_conn.execute("DELETE FROM plain WHERE run = 'big'")
                delete_s = time.perf_counter() - t
            delete_dead = _dead_tuples(conn, "plain", n_rows + 1000)
    finally:
        stop()
        other.unlink(missing_ok=True)
    print(f"# replace {n_rows} rows: swap {summary['swap_seconds']:.3f} s of "
          f"{summary['seconds']:.1f} s; DELETE alone {delete_s:.2f} s leaving {delete_dead} "
          f"dead tuples; reader worst {during * 1000:.1f} ms over {n_reads} reads "
          f"(quiet {quiet * 1000:.1f} ms)", flush=True)
    return {"replace_run_rows": n_rows, "replace_run_seconds": summary["swap_seconds"],
            "replace_load_seconds": summary["seconds"], "replace_dead_tuples": dead,
            "delete_run_seconds": round(delete_s, 3), "delete_dead_tuples": delete_dead,
            "reader_extra_wait_ms": round(max(0.0, during - quiet) * 1000, 1)}


# --- 6. the normalised layout against the wide one -------------------------------------

def _shard_rows(ny: int, nx: int, n_t: int, geometry: str, layout: str):
    """Return ``field``-model ShardRows on a synthetic lat/lon grid (cells with polygons)."""
    import numpy as np
    from ncreel.cells import CellContext, cells_settings
    from ncreel.cells.geometry import CellGeometry
    from ncreel.cells.registry import resolve_model
    from ncreel.cells.rows import ShardRows, table_columns
    from ncreel.input.timeaxis import TimeAxis

    lat1, lon1 = np.linspace(-60, 70, ny), np.linspace(-179.5, 179.5, nx)
    lat, lon = np.meshgrid(lat1, lon1, indexing="ij")
    time_ax = TimeAxis(values=np.arange(n_t) * 30.0,
                       labels=[f"{2000 + m // 12}-{m % 12 + 1:02d}-16T00:00:00"
                               for m in range(n_t)],
                       calendar="standard", units="days since 2000-01-01", decoded=True)
    ctx = CellContext(time=time_ax, cell_mean=np.full((ny, nx), 280.0), lat=lat, lon=lon,
                      lon_raw=lon)
    cells = cells_settings({"geometry": geometry, "layout": layout})
    model = resolve_model("field", {})
    geom = None
    if geometry != "none":
        ye = np.r_[lat1[0] - 0.5, (lat1[1:] + lat1[:-1]) / 2, lat1[-1] + 0.5]
        xe = np.r_[-180.0, (lon1[1:] + lon1[:-1]) / 2, 180.0]
        geom = CellGeometry._rectilinear(xe[:-1], xe[1:], ye[:-1], ye[1:], lon1, nx)
    return ShardRows(model=model, ctx=ctx, columns=table_columns(
        model, ctx, geometry=cells["geometry"]), geometry=geom)


def child_layout_files(out: str, ny: int, nx: int, n_t: int, geometry: str,
                       layout: str) -> dict:
    """Write a run of ny x nx cells x n_t steps in `layout`; return its files and columns."""
    import numpy as np
    from ncreel.cells.normalised import NormalisedRows

    rows = _shard_rows(ny, nx, n_t, geometry, layout)
    rng = np.random.default_rng(1)
    files = {"values": f"{out}.copy", "cells": f"{out}_cells.copy",
             "steps": f"{out}_steps.copy"}
    n = 0
    t = time.perf_counter()
    with open(files["values"], "wb") as fh:
        split = NormalisedRows(rows) if layout == "normalised" else None
        steps_fh = open(files["steps"], "wb") if split else None
        for t0 in range(n_t):
            block = rng.normal(280, 10, size=(1, ny, nx)).astype(np.float32)
            n += split.write(fh, steps_fh, t0, block) if split else rows.write(fh, t0, block)
        if split:
            steps_fh.close()
            with open(files["cells"], "wb") as cfh:
                split.finish(cfh)
    if not split:
        files = {"values": files["values"]}
    return {"files": files, "columns": rows.columns, "rows": n,
            "seconds": time.perf_counter() - t}


def child_layout_load(files: str, conninfo: str, columns: str, table: str, run: str,
                      layout: str) -> dict:
    from ncreel.pg.load import load_copy, load_normalised

    files, columns = json.loads(files), json.loads(columns)
    if layout == "wide":
        return load_copy(files["values"], conninfo=conninfo, table=table, run=run,
                         columns=columns)
    return load_normalised(files, conninfo=conninfo, table=table, run=run, columns=columns)


CHILDREN["layout_files"] = child_layout_files
CHILDREN["layout_load"] = child_layout_load


def _run_bytes(conn, parents: list[str], run: str) -> int:
    """Bytes on disk (heap, TOAST, indexes) of the run's partitions of `parents`."""
    return int(conn.execute(
        "SELECT sum(pg_total_relation_size(i.inhrelid)) FROM pg_inherits i JOIN pg_class c "
        "ON c.oid = i.inhrelid WHERE i.inhparent = ANY(%s::regclass[]) AND "
        "pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%%L)', %s::text)",
        (parents, run)).fetchone()[0])


def layout_compare(work: Path, *, demo_steps: int, ny: int, nx: int, n_t: int,
                   repeats: int) -> dict:
    """Size per row (demo, geometry postgis), load speed and a rerun of the two layouts.

    Size: the real demo file's first `demo_steps` steps, written by the shard code in
    each layout and loaded; bytes of the run's partitions (tables, TOAST, indexes) per
    row. Load: a synthetic ny x nx x n_t run (with and without polygons), best of
    `repeats` loads of each layout from its files, each into emptied tables. Replace:
    the normalised run loaded again beside another run that a reader queries through the
    view: the swap's exclusive time, dead tuples after it, the reader's worst extra wait.
    """
    import numpy as np
    import psycopg
    from ncreel.cells import ShardRows, cells_settings
    from ncreel.cells.normalised import NormalisedRows
    from ncreel.config.settings import CellsSettings
    from ncreel.input.source import open_series
    from ncreel.pg.layout import layout_tables
    from ncreel.sample import sample_path
    from pgserver import postgis_package, start_server

    if postgis_package() is not None:
        print("# layout: PostGIS is not installed, phase 6 skipped", flush=True)
        return {}
    figures: dict[str, object] = {}
    info, stop = start_server(["max_wal_size=4GB"])
    conninfo = info["conninfo"]
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION postgis")
            # Size per row: the demo with geometry.
            per_row = {}
            with open_series(str(sample_path("A1B_north_america.nc")),
                             "air_temperature") as s:
                mean = np.nanmean(s.read(0, s.n_time), axis=0)
                for layout in ("wide", "normalised"):
                    cells = CellsSettings.from_params(cells_settings(
                        {"geometry": "postgis", "layout": layout}))
                    rows = ShardRows.for_series(s, cell_mean=mean, cells=cells)
                    base = work / f"demo_{layout}"
                    files = {k: f"{base}{'' if k == 'values' else '_' + k}.copy"
                             for k in ("values", "cells", "steps")}
                    with open(files["values"], "wb") as fh, open(files["steps"], "wb") as sf:
                        split = NormalisedRows(rows) if layout == "normalised" else None
                        n = 0
                        for t0 in range(0, demo_steps, 24):
                            block = s.read(t0, min(demo_steps, t0 + 24))
                            n += split.write(fh, sf, t0, block) if split else \
                                rows.write(fh, t0, block)
                        if split:
                            with open(files["cells"], "wb") as cf:
                                split.finish(cf)
                    table = f"demo_{layout}"
                    child("layout_load", json.dumps(files), conninfo,
                          json.dumps(rows.columns), table, "demo", layout)
                    parents = ([table] if layout == "wide" else
                               list(layout_tables(table).values()))
                    conn.execute("VACUUM ANALYZE")  # visibility maps, as a settled table
                    per_row[layout] = _run_bytes(conn, parents, "demo") / n
                    for f in files.values():
                        Path(f).unlink(missing_ok=True)
            figures["demo_rows"] = n
            figures["wide_bytes_per_row"] = round(per_row["wide"], 1)
            figures["normalised_bytes_per_row"] = round(per_row["normalised"], 1)
            figures["table_bytes_per_row_ratio"] = round(per_row["wide"] / per_row["normalised"],
                                                         2)
            print(f"# demo {n} rows with geometry: wide {per_row['wide']:.0f} B/row, "
                  f"normalised {per_row['normalised']:.0f} B/row", flush=True)

            # Load speed, with and without polygons.
            for geometry in ("postgis", "none"):
                best = {}
                made = {}
                for layout in ("wide", "normalised"):
                    r, _ = child("layout_files", str(work / f"syn_{layout}"), ny, nx, n_t,
                                 geometry, layout)
                    made[layout] = r
                    table = f"syn_{layout}"
                    best[layout] = float("inf")
                    for _ in range(repeats):
                        conn.execute(f"DROP TABLE IF EXISTS {table}" if layout == "wide" else
                                     f"DROP TABLE IF EXISTS {table}_cells, {table}_steps, "
                                     f"{table}_values CASCADE")  # the view with them
                        s, _ = child("layout_load", json.dumps(r["files"]), conninfo,
                                     json.dumps(r["columns"]), table, "big", layout)
                        assert s["rows"] == r["rows"]
                        best[layout] = min(best[layout], s["seconds"])
                        print(f"# load {layout} geometry {geometry}: {s['rows']} rows in "
                              f"{s['seconds']:.1f} s", flush=True)
                n_rows = made["wide"]["rows"]
                tag = "" if geometry == "postgis" else "_no_geometry"
                figures[f"layout_load_rows{tag}"] = n_rows
                figures[f"wide_load_rows_per_s{tag}"] = round(n_rows / best["wide"])
                figures[f"normalised_load_rows_per_s{tag}"] = round(n_rows / best["normalised"])
                figures[f"load_speedup_vs_wide{tag}"] = round(best["wide"] / best["normalised"],
                                                              2)
                if geometry == "none":
                    figures.update(_replace_normalised(conn, conninfo, work, made["normalised"],
                                                       n_rows))
                for r in made.values():
                    for f in r["files"].values():
                        Path(f).unlink(missing_ok=True)
    finally:
        stop()
    return figures


def _replace_normalised(conn, conninfo: str, work: Path, big: dict, n_rows: int) -> dict:
    """Reload run ``big`` of table syn_normalised beside run ``other``, read via the view."""
    other, _ = child("layout_files", str(work / "other"), 10, 100, 1, "none", "normalised")
    args = [conninfo, json.dumps(big["columns"]), "syn_normalised"]
    child("layout_load", json.dumps(other["files"]), *args, "other", "normalised")
    query = "SELECT count(*) FROM syn_normalised WHERE run = 'other'"

    quiet, during, n_reads, summary = _reload_beside_reader(
        conn, query, ["layout_load", json.dumps(big["files"]), *args, "big", "normalised"])
    assert summary["replaced"] == n_rows == summary["rows"]
    dead = sum(_dead_tuples(conn, f"syn_normalised_{k}", 0) for k in ("cells", "steps",
                                                                      "values"))
    deleted = conn.execute(
        "SELECT coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables s JOIN pg_inherits i ON "
        "i.inhrelid = s.relid WHERE i.inhparent = ANY('{syn_normalised_cells,"
        "syn_normalised_steps,syn_normalised_values}'::regclass[])").fetchone()[0]
    for f in other["files"].values():
        Path(f).unlink(missing_ok=True)
    print(f"# normalised replace {n_rows} rows: swap {summary['swap_seconds']:.3f} s of "
          f"{summary['seconds']:.1f} s; reader worst {during * 1000:.1f} ms over {n_reads} "
          f"reads (quiet {quiet * 1000:.1f} ms)", flush=True)
    return {"normalised_replace_run_seconds": summary["swap_seconds"],
            "normalised_replace_dead_tuples": int(dead) + int(deleted),
            "normalised_reader_extra_wait_ms": round(max(0.0, during - quiet) * 1000, 1)}


# --- 7. the shard's row path against polars' own writer, one ERA5-like step ----------

def _era5_step(ny: int, nx: int):
    """One hourly step of a global grid and the ShardRows of the default cell model.

    The grid is (ny, nx), its longitudes 0..360 as ERA5 stores them; the ``field`` model
    writes nine columns.
    """
    import numpy as np
    from ncreel.cells import CellContext
    from ncreel.cells.geometry import fold_longitude
    from ncreel.cells.registry import resolve_model
    from ncreel.cells.rows import ShardRows, table_columns
    from ncreel.input.timeaxis import TimeAxis

    lat, lon_raw = np.meshgrid(np.linspace(90, -90, ny), np.arange(nx) * (360.0 / nx),
                               indexing="ij")
    rng = np.random.default_rng(2)
    block = (250 + 40 * np.cos(np.deg2rad(lat)) + rng.normal(0, 2, (ny, nx))
             ).astype(np.float32)[None]
    time_ax = TimeAxis(values=np.arange(48.0),
                       labels=[f"2000-01-{1 + h // 24:02d}T{h % 24:02d}:00:00"
                               for h in range(48)],
                       calendar="standard", units="hours since 2000-01-01", decoded=True)
    # The statistics job's float64 means: anomalies of full precision, as in a run.
    mean = block[0] - 0.5 + rng.normal(0, 0.3, (ny, nx))
    ctx = CellContext(time=time_ax, cell_mean=mean, lat=lat,
                      lon=fold_longitude(lon_raw), lon_raw=lon_raw, value_type="real",
                      variable="t2m")
    model = resolve_model("field", {})
    return ShardRows(model=model, ctx=ctx, columns=table_columns(model, ctx)), block


def _digest(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(2**20):
            h.update(chunk)
    return h.hexdigest()


def child_shardrows(ny: int, nx: int, out: str, repeats: int) -> dict:
    """Ncreel's row path for one block: ShardRows.write (model, checks, COPY text)."""
    rows, block = _era5_step(ny, nx)
    best = float("inf")
    for _ in range(repeats + 1):  # the first warms up (imports, allocator)
        with open(out, "wb") as fh:
            t = time.process_time()
            n = rows.write(fh, 24, block)
            best = min(best, time.process_time() - t)
    return {"rows": n, "seconds": best, "sha256": _digest(out)}


def child_polars1(ny: int, nx: int, out: str, repeats: int) -> dict:
    """Time polars' write_csv of the same rows as COPY text (tab, ``\\N``, no quotes).

    The DataFrame of the model's columns, as plain types (the time as text), is built
    first and not timed.
    """
    import polars as pl

    rows, block = _era5_step(ny, nx)
    df = pl.DataFrame(rows.rows(24, block))
    df = df.with_columns(pl.col(c).cast(pl.Utf8) for c, t in df.schema.items()
                         if t in (pl.Categorical, pl.Enum))
    best = float("inf")
    for _ in range(repeats + 1):
        with open(out, "wb") as fh:
            t = time.process_time()
            df.write_csv(fh, include_header=False, separator="\t", null_value="\\N",
                         quote_style="never", line_terminator="\n")
            best = min(best, time.process_time() - t)
    return {"rows": df.height, "seconds": best, "sha256": _digest(out),
            "threads": pl.thread_pool_size()}


CHILDREN["shardrows"] = child_shardrows
CHILDREN["polars1"] = child_polars1


def writer_vs_polars(work: Path, ny: int, nx: int, repeats: int) -> dict:
    """Rows/s of a shard's row path for one step against polars' single-threaded write_csv.

    Both children run with ``POLARS_MAX_THREADS=1``: a shard job's rows pass has one core
    (a local run has a shard per core), so one thread against one thread; each is timed
    in CPU seconds of its process (best of `repeats`), which other jobs on a shared
    machine disturb far less than wall time. The two files must be the same text, or the
    comparison is not of the same work.
    """
    env = {**os.environ, "POLARS_MAX_THREADS": "1"}
    res = {}
    for kind in ("shardrows", "polars1"):
        out = work / f"{kind}.copy"
        r, rss = child(kind, ny, nx, out, repeats, env=env)
        res[kind] = r
        out.unlink()
        print(f"# {kind}: {r['rows']} rows in {r['seconds']:.3f} CPU s = "
              f"{r['rows'] / r['seconds']:,.0f} rows/s, peak RSS {rss:.0f} MB", flush=True)
    assert res["polars1"]["threads"] == 1
    if res["shardrows"]["sha256"] != res["polars1"]["sha256"]:
        raise SystemExit("the row path and polars wrote different text: not comparable")
    ours, theirs = (res[k]["rows"] / res[k]["seconds"] for k in ("shardrows", "polars1"))
    return {"copy_writer_step_rows": res["shardrows"]["rows"],
            "copy_writer_step_rows_per_s": round(ours),
            "polars_1thread_rows_per_s": round(theirs),
            "copy_writer_fraction_of_polars": round(ours / theirs, 2)}


# --- 8. rows written beside the frames ----------------------------------------------------

def child_beside(kind: str, nc: str, work: str, n_time: int) -> dict:
    """Time one shard of every step of `nc` (run_shard): wall and CPU seconds.

    `kind`: ``frames`` alone, ``rows`` alone, or ``both`` (the rows beside the frames).
    """
    import numpy as np
    from ncreel.cells import cells_settings
    from ncreel.config.settings import (
        CellsSettings,
        EncodeSettings,
        RenderSettings,
        SeriesSelection,
    )
    from ncreel.jobs.shard import run_shard
    from ncreel.run.shardplan import Shard

    d = Path(work) / kind
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / "stats.json").write_text(json.dumps({"vmin": 240.0, "vmax": 310.0}))
    selection = SeriesSelection(paths=(nc,), variable="tas", time_dim="time", select={},
                                lat=None, lon=None, time=None)
    with __import__("netCDF4").Dataset(nc) as ds:
        ny, nx = ds.dimensions["lat"].size, ds.dimensions["lon"].size
    np.save(d / "cell_mean.npy", np.full((ny, nx), 280.0, np.float32))
    render = RenderSettings.from_params({
        "width": 640, "height": 360, "dpi": 80, "cmap": "viridis",
        "map": {"coastlines": False, "borders": False, "projection": "PlateCarree",
                "projection_params": {}}})
    t, cpu = time.perf_counter(), time.process_time()
    info = run_shard(selection, Shard(0, 0, n_time), stats_json=d / "stats.json",
                     cell_mean_npy=d / "cell_mean.npy",
                     frames_dir=None if kind == "rows" else d / "frames",
                     rows_path=None if kind == "frames" else d / "rows.copy", render=render,
                     segment=None if kind == "rows" else d / "seg.mp4",
                     encode=EncodeSettings(fps=24, crf=23, preset="veryfast"),
                     cells=CellsSettings.from_params(cells_settings({})))
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    shutil.rmtree(d)
    return {"wall": wall, "cpu": cpu, "rows": info["rows"], "frames": info["frames"],
            "mode": info["rows_mode"]}


CHILDREN["beside"] = child_beside


def rows_beside_frames(work: Path, n_time: int, ny: int, nx: int, repeats: int) -> dict:
    """Wall time of a shard with both outputs against its frames alone plus its rows alone.

    ``rows_beside_frames_fraction_of_sum`` is 1 when nothing overlaps and
    ``max / sum`` when the shorter pass hides entirely behind the longer; best of
    `repeats` for each. CPU seconds are this process's (ffmpeg's are apart).
    """
    nc = work / f"beside_{n_time}x{ny}x{nx}.nc"
    if not nc.exists():
        make_big_nc(nc, n_time, ny, nx)
    best = {}
    for _ in range(repeats):
        for kind in ("frames", "rows", "both"):
            r, _rss = child("beside", kind, nc, work, n_time)
            if kind not in best or r["wall"] < best[kind]["wall"]:
                best[kind] = r
    both, frames, rows = best["both"], best["frames"], best["rows"]
    assert both["mode"] == "shared", both
    total = frames["wall"] + rows["wall"]
    print(f"# shard {n_time} x {ny} x {nx}: frames {frames['wall']:.2f} s (CPU "
          f"{frames['cpu']:.2f} s), rows {rows['wall']:.2f} s (CPU {rows['cpu']:.2f} s, "
          f"{rows['rows']} rows), both {both['wall']:.2f} s (CPU {both['cpu']:.2f} s)",
          flush=True)
    return {"beside_frames_seconds": round(frames["wall"], 2),
            "beside_rows_seconds": round(rows["wall"], 2),
            "beside_both_seconds": round(both["wall"], 2),
            "rows_beside_frames_fraction_of_sum": round(both["wall"] / total, 2),
            "rows_beside_frames_floor": round(max(frames["wall"], rows["wall"]) / total, 2),
            "beside_both_cores_busy": round(both["cpu"] / both["wall"], 2)}


def make_big_nc(path: Path, n_time: int, ny: int, nx: int) -> None:
    import netCDF4
    import numpy as np

    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", n_time)
        ds.createDimension("lat", ny)
        ds.createDimension("lon", nx)
        t = ds.createVariable("time", "f8", ("time",))
        t.units, t.calendar = "days since 2000-01-01", "standard"
        t[:] = np.arange(n_time) * 30.0
        la = ds.createVariable("lat", "f8", ("lat",))
        la.units = "degrees_north"
        la[:] = np.linspace(-89.9, 89.9, ny)
        lo = ds.createVariable("lon", "f8", ("lon",))
        lo.units = "degrees_east"
        lo[:] = np.linspace(-179.9, 179.9, nx)
        v = ds.createVariable("tas", "f4", ("time", "lat", "lon"), chunksizes=(1, ny, nx))
        v.units = "K"
        rng = np.random.default_rng(0)
        base = (280 + 20 * np.cos(np.deg2rad(la[:]))[:, None]
                + rng.normal(0, 1, (ny, nx))).astype(np.float32)
        for i in range(n_time):
            v[i] = base + np.float32(i * 0.01)


def big_run(work: Path, n_time: int, ny: int, nx: int, frames_per_shard: int) -> dict:
    nc = work / "big.nc"
    if not nc.exists():
        make_big_nc(nc, n_time, ny, nx)
    run = "bench1m"
    cfg = [f"input={nc}", "variable=tas", f"run={run}", f"frames_per_shard={frames_per_shard}",
           "width=160", "height=120", "dpi=40"]
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--forceall",
                        "--printshellcmds", "--config", *cfg, "--", f"results/{run}/cells.copy"],
                       cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(r.stderr[-4000:])
    # Declared mem_mb per job, from Snakemake's own job listing.
    declared = {}
    for m in re.finditer(r"rule process_shard:.*?wildcards: shard=(\d+).*?mem_mb=(\d+)",
                         r.stderr + r.stdout, re.S):
        declared[m.group(1)] = int(m.group(2))
    over = []
    worst = 0.0
    for tsv in sorted((ROOT / f"results/{run}/benchmarks/process_shard").glob("*.tsv")):
        shard = tsv.stem
        head, vals = tsv.read_text().splitlines()[:2]
        row = dict(zip(head.split("\t"), vals.split("\t"), strict=True))
        rss = float(row["max_rss"])
        frac = rss / declared[shard]
        worst = max(worst, frac)
        if rss >= declared[shard]:
            over.append(shard)
    shards = sorted(glob.glob(str(ROOT / f"results/{run}/cells/*.copy")))
    return {"wall": wall, "declared": declared, "worst_fraction": worst, "over": over,
            "shards": shards, "rows_file": ROOT / f"results/{run}/cells.copy"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs="+")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--big", default="100x1000x1000",
                    help="time x ny x nx of the synthetic workflow run (0 to skip)")
    ap.add_argument("--frames-per-shard", type=int, default=25)
    ap.add_argument("--work", default=str(ROOT / "results/bench-cells"))
    ap.add_argument("--keep", action="store_true", help="keep the big run's results")
    ap.add_argument("--repeats", type=int, default=3,
                    help="load measurements per kind; the best counts (shared machines)")
    ap.add_argument("--replace-rows", type=int, default=0,
                    help="rows of the replaced run (phase 5); 0: the --rows file")
    ap.add_argument("--layout", default="10x1000x1000",
                    help="steps x ny x nx of phase 6's synthetic run (normalised vs wide)")
    ap.add_argument("--demo-steps", type=int, default=240,
                    help="steps of the demo file in phase 6's size per row")
    ap.add_argument("--layout-only", action="store_true",
                    help="run only phase 6 (the normalised layout against the wide one)")
    ap.add_argument("--step-grid", default="721x1440",
                    help="ny x nx of phase 7's step (the row path against polars)")
    ap.add_argument("--beside", default="48x200x400",
                    help="steps x ny x nx of phase 8's shard (rows beside the frames)")
    ap.add_argument("--shard-only", action="store_true",
                    help="run only phases 7 and 8 (a shard's rows: writer, beside frames)")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, seconds: checks every phase runs (CI)")
    a = ap.parse_args()
    if a.smoke:
        a.rows, a.big, a.repeats = 20_000, "0", 1
        a.layout, a.demo_steps = "2x10x1000", 3
        a.step_grid, a.beside = "20x40", "4x20x40"
    if a.child:
        kind, *args = a.child
        conv = [int(x) if x.isdigit() else x for x in args]
        print(json.dumps(CHILDREN[kind](*conv)))
        return
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    figures: dict[str, object] = {}
    n_t, ny, nx = (int(x) for x in a.layout.split("x"))
    if a.layout_only:
        figures.update(layout_compare(work, demo_steps=a.demo_steps, ny=ny, nx=nx, n_t=n_t,
                                      repeats=a.repeats))
        for k, v in figures.items():
            print(f"{k}={v}")
        return
    # 7. and 8.: a shard's rows, against polars' writer and beside the frames.
    figures.update(writer_vs_polars(work, *(int(x) for x in a.step_grid.split("x")),
                                    a.repeats))
    figures.update(rows_beside_frames(work, *(int(x) for x in a.beside.split("x")),
                                      a.repeats))
    if a.shard_only:
        for k, v in figures.items():
            print(f"{k}={v}")
        return

    # 1. writer vs pandas vs per-cell loop, same rows.
    res = {}
    for kind in ("writer", "pandas", "loop"):
        out = work / f"{kind}.tsv"
        r, rss = child(kind, a.rows, out)
        res[kind] = (r["rows"] / r["seconds"], rss)
        if kind == "writer":  # whole blocks of 10 steps x 1000 cells: the rows written
            a.rows = r["rows"]
        print(f"# {kind}: {r['rows']} rows in {r['seconds']:.2f} s "
              f"= {res[kind][0]:,.0f} rows/s, peak RSS {rss:.0f} MB", flush=True)
    figures["copy_rows"] = a.rows
    figures["copy_writer_rows_per_s"] = round(res["writer"][0])
    figures["copy_pandas_rows_per_s"] = round(res["pandas"][0])
    figures["copy_loop_rows_per_s"] = round(res["loop"][0])
    figures["copy_speedup_vs_pandas"] = round(res["writer"][0] / res["pandas"][0], 1)
    figures["copy_speedup_vs_loop"] = round(res["writer"][0] / res["loop"][0], 1)
    for kind in res:
        figures[f"copy_{kind}_rss_mb"] = round(res[kind][1])
    (work / "pandas.tsv").unlink()
    (work / "loop.tsv").unlink()

    # 2. the 1 000 000-cell run through the real workflow.
    parts = []
    if a.big != "0":
        n_time, ny, nx = (int(x) for x in a.big.split("x"))
        b = big_run(work, n_time, ny, nx, a.frames_per_shard)
        print(f"# big run {a.big}: {b['wall']:.0f} s; declared mem_mb {b['declared']}; "
              f"worst max_rss/mem_mb {b['worst_fraction']:.2f}", flush=True)
        figures["big_run_cells"] = ny * nx
        figures["big_run_steps"] = n_time
        figures["big_run_seconds"] = round(b["wall"])
        figures["shard_max_rss_fraction_of_mem_mb"] = round(b["worst_fraction"], 3)
        figures["shards_over_mem_mb"] = len(b["over"])
        parts = b["shards"]
        b["rows_file"].unlink(missing_ok=True)  # free disk for the reduce measurement
    if not parts:  # no big run: reduce the writer's file 12 times over (~2.4 GB)
        parts = [str(work / "writer.tsv")] * 12

    # 3. reduce vs cat on the same files (warm page cache for both: cat runs first once).
    total = sum(os.path.getsize(p) for p in parts)
    cat_out, red_out = work / "cat.out", work / "reduce.out"
    with open(cat_out, "wb") as fh:
        measure(["cat", *parts], stdout=fh)  # warm-up
    cat_out.unlink()
    with open(cat_out, "wb") as fh:
        cat_s, cat_rss, _ = measure(["cat", *parts], stdout=fh)
    cat_out.unlink()
    r, red_rss = child("reduce", red_out, *parts)
    assert r["bytes"] == total
    red_out.unlink()
    figures["reduce_bytes"] = total
    figures["reduce_mb_per_s"] = round(total / 1e6 / r["seconds"])
    figures["cat_mb_per_s"] = round(total / 1e6 / cat_s)
    figures["reduce_fraction_of_cat"] = round(cat_s / r["seconds"], 2)
    figures["reduce_rss_mb"] = round(red_rss)
    figures["cat_rss_mb"] = round(cat_rss)
    print(f"# reduce {total / 1e9:.2f} GB: {r['seconds']:.1f} s vs cat {cat_s:.1f} s",
          flush=True)
    if a.big != "0" and not a.keep:
        shutil.rmtree(ROOT / "results/bench1m", ignore_errors=True)

    # 4. load (1 and 2 connections) vs psql \copy of the same file.
    rows_file = work / "writer.tsv"
    try:
        best = load_vs_psql(rows_file, a.rows, a.repeats)
        # 5. replacing a run: its partition swapped, beside a reader of another run.
        if a.replace_rows:
            rows_file.unlink()
            r, _ = child("writer", a.replace_rows, rows_file)
            figures.update(replace_run(rows_file, r["rows"]))
        else:
            figures.update(replace_run(rows_file, a.rows))
    finally:
        rows_file.unlink(missing_ok=True)
    figures["load_rows_per_s"] = round(a.rows / best["load1"])
    figures["load_jobs2_rows_per_s"] = round(a.rows / best["load2"])
    figures["psql_copy_rows_per_s"] = round(a.rows / best["psql"])
    figures["load_fraction_of_psql"] = round(best["psql"] / best["load1"], 2)
    figures["load_fraction_of_psql_jobs2"] = round(best["psql"] / best["load2"], 2)
    # 6. the normalised layout against the wide one.
    figures.update(layout_compare(work, demo_steps=a.demo_steps, ny=ny, nx=nx, n_t=n_t,
                                  repeats=a.repeats))
    for k, v in figures.items():
        print(f"{k}={v}")


if __name__ == "__main__":
    main()
