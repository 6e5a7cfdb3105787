"""The whole workflow on a CORDEX-like rotated-pole file: rows and polygons are geographic."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr
from grid_files import unrotate, write_rotated_pole
from workflow_run import make_workdir, probe, psql_load, snakemake

pytestmark = pytest.mark.integration


def test_rotated_pole_workflow_rows_are_geographic(tmp_path, pg_server, pg_conn):
    path, truth = write_rotated_pole(tmp_path / "tas_EUR-11.nc", n_time=3, north_first=True)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    cfg = {"width": 96, "height": 64, "dpi": 20, "preset": "ultrafast",
           "calibration_frames": 2, "frames_per_shard": 8, "run": "eur11",
           "input": str(path), "variable": "tas", "cells": {"geometry": "text"}}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    results = work / "results" / "eur11"
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 3
    psql_load(pg_server, results)
    rows = pg_conn.execute("SELECT time_index, cell_id, lat, lon, value, geom "
                           "FROM ncreel_eur11 ORDER BY time_index, cell_id").fetchall()
    # Expected from xarray and the rotated-pole formula, independently of ncreel.
    with xr.open_dataset(path, decode_times=False) as ds:
        da = ds["tas"].sortby("rlat")
        values = da.values
        rlat, rlon = da["rlat"].values, ds["rlon"].values
    lon, lat = unrotate(*np.meshgrid(rlon, rlat))
    half = (rlat[1] - rlat[0]) / 2
    ny, nx = lat.shape
    assert len(rows) == values.size
    for t, cell, la, lo, value, geom in rows:
        iy, ix = divmod(cell, nx)
        assert value == values[t, iy, ix]
        assert np.isclose(la, lat[iy, ix], atol=1e-9) and np.isclose(lo, lon[iy, ix], atol=1e-9)
        assert geom.startswith("SRID=4326;MULTIPOLYGON(((")  # one part: EUR-11 is far from 180
        ring = [tuple(map(float, p.split())) for p in geom[geom.index("(((") + 3:-3].split(",")]
        clon, clat = unrotate(np.array([rlon[ix] - half, rlon[ix] + half, rlon[ix] + half,
                                        rlon[ix] - half]),
                              np.array([rlat[iy] - half, rlat[iy] - half, rlat[iy] + half,
                                        rlat[iy] + half]))
        np.testing.assert_allclose(np.array(ring[:4]), np.column_stack([clon, clat]),
                                   atol=1e-9)
    # Europe: the table's positions are no longer the rotated ones (about 0 N 0 E).
    assert min(r[2] for r in rows) > 20 and max(r[2] for r in rows) < 80


def test_unreadable_grid_mapping_stops_before_any_job(tmp_path):
    path, _ = write_rotated_pole(tmp_path / "bad.nc", mapping={
        "grid_mapping_name": "rotated_latitude_longitude"})
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    proc = snakemake(work, "-n", "--config", f"input={path}", "variable=tas", check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    assert (f"input '{path}': variable 'tas': grid_mapping 'rotated_pole' "
            "(grid_mapping_name='rotated_latitude_longitude') cannot be read by pyproj "
            "(attribute 'grid_north_pole_latitude' missing)") in lines[0]
    assert "Traceback" not in proc.stderr and not (work / "results").exists()
