"""Whole-workflow checks of fields and time axes that used to fail: a narrow-range float32
field runs through and its colour limits are numpy's percentiles; a file without a time
axis and overlapping files with different data stop before any job with one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from ncreel.sample import sample_path
from workflow_run import make_workdir, probe, snakemake

pytestmark = pytest.mark.integration

SMALL = {"width": 96, "height": 64, "dpi": 20, "preset": "ultrafast", "calibration_frames": 4,
         "frames_per_shard": 8}


def _field(path: Path, days, values) -> str:
    xr.Dataset({"tas": (("time", "lat", "lon"), values, {"units": "K"})},
               coords={"time": ("time", np.asarray(days, np.float64),
                                {"units": "days since 2000-01-01", "standard_name": "time"}),
                       "lat": ("lat", np.linspace(30.0, 60.0, values.shape[1]),
                               {"units": "degrees_north"}),
                       "lon": ("lon", np.linspace(-10.0, 30.0, values.shape[2]),
                               {"units": "degrees_east"})}).to_netcdf(path)
    return str(path)


def _errors(proc) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]


def test_narrow_range_float32_runs_with_numpys_percentiles(tmp_path):
    # 1.3 K around 290 K in float32: ~43 000 float32 steps from min to max, fewer than the
    # statistics' 65 536 histogram bins.
    rng = np.random.default_rng(7)
    values = (290.0 + rng.uniform(0.0, 1.3, (6, 5, 7))).astype(np.float32)
    work = make_workdir(tmp_path)
    path = _field(tmp_path / "narrow.nc", range(6), values)
    cfg = {**SMALL, "run": "narrow", "input": path, "variable": "tas"}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    results = work / "results" / "narrow"
    stats = json.loads((results / "stats.json").read_text())
    p2, p98 = np.percentile(values.astype(np.float64), [2, 98])
    assert stats["vmin"] == pytest.approx(p2, rel=1e-12)
    assert stats["vmax"] == pytest.approx(p98, rel=1e-12)
    np.testing.assert_allclose(np.load(results / "cell_mean.npy"),
                               values.astype(np.float64).mean(axis=0), rtol=1e-12)
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 6
    logs = list((work / "logs" / "narrow").glob("**/*.log"))
    assert logs and not any("Traceback" in p.read_text() for p in logs)


def test_no_time_axis_is_one_line_before_any_job(tmp_path):
    work = make_workdir(tmp_path)
    path = sample_path("hybrid_height.nc")  # model_level_number, grid_latitude, ...
    proc = snakemake(work, "-n", "--config", f"input={path}",
                     "variable=air_potential_temperature", check=False)
    lines = _errors(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    assert "'air_potential_temperature' has no time axis" in lines[0]
    assert "set time_dim=NAME (e.g. time_dim=model_level_number)" in lines[0]
    assert "Traceback" not in proc.stderr and not (work / "results").exists()


def test_overlapping_files_decided_before_any_job(tmp_path):
    work = make_workdir(tmp_path)
    values = np.arange(10 * 3 * 4, dtype=np.float32).reshape(10, 3, 4)
    a = _field(tmp_path / "a.nc", range(0, 6), values[0:6])
    b = _field(tmp_path / "b.nc", range(4, 10), values[4:10])
    proc = snakemake(work, "-n", "--config", f"input={tmp_path}/[ab].nc", "variable=tas")
    assert (f"ncreel: note: '{b}' repeats 2 times 2000-01-05T00:00:00 .. 2000-01-06T00:00:00 "
            f"of '{a}' with equal values of 'tas': kept once") in proc.stderr
    changed = values[4:10].copy()
    changed[1] += 1.0
    c = _field(tmp_path / "c.nc", range(4, 10), changed)
    proc = snakemake(work, "-n", "--config", f"input=[{a}, {c}]", "variable=tas",
                     check=False)
    lines = _errors(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    assert (f"input files '{a}' and '{c}' both hold 'tas' at 1 time 2000-01-06T00:00:00 "
            "with different values") in lines[0]


def test_a_data_error_in_statistics_is_one_line_not_a_traceback(tmp_path):
    # A NetCDF-4 file whose header is sound and whose compressed data are not: only
    # reading the data (the statistics job) finds it.
    rng = np.random.default_rng(0)
    path = tmp_path / "corrupt.nc"
    xr.Dataset({"tas": (("time", "lat", "lon"), rng.normal(280, 5, (6, 20, 30)).astype(
        np.float32), {"units": "K"})},
        coords={"time": ("time", np.arange(6.0), {"units": "days since 2000-01-01"}),
                "lat": ("lat", np.linspace(30, 60, 20), {"units": "degrees_north"}),
                "lon": ("lon", np.linspace(-10, 30, 30), {"units": "degrees_east"})}
    ).to_netcdf(path, encoding={"tas": {"zlib": True, "chunksizes": (1, 20, 30)}})
    raw = bytearray(path.read_bytes())
    middle = len(raw) // 2
    raw[middle:middle + 2000] = b"\xab" * 2000
    path.write_bytes(bytes(raw))
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    proc = snakemake(work, "--config", f"input={path}", "variable=tas", "run=bad",
                     *(f"{k}={v}" for k, v in SMALL.items()), check=False)
    assert proc.returncode != 0
    # One line naming the file, the variable and the one step that cannot be read.
    assert re.search(re.escape(f"ncreel: error: input '{path}': variable 'tas': cannot read "
                               "time step ") + r"\d+ \(", proc.stderr), proc.stderr[-3000:]
    log = (work / "logs" / "bad" / "statistics.log").read_text()
    assert re.search(r"cannot read time step \d+ ", log) and "Traceback" not in log
