"""A whole run on an MPAS-like mesh file (uxarray-built), and its one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely
import xarray as xr
from meshes import voronoi_mesh, write_mpas
from workflow_run import SMALL, make_workdir, probe, psql_load, snakemake

pytestmark = pytest.mark.integration
pytest.importorskip("uxarray")


def test_mpas_mesh_run_rows_and_movie(tmp_path, pg_server, pg_conn):
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi_mesh(300), nt=4, levels=3)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    cfg = {"run": "mpas", "input": str(path), "variable": "temperature",
           "select": {"nVertLevels": 1}, "cells": {"geometry": "text"}}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json", "--config", *SMALL)
    results = work / "results" / "mpas"
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 4
    psql_load(pg_server, results)
    rows = pg_conn.execute("SELECT time_index, cell_id, lat, lon, value, geom "
                           "FROM ncreel_mpas ORDER BY 1, 2").fetchall()
    with xr.open_dataset(path) as ds:
        want = ds["temperature"].values[:, :, 1]
        lat = np.degrees(ds["latCell"].values)
        lon = (np.degrees(ds["lonCell"].values) + 180) % 360 - 180
    assert len(rows) == 4 * 300
    t, cell, la, lo, value, geom = map(np.array, zip(*rows, strict=True))
    shapes = [shapely.from_wkt(g.split(";", 1)[1]) for g in geom]
    inside = np.array([s.buffer(1e-9).contains(shapely.Point(x, y))
                       for s, x, y in zip(shapes, lo, la, strict=True)])
    kind = {s.geom_type for s in shapes}
    np.testing.assert_array_equal(value.astype(np.float32), want[t, cell])
    np.testing.assert_allclose(la, lat[cell], atol=1e-9)
    np.testing.assert_allclose(lo, lon[cell], atol=1e-9)
    # Each face's polygon holds its centre (away from the poles, where the plate carree
    # polygon of a cap is not the spherical one), and faces across 180 are split.
    assert inside[np.abs(la) < 80].all()
    assert kind == {"MultiPolygon"} and any(len(s.geoms) > 1 for s in shapes)


@pytest.mark.parametrize("config, expected", [
    ([], "variable 'temperature' on the MPAS mesh has extra dims nVertLevels (sizes "
         "nVertLevels=3); pick one index of each with config key select, e.g. --config "
         "'select={nVertLevels: 0}'"),
    (["variable=vertex_value"], "variable 'vertex_value' is on the MPAS mesh's nodes"),
])
def test_mesh_errors_are_one_line_before_any_job(config, expected, tmp_path):
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi_mesh(100), nt=2, levels=3)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    proc = snakemake(work, "-n", "--config", f"input={path}", "variable=temperature",
                     *config, check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    assert expected in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (work / "results").exists()
