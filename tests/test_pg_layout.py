"""The normalised table layout (cells.layout: normalised) in a real PostgreSQL + PostGIS.

The same rows of the real HadCM3 sample are written by the shard code in both layouts,
in two shards (so cells seen by both are merged), joined by the reduce code and loaded by
the load code; the view must equal the wide table row for row.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from ncreel.cells import ShardRows, cells_settings
from ncreel.cells.normalised import NormalisedRows, cell_area
from ncreel.config.settings import CellsSettings
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.pg.layout import layout_tables, split_columns, storage_order
from ncreel.pg.load import load_copy, load_normalised
from ncreel.pg.reduce import reduce_cells, reduce_normalised

#: Steps of the sample written per shard (two shards).
SHARDS = [(0, 2), (2, 3)]


def write_run(path, tmp_path, *, layout: str, table: str, run: str = "r1",
              geometry: str = "postgis") -> dict:
    """Write both shards' files of `layout` and reduce them; return the files and columns."""
    cells = CellsSettings.from_params(cells_settings({"geometry": geometry,
                                                      "layout": layout}))
    out = tmp_path / layout
    out.mkdir(exist_ok=True)
    parts = {"values": [], "cells": [], "steps": []}
    with open_series(str(path), "air_temperature") as s:
        mean = np.nanmean(s.read(0, s.n_time), axis=0)
        for i, (a, b) in enumerate(SHARDS):
            rows = ShardRows.for_series(s, cell_mean=mean, cells=cells)
            names = {k: out / f"{i:05d}{'' if k == 'values' else '_' + k}.copy"
                     for k in parts}
            with open(names["values"], "wb") as fh:
                if layout == "wide":
                    rows.write(fh, a, s.read(a, b))
                else:
                    split = NormalisedRows(rows)
                    with open(names["steps"], "wb") as sfh:
                        split.write(fh, sfh, a, s.read(a, b))
                    with open(names["cells"], "wb") as cfh:
                        split.finish(cfh)
            for k in parts:
                parts[k].append(str(names[k]))
    files = {"values": out / "cells.copy", "cells": out / "cells_cells.copy",
             "steps": out / "cells_steps.copy", "sql": out / "cells.sql"}
    if layout == "wide":
        reduce_cells(parts["values"], files["values"], files["sql"], columns=rows.columns,
                     table=table, run=run)
    else:
        reduce_normalised(parts["values"], parts["cells"], parts["steps"], files["values"],
                          files["cells"], files["steps"], files["sql"], columns=rows.columns,
                          table=table, run=run)
    return {"files": files, "parts": parts, "columns": rows.columns}


