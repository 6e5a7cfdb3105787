"""Whole runs on data where scientists keep it: an intake-esm catalog query, a Zarr store,
ICON output with CDO's absolute time axis; and their one-line errors before any job.

Rows and times are checked against xarray's reading of the same data (loaded into a real
PostgreSQL), frames by count.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from catalogs import make_catalog, sample
from conftest import needs_programs
from workflow_run import SMALL, make_workdir, probe, psql_load, snakemake

pytestmark = pytest.mark.integration


def _run(tmp_path, input, variable, run, *extra):
    (tmp_path / "work").mkdir(exist_ok=True)
    work = make_workdir(tmp_path / "work")
    cfg = {"run": run, "input": input, "variable": variable}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json", "--config", *SMALL, *extra)
    return work, work / "results" / run


def _table(pg_server, pg_conn, results, run):
    psql_load(pg_server, results)
    rows = pg_conn.execute(f"SELECT time_index, cell_id, replace(time::text, ' ', 'T'), value "
                           f"FROM ncreel_{run} ORDER BY 1, 2").fetchall()
    t, cell, time, value = (np.array(c) for c in zip(*rows, strict=True))
    return t, cell, time, value.astype(np.float32)


def _iso(path, name="time"):
    coder = xr.coders.CFDatetimeCoder(use_cftime=True)
    with xr.open_dataset(path, decode_times=coder) as ds:
        return np.array([d.isoformat() for d in ds[name].values])


def test_catalog_query_run(tmp_path, pg_server, pg_conn):
    """A1B from the catalog: three files the CSV lists out of time order, joined along time
    as the catalog's join_existing says; rows and times are the original file's."""
    cat = make_catalog(tmp_path / "catalog")
    work, results = _run(tmp_path, {"catalog": str(cat), "query": {
        "source_id": "HadCM3", "experiment_id": "A1B", "member_id": "r1i1p1"}},
        "air_temperature", "cat", "frames_per_shard=120")
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 240
    t, cell, time, value = _table(pg_server, pg_conn, results, "cat")
    with xr.open_dataset(sample("A1B_north_america.nc"), decode_times=False) as ds:
        want = ds["air_temperature"].values.reshape(240, -1)
    assert len(t) == want.size
    np.testing.assert_array_equal(value, want[t, cell].astype(np.float32))
    np.testing.assert_array_equal(time, _iso(sample("A1B_north_america.nc"))[t])
    stats = json.loads((results / "stats.json").read_text())
    assert [p["path"].rsplit("_", 1)[1] for p in stats["inputs"]] == [
        "1860-1939.nc", "1940-2019.nc", "2020-2099.nc"]


def test_zarr_store_run(tmp_path, pg_server, pg_conn, sample_nc):
    """A Zarr store (format 2, consolidated, 16-step chunks) read through the workflow:
    rows and times are xarray's reading of the store."""
    store = tmp_path / "a1b.zarr"
    with xr.open_dataset(sample_nc, decode_times=False) as ds, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.load().chunk({"time": 16}).to_zarr(store, zarr_format=2, consolidated=True)
    work, results = _run(tmp_path, str(store), "air_temperature", "zarr",
                         "frames_per_shard=100")
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 240
    t, cell, time, value = _table(pg_server, pg_conn, results, "zarr")
    coder = xr.coders.CFDatetimeCoder(use_cftime=True)
    with xr.open_zarr(store, decode_times=coder) as ds:
        want = ds["air_temperature"].values.reshape(240, -1)
        times = np.array([d.isoformat() for d in ds["time"].values])
    np.testing.assert_array_equal(value, want[t, cell].astype(np.float32))
    np.testing.assert_array_equal(time, times[t])


@needs_programs("cdo")
def test_icon_output_with_an_absolute_time_axis_run(tmp_path, pg_server, pg_conn):
    """ICON output on its triangles, time rewritten by ``cdo -a`` (``day as %Y%m%d.%f``,
    6-hourly): the table's time column holds the dates and hours xarray decodes from the
    original axis, not NULL."""
    from meshes import icon_triangles, write_icon

    lon, lat, lon_b, lat_b = icon_triangles(150)
    write_icon(tmp_path / "rel.nc", lon, lat, lon_b, lat_b, nt=8)
    subprocess.run(["cdo", "-s", "-a", "copy", str(tmp_path / "rel.nc"),
                    str(tmp_path / "icon.nc")], check=True, capture_output=True)
    work, results = _run(tmp_path, str(tmp_path / "icon.nc"), "tas", "icon")
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 8
    t, cell, time, value = _table(pg_server, pg_conn, results, "icon")
    with xr.open_dataset(tmp_path / "icon.nc", decode_times=False) as ds:
        assert ds["time"].attrs["units"] == "day as %Y%m%d.%f"
        want = ds["tas"].values
    np.testing.assert_array_equal(value, want[t, cell].astype(np.float32))
    np.testing.assert_array_equal(time, _iso(tmp_path / "rel.nc")[t])
    assert time[t == 1][0] == "1979-01-01T06:00:00"
    sql = (results / "cells.sql").read_text()
    assert '"time" timestamp without time zone' in sql and "column time is NULL" not in sql


def _dry_run_error(tmp_path, input, variable="air_temperature"):
    work = make_workdir(Path(tempfile.mkdtemp(dir=tmp_path)))
    (work / "run.json").write_text(json.dumps({"run": "bad", "input": input,
                                               "variable": variable}))
    proc = snakemake(work, "-n", "--configfile", "run.json", check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not (work / "results").exists() and not (work / "logs" / "bad").exists()
    return lines[0]


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    return make_catalog(tmp_path_factory.mktemp("catalog"))


@pytest.mark.parametrize("query, expected", [
    ({"experiment_id": "A1B", "member_id": "r9i1p1"},
     "no asset has member_id r9i1p1 (it has r1, r1i1p1, r2i1p1)"),
    ({"experiment_id": "E1"}, "the query matches 2 datasets, ncreel shows one: column "
                              "member_id has r1i1p1, r2i1p1; add member_id: VALUE"),
    ({"model": "HadCM3"}, "config key 'input.query': catalog"),
])
def test_catalog_queries_matching_none_or_many_stop_before_any_job(tmp_path, catalog, query,
                                                                   expected):
    line = _dry_run_error(tmp_path, {"catalog": str(catalog), "query": query})
    assert expected in line


def test_bad_catalogs_and_stores_stop_before_any_job(tmp_path, sample_nc):
    (tmp_path / "broken.json").write_text('{"esmcat_version": "0.1.0", "assets": ')
    assert "broken.json': not an ESM collection catalog that intake-esm can read" in \
        _dry_run_error(tmp_path, {"catalog": str(tmp_path / "broken.json"), "query": {}})
    assert "config key 'input.catalog' is required" in _dry_run_error(
        tmp_path, {"query": {"a": "b"}})
    (tmp_path / "demo.zarr").mkdir()
    assert "demo.zarr': a directory named like a Zarr store, but not one" in \
        _dry_run_error(tmp_path, str(tmp_path / "demo.zarr"))
    store = tmp_path / "cut.zarr"
    with xr.open_dataset(sample_nc, decode_times=False) as ds, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds[["air_temperature"]].isel(time=slice(0, 4)).load().to_zarr(store)
    meta = store / "zarr.json"  # the root's: with its consolidated metadata
    meta.write_text(meta.read_text()[:30])
    assert f"input '{store}': not a readable Zarr store (format 3)" in \
        _dry_run_error(tmp_path, str(store))
