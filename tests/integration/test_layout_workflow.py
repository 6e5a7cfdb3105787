"""cells.layout: normalised through the whole workflow: shards, reduce, load rule, cells.sql."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from layouts import write_rectilinear
from workflow_run import SMALL, make_workdir, snakemake

pytestmark = pytest.mark.integration


def test_normalised_layout_runs_loads_and_reloads_with_psql(postgis_conn, tmp_path):
    """8 steps in 3 shards on a grid crossing the antimeridian, loaded with 2 connections."""
    conn = postgis_conn
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    write_rectilinear(work / "t.nc", n_time=8, lat=np.linspace(-30, 40, 8),
                      lon=np.linspace(170, 260, 10))
    url = f"postgresql:///{conn.info.dbname}?host={conn.info.host}&user=postgres"
    snakemake(work, "--config", "input=t.nc", "variable=tas", "run=lay", "frames_per_shard=3",
              *SMALL, "cells={layout: normalised, geometry: postgis}",
              f"database={{url: '{url}', jobs: 2}}")
    results = work / "results/lay"
    summary = json.loads((results / "load.json").read_text())
    assert (summary["layout"], summary["rows"], summary["cells"], summary["steps"],
            summary["jobs"]) == ("normalised", 640, 80, 8, 2)
    # Three shards each saw every cell; the run's cells file has each once.
    assert len(list((results / "cells").glob("*_cells.copy"))) == 3
    assert (results / "cells_cells.copy").read_bytes().count(b"\n") == 80
    got = conn.execute("SELECT count(*), count(DISTINCT cell_id), min(lon), max(lon), "
                       "bool_and(ST_IsValid(geom)) FROM ncreel_lay").fetchone()
    assert got == (640, 80, -180.0, 170.0, True)
    area = conn.execute("SELECT min(cell_area), max(cell_area) FROM ncreel_lay_cells"
                        ).fetchone()
    # 10 x 10 degree cells: 1.23e12 m² at the equator, less towards the poles.
    assert 8e11 < area[0] < area[1] < 1.24e12
    # cells.sql replaces the run's three partitions with psql alone.
    r = subprocess.run(["psql", "-X", "-q", "-h", conn.info.host, "-U", "postgres", "-d",
                        conn.info.dbname, "-f", "cells.sql"], cwd=results,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert conn.execute("SELECT count(*) FROM ncreel_lay").fetchone()[0] == 640
    assert conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = ANY("
                        "'{ncreel_lay_cells,ncreel_lay_steps,ncreel_lay_values}'::regclass[])"
                        ).fetchone()[0] == 3


def test_normalised_layout_keeps_a_regions_columns_once_per_cell(postgis_conn, tmp_path):
    """A polygon region's covered_fraction and edge_distance_m describe a cell: they are
    columns of <table>_cells (once per cell), and the view shows them on every row."""
    import shapely

    conn = postgis_conn
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    write_rectilinear(work / "t.nc", n_time=3, lat=np.linspace(-30, 40, 8),
                      lon=np.linspace(170, 260, 10))
    ring = [[-150.0, -10.0], [-120.0, -10.0], [-120.0, 25.0], [-150.0, -10.0]]
    (work / "f.geojson").write_text(json.dumps({"type": "Feature", "properties": {},
                                                "geometry": {"type": "Polygon",
                                                             "coordinates": [ring]}}))
    url = f"postgresql:///{conn.info.dbname}?host={conn.info.host}&user=postgres"
    snakemake(work, "--config", "input=t.nc", "variable=tas", "run=reg", *SMALL,
              "region={file: f.geojson}", "cells={layout: normalised, geometry: postgis}",
              f"database={{url: '{url}'}}")
    columns = {t: {r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (t,))}
        for t in ("ncreel_reg_cells", "ncreel_reg_values", "ncreel_reg")}
    region = {"covered_fraction", "edge_distance_m"}
    assert region <= columns["ncreel_reg_cells"] and region <= columns["ncreel_reg"]
    assert not region & columns["ncreel_reg_values"]
    n_cells, n_rows, inside = conn.execute(
        "SELECT (SELECT count(*) FROM ncreel_reg_cells), count(*), "
        "count(*) FILTER (WHERE covered_fraction = 1) FROM ncreel_reg").fetchone()
    # The cells are exactly those the triangle intersects (as ST_Intersects decides).
    tri = shapely.Polygon(ring).wkt
    want = conn.execute("SELECT count(*) FROM ncreel_reg_cells WHERE ST_Intersects(geom, "
                        "ST_GeomFromText(%s, 4326))", (tri,)).fetchone()[0]
    assert n_cells == want > 0 and n_rows == 3 * n_cells and inside % 3 == 0