def _rows(conn, table: str) -> list:
    # Geometry compared as its exact binary (EWKB hex), floats as PostgreSQL prints them.
    cols = [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped ORDER BY attnum", (table,)).fetchall()]
    sel = ", ".join(f"{c}::text" for c in cols)
    return conn.execute(f"SELECT {sel} FROM {table} ORDER BY run, time_index, cell_id"
                        ).fetchall()


def _dead(conn, parents: list[str]) -> int:
    return conn.execute(
        "SELECT coalesce(sum(n_dead_tup + n_tup_del), 0) FROM pg_stat_user_tables s JOIN "
        "pg_inherits i ON i.inhrelid = s.relid WHERE i.inhparent = ANY(%s::regclass[])",
        (parents,)).fetchone()[0]


def test_split_columns_and_names():
    wide = [("time_index", "integer"), ("time", "text"), ("time_value", "double precision"),
            ("cell_id", "bigint"), ("lat", "double precision"), ("lon", "double precision"),
            ("lon_raw", "double precision"), ("value", "real"),
            ("anomaly", "double precision"), ("geom", "geometry(MultiPolygon, 4326)")]
    split = split_columns(wide)
    assert [c for c, _ in split["cells"]] == ["cell_id", "lat", "lon", "lon_raw", "geom",
                                              "cell_area"]
    assert [c for c, _ in split["steps"]] == ["time_index", "time", "time_value"]
    assert [c for c, _ in split["values"]] == ["time_index", "cell_id", "value", "anomaly"]
    # cell_id is stored as integer (row-major ids below 2**31, checked before any job).
    assert dict(split["values"])["cell_id"] == dict(split["cells"])["cell_id"] == "integer"
    # Stored widest first, variable-length last: no padding between columns.
    assert [c for c, _ in storage_order(split["values"])] == ["anomaly", "time_index",
                                                             "cell_id", "value"]
    assert [c for c, _ in storage_order(wide)] == [
        "time_value", "cell_id", "lat", "lon", "lon_raw", "anomaly", "time_index", "value",
        "time", "geom"]
    assert layout_tables("s.t") == {"cells": "s.t_cells", "steps": "s.t_steps",
                                    "values": "s.t_values"}
    with pytest.raises(NcreelError, match="longer than 56 bytes"):
        layout_tables("t" * 57)
    with pytest.raises(NcreelError, match="needs the cell model's columns cell_id"):
        split_columns([("time_index", "integer"), ("value", "real")])


def test_cell_area_is_geodesic_on_wgs84():
    # A 1x1 degree cell at the equator: 12 308 778 m² (pyproj.Geod docs' method; by hand
    # from the authalic sphere it is ~1.2364e10 / 1000: within 0.5 %).
    got = cell_area(["SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 1,0 0)))",
                     "SRID=4326;MULTIPOLYGON(((0 1,0 0,1 0,1 1,0 1)))", None,
                     "SRID=4326;MULTIPOLYGON(((179 0,180 0,180 1,179 1,179 0)),"
                     "((-180 0,-179 0,-179 1,-180 1,-180 0)))"])
    assert got[0] == pytest.approx(1.2308778361e10, rel=1e-9)
    assert got[1] == got[0] and np.isnan(got[2])
    assert got[3] == pytest.approx(2 * got[0], rel=1e-9)  # split cell: both parts


def test_view_equals_the_wide_table_and_rerun_swaps_all_three(postgis_conn, sample_nc,
                                                               tmp_path):
    conn, info = postgis_conn, postgis_conn.info.dsn
    wide = write_run(sample_nc, tmp_path, layout="wide", table="wide")
    norm = write_run(sample_nc, tmp_path, layout="normalised", table="norm")
    assert wide["columns"] == norm["columns"]
    load_copy(wide["files"]["values"], conninfo=info, table="wide", run="r1",
              columns=wide["columns"])
    f = norm["files"]
    s1 = load_normalised(f, conninfo=info, table="norm", run="r1", columns=norm["columns"])
    n_cells = 37 * 49
    assert (s1["rows"], s1["cells"], s1["steps"], s1["replaced"]) == (3 * n_cells, n_cells,
                                                                      3, 0)
    # The view: the wide table's columns, in order, and the same rows.
    assert _rows(conn, "norm") == _rows(conn, "wide")
    # Each cell once: the second shard's cells were dropped by the reduce.
    assert f["cells"].read_bytes().count(b"\n") == n_cells
    # Keys: PK on all three, FK values -> cells and values -> steps on the run's partitions.
    pks = conn.execute("SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM "
                       "pg_constraint WHERE contype = 'p' AND conrelid = ANY("
                       "'{norm_cells,norm_steps,norm_values}'::regclass[]) ORDER BY 1"
                       ).fetchall()
    assert pks == [("norm_cells", "PRIMARY KEY (run, cell_id)"),
                   ("norm_steps", "PRIMARY KEY (run, time_index)"),
                   ("norm_values", "PRIMARY KEY (run, time_index, cell_id)")]
    fks = conn.execute("SELECT conrelid::regclass::text, confrelid::regclass::text, "
                       "pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'f' "
                       "ORDER BY 2").fetchall()
    assert fks == [('"norm_values$r1"', '"norm_cells$r1"',
                    "FOREIGN KEY (run, cell_id) REFERENCES \"norm_cells$r1\"(run, cell_id)"),
                   ('"norm_values$r1"', '"norm_steps$r1"',
                    "FOREIGN KEY (run, time_index) REFERENCES \"norm_steps$r1\"(run, "
                    "time_index)")]
    # A values row is its 24-byte tuple header and 23 bytes of columns (anomaly 8,
    # time_index 4, cell_id 4, value 4, run 'r1' 3), no padding: 56 in the model's order
    # (rows of masked cells, NULL value and anomaly, are shorter).
    assert conn.execute("SELECT max(pg_column_size(v.*)) FROM norm_values v").fetchone()[0] \
        == 47
    gist = conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'norm_cells$r1' "
                        "AND indexdef LIKE '%USING gist (geom)%'").fetchone()[0]
    assert gist == 1
    # A value row whose cell is missing is refused (the FK is enforced).
    with pytest.raises(Exception, match="foreign key"):
        conn.execute("INSERT INTO norm_values (run, time_index, cell_id, value, anomaly) "
                     "VALUES ('r1', 0, 999999, 1, 1)")
    # Cell areas: geodesic, summing to the sample's box on the ellipsoid within 1e-9.
    area = conn.execute("SELECT sum(cell_area), min(cell_area), max(cell_area) FROM "
                        "norm_cells").fetchone()
    assert area[0] == pytest.approx(float(cell_area(
        [conn.execute("SELECT ST_AsEWKT(ST_Multi(ST_Union(geom))) FROM norm_cells"
                      ).fetchone()[0]])[0]), rel=1e-6)
    # The Kansas point, through the view.
    got = conn.execute("SELECT time_index, lat, lon FROM norm WHERE ST_Intersects(geom, "
                       "ST_SetSRID(ST_MakePoint(-100, 40), 4326)) ORDER BY 1").fetchall()
    assert [g[0] for g in got] == [0, 1, 2] and len({g[1:] for g in got}) == 1
    assert abs(got[0][1] - 40) < 1.25 and abs(got[0][2] + 100) < 1.875
    # Rerun: the run's three partitions swapped, none of the rows deleted.
    old = conn.execute("SELECT array_agg(inhrelid ORDER BY inhrelid) FROM pg_inherits WHERE "
                       "inhparent = ANY('{norm_cells,norm_steps,norm_values}'::regclass[])"
                       ).fetchone()[0]
    s2 = load_normalised(f, conninfo=info, table="norm", run="r1", columns=norm["columns"])
    assert s2["replaced"] == 3 * n_cells
    new = conn.execute("SELECT array_agg(inhrelid ORDER BY inhrelid) FROM pg_inherits WHERE "
                       "inhparent = ANY('{norm_cells,norm_steps,norm_values}'::regclass[])"
                       ).fetchone()[0]
    assert len(new) == 3 and not set(new) & set(old)
    assert conn.execute("SELECT count(*) FROM pg_class WHERE oid = ANY(%s)", (old,)
                        ).fetchone()[0] == 0
    assert _rows(conn, "norm") == _rows(conn, "wide")
    assert _dead(conn, ["norm_cells", "norm_steps", "norm_values"]) == 0
    # Another run beside it, with two connections over the shard files.
    load_normalised({**f, "values": norm["parts"]["values"]}, conninfo=info, table="norm",
                    run="r2", columns=norm["columns"], jobs=2)
    assert conn.execute("SELECT run, count(*) FROM norm GROUP BY 1 ORDER BY 1").fetchall() \
        == [("r1", 3 * n_cells), ("r2", 3 * n_cells)]
    # A wide load into the view, and a normalised one over a wide table, say why not.
    with pytest.raises(NcreelError, match="norm is a view, as cells.layout normalised makes"):
        load_copy(wide["files"]["values"], conninfo=info, table="norm", run="r1",
                  columns=wide["columns"])
    with pytest.raises(NcreelError, match="wide exists and is not a view"):
        load_normalised(f, conninfo=info, table="wide", run="r1", columns=norm["columns"])


