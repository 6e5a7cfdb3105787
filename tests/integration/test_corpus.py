"""The whole workflow on differently shaped real and realistic files, checked against xarray.

Real: iris-sample-data's HadCM3 E1 run (split into files), OSTIA and the NEMO ORCA2 tripolar grid (a
time axis added), the stereographic satellite image, and eofs' SST anomalies. Realistic
(generated in :mod:`layouts`): dimension orders, ±180 and 0–360 longitudes, WRF output,
files whose names do not sort in time, packed int16, string times, groups and
non-standard calendars. Each runs with tiny frames and few steps; every table is loaded
into PostgreSQL with its cells.sql and compared, row by row, with xarray.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from layouts import (
    write_ambiguous_lat,
    write_curvilinear,
    write_group,
    write_rectilinear,
    write_string_times,
    write_wrf,
)
from ncreel.input.source import open_series
from ncreel.sample import sample_path
from workflow_run import make_workdir, probe, psql_load, snakemake

pytestmark = pytest.mark.integration

SMALL = {"width": 96, "height": 64, "dpi": 20, "preset": "ultrafast", "calibration_frames": 4,
         "frames_per_shard": 8}
CFTIME = xr.coders.CFDatetimeCoder(use_cftime=True)


def _subset(src: Path, dest: Path, variable: str, n: int, *, add_time: bool = False,
            **isel) -> Path:
    with xr.open_dataset(src, decode_times=False) as ds:
        ds = ds[[variable]].isel(isel).load()
    if add_time:  # a real grid without a time axis: three steps of the real field
        ds = xr.concat([ds.assign({variable: ds[variable] + k}) for k in range(n)], "time")
        ds = ds.drop_vars([c for c in ("time", "time_counter") if c in ds.variables])
        ds["time"] = ("time", np.arange(n) * 6.0, {"units": "hours since 2000-01-01",
                                                   "standard_name": "time"})
        ds[variable] = ds[variable].transpose("time", ...)
    else:
        tdim = ds[variable].dims[0]
        ds = ds.isel({tdim: slice(0, n)})
    ds.to_netcdf(dest)
    return dest


def _case(name: str, tmp: Path, eofs_data: Path) -> dict:
    """Input, config and the xarray view (variable, time labels, lat/lon names) of one case."""
    iris = sample_path("A1B_north_america.nc").parent
    if name == "e1_multifile_names_out_of_order":
        for k, (a, b) in zip((1, 2, 10), ((0, 2), (2, 4), (4, 6)), strict=True):
            with xr.open_dataset(iris / "E1_north_america.nc", decode_times=False) as ds:
                ds[["air_temperature"]].isel(time=slice(a, b)).load().to_netcdf(
                    tmp / f"part_{k}.nc")
        return {"input": str(tmp / "part_*.nc"), "variable": "air_temperature",
                "files": [tmp / f"part_{k}.nc" for k in (1, 2, 10)]}
    if name == "ostia_real":
        p = _subset(iris / "ostia_monthly.nc", tmp / "o.nc", "surface_temperature", 3)
        return {"input": str(p), "variable": "surface_temperature"}
    if name == "sst_north_first_missing":
        p = _subset(eofs_data / "sst_ndjfm_anom.nc", tmp / "sst.nc", "sst", 3)
        return {"input": str(p), "variable": "sst"}
    if name == "orca2_tripolar_dateline":
        p = _subset(iris / "orca2_votemper.nc", tmp / "orca.nc", "votemper", 3, add_time=True)
        return {"input": str(p), "variable": "votemper", "lat": "nav_lat", "lon": "nav_lon"}
    if name == "stereographic_2d_latlon":
        p = _subset(iris / "toa_brightness_stereographic.nc", tmp / "st.nc", "data", 2,
                    add_time=True)
        return {"input": str(p), "variable": "data", "lat": "lat", "lon": "lon"}
    if name == "lon_lat_order_360day":
        p, _ = write_rectilinear(tmp / "t.nc", order=("time", "lon", "lat"),
                                 calendar="360_day", units="days since 2000-02-28", n_time=4)
        return {"input": str(p), "variable": "tas"}
    if name == "wrapped_pm180_noleap_packed":
        lon = np.r_[np.arange(0.0, 180.0, 45.0), np.arange(-180.0, 0.0, 45.0)]
        p, _ = write_rectilinear(tmp / "w.nc", lon=lon, calendar="noleap", packed=True,
                                 units="days since 1999-02-27")
        return {"input": str(p), "variable": "tas"}
    if name == "curvilinear_dateline":
        p, _ = write_curvilinear(tmp / "c.nc", n_time=3)
        return {"input": str(p), "variable": "tas", "lat": "lat", "lon": "lon"}
    if name == "wrf":
        p, truth = write_wrf(tmp / "wrfout_d01_2007-10-01_00:00:00")
        return {"input": str(p), "variable": "T2", "time": "XTIME", "lat": "XLAT",
                "lon": "XLONG", "labels": truth["labels"]}
    if name == "iso_string_time_in_group":
        p = write_string_times(tmp / "s.nc", ["2007-10-01T00:00:00Z", "2007-10-01T06:00:00Z"])
        return {"input": str(write_group(tmp / "g.nc", p)), "variable": "forecast/v",
                "group": "forecast", "labels": ["2007-10-01T00:00:00", "2007-10-01T06:00:00"]}
    raise KeyError(name)


def _expected(case: dict) -> tuple[dict, list, int, int]:
    """{(time index, lat, lon): {values}}, ISO time labels, steps and finite cells (xarray)."""
    files = case.get("files") or [case["input"]]
    parts = [xr.open_dataset(f, group=case.get("group"), decode_times=CFTIME) for f in files]
    var = case["variable"].rsplit("/", 1)[-1]
    das = [ds[var] for ds in parts]
    da = xr.concat(das, das[0].dims[0]) if len(das) > 1 else das[0]
    tdim = da.dims[0] if "time" not in da.dims else "time"
    da = da.transpose(tdim, ...)
    ds = parts[0]
    lat = ds[case.get("lat") or next(c for c in ("lat", "latitude") if c in ds.variables)]
    lon = ds[case.get("lon") or next(c for c in ("lon", "longitude") if c in ds.variables)]
    lat = lat.isel({d: 0 for d in lat.dims if d == tdim})
    lon = lon.isel({d: 0 for d in lon.dims if d == tdim})
    lat, lon = xr.broadcast(lat, lon)
    spatial = [d for d in da.dims if d != tdim]
    lat2 = lat.transpose(*spatial).values.astype(np.float64).reshape(-1)
    lon2 = lon.transpose(*spatial).values.astype(np.float64).reshape(-1)
    values = da.values.reshape(da.shape[0], -1).astype(np.float64)
    table: dict = {}
    for t in range(values.shape[0]):
        for k in np.flatnonzero(np.isfinite(values[t])):
            table.setdefault((t, lat2[k], lon2[k]), set()).add(values[t, k])
    if "labels" in case:
        labels = case["labels"]
    else:
        tname = case.get("time") or tdim
        labels = [v.isoformat() for v in xr.concat([p[tname] for p in parts], tdim).values]
    for p in parts:
        p.close()
    return table, labels, values.shape[0], int(np.isfinite(values).sum())


def _check_run(work: Path, run: str, case: dict, pg_server, pg_conn) -> None:
    table, labels, n_time, n_rows = _expected(case)
    results = work / "results" / run
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == n_time
    assert (results / "frames").is_dir() and any((results / "frames").glob("*/*.png"))
    psql_load(pg_server, results)
    rows = pg_conn.execute(f"SELECT time_index, lat, lon_raw, value, to_json(time)#>>'{{}}', "
                           f"lon FROM ncreel_{run}").fetchall()
    assert len(rows) == n_rows
    for t, la, lo, value, when, lon in rows:
        # lon_raw is the file's longitude; lon the same meridian in -180…180.
        turn = (lon - lo) % 360
        assert -180 <= lon < 180 and min(turn, 360 - turn) < 1e-9, (run, lon, lo)
        want = table.get((t, la, lo))
        assert want is not None, (run, t, la, lo)
        assert any(np.isclose(value, w, rtol=1e-6, atol=0) for w in want), (run, t, la, lo)
        assert when.replace(" ", "T") == labels[t], (run, t, when, labels[t])


# A1B, the tidy case, is the demo run of integration/test_workflow.py.
CASES = ["e1_multifile_names_out_of_order", "ostia_real",
         "sst_north_first_missing", "orca2_tripolar_dateline", "stereographic_2d_latlon",
         "lon_lat_order_360day", "wrapped_pm180_noleap_packed", "curvilinear_dateline", "wrf",
         "iso_string_time_in_group"]


@pytest.mark.parametrize("name", CASES)
def test_corpus(name, tmp_path, eofs_data, pg_server, pg_conn):
    case = _case(name, tmp_path, eofs_data)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    cfg = {**SMALL, "run": name, "input": case["input"], "variable": case["variable"]}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    _check_run(work, name, case, pg_server, pg_conn)


def test_orca2_grid_is_unwrapped_across_the_dateline(tmp_path):
    """The real tripolar grid crosses 180 degrees; its drawing coordinates do not jump."""
    orca = _subset(sample_path("orca2_votemper.nc"), tmp_path / "o.nc", "votemper", 2,
                   add_time=True)
    with xr.open_dataset(orca, decode_times=False) as ds:
        assert np.abs(np.diff(ds["nav_lon"].values, axis=1)).max() > 300
    with open_series(str(orca), "votemper") as s:
        _, lon = s.cell_coordinates(continuous=True)
    assert np.abs(np.diff(lon, axis=1)).max() <= 180
    # Row to row too, below the north fold (its last rows run back along the seam).
    assert np.abs(np.diff(lon[:-3], axis=0)).max() < 90


@pytest.mark.parametrize("layout, config, expected", [
    ("ambiguous", [], "variable 'tas': ambiguous latitude coordinate, candidates lat, lat2; "
                      "set lat=NAME"),
    ("ambiguous", ["lat=lat9"], "config key 'lat': input '{path}' has no variable 'lat9'"),
    ("group", ["variable=tas"], "no variable 'tas' (variables: none; groups: forecast;"),
    ("moving_wrf", ["variable=T2"], "coordinate 'XLAT' changes along 'Time'"),
])
def test_layout_errors_are_one_line_before_any_job(layout, config, expected, tmp_path):
    path = tmp_path / "in.nc"
    {"ambiguous": write_ambiguous_lat, "group": write_group,
     "moving_wrf": lambda p: write_wrf(p, moving=True)}[layout](path)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    proc = snakemake(work, "-n", "--config", f"input={path}", "variable=tas", *config,
                     check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    assert expected.format(path=path) in lines[0]
    assert not (work / "results").exists()
    if layout == "ambiguous" and not config:  # the override decides, and the run plans
        snakemake(work, "-n", "--config", f"input={path}", "variable=tas", "lat=lat2",
                  "lon=lon", "time=time")