def test_cells_sql_loads_with_psql(postgis_conn, sample_nc, tmp_path):
    conn = postgis_conn
    norm = write_run(sample_nc, tmp_path, layout="normalised", table="viapsql",
                     geometry="text")
    f = norm["files"]
    for _ in range(2):  # first load, then a rerun's swap
        r = subprocess.run(["psql", "-X", "-q", "-h", conn.info.host, "-U", "postgres", "-d",
                            conn.info.dbname, "-f", "cells.sql"],
                           cwd=f["sql"].parent, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    assert conn.execute("SELECT count(*), count(DISTINCT cell_id), count(DISTINCT time) "
                        "FROM viapsql WHERE run = 'r1'").fetchone() == (3 * 37 * 49,
                                                                        37 * 49, 3)
    assert _dead(conn, ["viapsql_cells", "viapsql_steps", "viapsql_values"]) == 0
    assert conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = ANY("
                        "'{viapsql_cells,viapsql_steps,viapsql_values}'::regclass[])"
                        ).fetchone()[0] == 3


@pytest.mark.parametrize("jobs", [1, 2])
def test_failed_load_attaches_nothing_and_keeps_the_run(postgis_conn, sample_nc, tmp_path,
                                                        jobs):
    conn, info = postgis_conn, postgis_conn.info.dsn
    norm = write_run(sample_nc, tmp_path, layout="normalised", table="keep", geometry="text")
    f = norm["files"]
    load_normalised(f, conninfo=info, table="keep", run="r1", columns=norm["columns"])
    before = _rows(conn, "keep")
    parts = conn.execute("SELECT array_agg(inhrelid ORDER BY inhrelid) FROM pg_inherits WHERE "
                         "inhparent = ANY('{keep_cells,keep_steps,keep_values}'::regclass[])"
                         ).fetchone()[0]
    # The last shard's values name a cell that is not in the cells file: the foreign key,
    # checked before the swap, fails the load.
    bad = tmp_path / "bad.copy"
    lines = Path(norm["parts"]["values"][-1]).read_bytes().splitlines(keepends=True)
    bad.write_bytes(b"".join(lines[:-1]) + b"2\t99999\t1\t1\n")
    values = [norm["parts"]["values"][0], str(bad)]
    with pytest.raises(NcreelError, match="foreign key"):
        load_normalised({**f, "values": values if jobs > 1 else values[-1]}, conninfo=info,
                        table="keep", run="r1", columns=norm["columns"], jobs=jobs)
    assert conn.execute("SELECT array_agg(inhrelid ORDER BY inhrelid) FROM pg_inherits WHERE "
                        "inhparent = ANY('{keep_cells,keep_steps,keep_values}'::regclass[])"
                        ).fetchone()[0] == parts
    assert _rows(conn, "keep") == before
    # The next load drops what the failed one left and swaps in.
    s = load_normalised(f, conninfo=info, table="keep", run="r1", columns=norm["columns"])
    assert s["replaced"] == 3 * 37 * 49 and _rows(conn, "keep") == before
    assert conn.execute("SELECT count(*) FROM pg_class WHERE relkind = 'r' AND (relname "
                        "LIKE 'ncreel_stage_%' OR relname LIKE 'ncreel_old_%')").fetchone()[0] \
        == 0


def test_load_that_waited_for_the_table_to_be_created_uses_it(postgis_conn, sample_nc,
                                                              tmp_path):
    """Two first loads of a new table at once: the one that waited for the other's
    creation of the tables (the advisory lock) uses them, and there is one GiST index.

    The waiting load has looked the tables up before (and found none); an advisory lock
    does not read the catalog's invalidations, so ``IF to_regclass(…) IS NULL`` there saw
    no table and the load failed with ``relation "two_cells" already exists``.
    """
    import threading

    import psycopg
    from ncreel.pg.layout import create_statement
    from ncreel.pg.sql import advisory_key

    conn, info = postgis_conn, postgis_conn.info.dsn
    norm = write_run(sample_nc, tmp_path, layout="normalised", table="two")
    result = {}

    def load():
        try:
            result["summary"] = load_normalised(norm["files"], conninfo=info, table="two",
                                                run="b", columns=norm["columns"])
        except Exception as err:  # noqa: BLE001 - reported by the test
            result["error"] = f"{type(err).__name__}: {err}"

    # pg_stat_activity is read from another session: within a transaction it is a snapshot.
    with psycopg.connect(info, autocommit=True) as watch, conn.transaction():
        # This session plays the other load, holding the table's creation lock.
        conn.execute(f"SELECT pg_advisory_xact_lock({advisory_key('two').as_string(conn)})")
        waiter = threading.Thread(target=load)
        waiter.start()
        for _ in range(300):
            if result or watch.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                      "wait_event_type = 'Lock' AND wait_event = 'advisory'"
                                      ).fetchone()[0]:
                break
            waiter.join(0.05)
        else:
            pytest.fail(f"the load never waited for the creation lock: {result}")
        conn.execute(create_statement("two", norm["columns"]))
    waiter.join(60)
    assert "error" not in result, result["error"]
    assert result["summary"]["rows"] == 3 * 37 * 49
    assert conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = 'two_cells' "
                        "AND indexdef LIKE '%USING gist (geom)%'").fetchone()[0] == 1


def test_names_of_one_layout_taken_by_the_other_are_refused_before_anything_is_made(
        postgis_conn, sample_nc, tmp_path):
    """A wide table named x_values, then a normalised table x: refused with one line, by
    the load and by psql -f cells.sql alike, with nothing left made (no view over the
    wide table); a normalised table a, then a normalised table a_values: refused too."""
    conn, info = postgis_conn, postgis_conn.info.dsn
    wide = write_run(sample_nc, tmp_path, layout="wide", table="x_values", geometry="text")
    load_copy(wide["files"]["values"], conninfo=info, table="x_values", run="r1",
              columns=wide["columns"])
    norm = write_run(sample_nc, tmp_path, layout="normalised", table="x", geometry="text")
    with pytest.raises(NcreelError, match="table x_values exists with columns"):
        load_normalised(norm["files"], conninfo=info, table="x", run="r1",
                        columns=norm["columns"])
    r = subprocess.run(["psql", "-X", "-q", "-h", conn.info.host, "-U", "postgres", "-d",
                        conn.info.dbname, "-f", "cells.sql"], cwd=norm["files"]["sql"].parent,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "table x_values exists with columns (run, time_index, time, " in r.stderr
    assert "but cells.layout normalised keeps (anomaly, time_index, cell_id, value, run)" \
        in r.stderr
    assert conn.execute("SELECT count(*) FROM pg_class WHERE relname IN ('x', 'x_cells', "
                        "'x_steps')").fetchone()[0] == 0
    # A normalised table's values table is no view for another normalised table.
    load_normalised(norm["files"], conninfo=info, table="a", run="r1",
                    columns=norm["columns"])
    with pytest.raises(NcreelError, match="a_values exists and is not a view: it is a table "
                                          "of cells.layout wide .or one of the three tables"):
        load_normalised(norm["files"], conninfo=info, table="a_values", run="r1",
                        columns=norm["columns"])
    # The wide layout's cells.sql into the normalised table's view, by psql: said so (not
    # "made by an older ncreel").
    (tmp_path / "wa").mkdir()
    wide_a = write_run(sample_nc, tmp_path / "wa", layout="wide", table="a", geometry="text")
    r = subprocess.run(["psql", "-X", "-q", "-h", conn.info.host, "-U", "postgres", "-d",
                        conn.info.dbname, "-f", "cells.sql"],
                       cwd=wide_a["files"]["sql"].parent, capture_output=True, text=True)
    assert r.returncode != 0
    assert "table a is a view, as cells.layout normalised makes over a_cells" in r.stderr


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_load_killed_during_its_swap_attaches_nothing_and_a_rerun_works(
        postgis_conn, sample_nc, tmp_path, jobs):
    """kill -9 of a rerun's load while its swap waits for a reader of the view: the run's
    three partitions stay the earlier load's, and the next load replaces them and leaves
    no new or staged table behind."""
    import json
    import os
    import signal
    import sys
    import time

    import psycopg

    conn, info = postgis_conn, postgis_conn.info.dsn
    norm = write_run(sample_nc, tmp_path, layout="normalised", table="k")
    files = {k: str(v) for k, v in norm["files"].items()}
    if jobs > 1:
        files["values"] = norm["parts"]["values"]
    load_normalised(files, conninfo=info, table="k", run="r1", columns=norm["columns"],
                    jobs=jobs)
    before = _rows(conn, "k")
    parts = conn.execute("SELECT array_agg(inhrelid ORDER BY inhrelid) FROM pg_inherits WHERE "
                         "inhparent = ANY('{k_cells,k_steps,k_values}'::regclass[])"
                         ).fetchone()[0]
    code = ("import json, sys\nfrom ncreel.pg.load import load_normalised\n"
            "a = json.loads(sys.argv[1])\nload_normalised(a['files'], conninfo=a['info'], "
            "table='k', run='r1', columns=a['columns'], jobs=a['jobs'])\n")
    args = json.dumps({"files": files, "info": info, "jobs": jobs,
                       "columns": [list(c) for c in norm["columns"]]})
    with psycopg.connect(info) as reader:
        reader.execute("SELECT count(*) FROM k")  # its lock is held until the rollback
        proc = subprocess.Popen([sys.executable, "-c", code, args])
        try:
            for _ in range(600):
                if conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = "
                                "'active' AND query LIKE 'DO%%DETACH PARTITION%%'"
                                ).fetchone()[0]:
                    break
                assert proc.poll() is None, "the load ended before its swap"
                time.sleep(0.05)
            else:
                pytest.fail("the load never reached its swap")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
        reader.rollback()
    for _ in range(100):  # the killed load's backend notices and rolls back
        if not conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                            "'DO%%DETACH PARTITION%%'").fetchone()[0]:
            break
        time.sleep(0.05)
    assert conn.execute("SELECT array_agg(inhrelid ORDER BY inhrelid) FROM pg_inherits WHERE "
                        "inhparent = ANY('{k_cells,k_steps,k_values}'::regclass[])"
                        ).fetchone()[0] == parts
    assert _rows(conn, "k") == before
    s = load_normalised(files, conninfo=info, table="k", run="r1", columns=norm["columns"],
                        jobs=jobs)
    assert s["replaced"] == 3 * 37 * 49 and _rows(conn, "k") == before
    assert conn.execute("SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relname LIKE "
                        "'ncreel%'").fetchone()[0] == 0


def test_a_column_type_clash_stops_the_normalised_load_before_it_stages(postgis_conn,
                                                                         sample_nc, tmp_path):
    # The sample is float32 (value real); a packed or 64-bit run writes double precision.
    conn, info = postgis_conn, postgis_conn.info.dsn
    norm = write_run(sample_nc, tmp_path, layout="normalised", table="clash")
    f = norm["files"]
    load_normalised(f, conninfo=info, table="clash", run="r1", columns=norm["columns"])
    wider = [(n, "double precision" if n == "value" else t) for n, t in norm["columns"]]
    with pytest.raises(NcreelError) as err:
        load_normalised({**f, "values": norm["parts"]["values"]}, conninfo=info,
                        table="clash", run="r2", columns=wider, jobs=2)
    assert "table clash_values has column value of type real, but this run writes double " \
        "precision" in str(err.value) and "\n" not in str(err.value)
    from ncreel.pg.sql import run_tables

    left = [run_tables(f"clash_{k}", "r2")[n][-1] for k in ("cells", "steps", "values")
            for n in ("stage", "staged")]
    assert not [n for n in left if conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                                                (f'"{n}"',)).fetchone()[0]]
