"""Whole runs that make only what is asked: one output, some steps, one level, the table's
own extent; a run that cannot fit on its disk, and one whose disk fills while it runs.

Real sample files (iris-sample-data's HadCM3 air temperature, eofs' geopotential height on
pressure levels), real ffmpeg, the workflow as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import fill_disk, plev_file
from workflow_run import make_workdir, probe, snakemake

pytestmark = pytest.mark.integration

SMALL = {"width": 160, "height": 96, "dpi": 40, "preset": "ultrafast",
         "calibration_frames": 2}


def _work(tmp_path: Path, sample_nc: Path, cfg: dict) -> Path:
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    (work / "in.nc").symlink_to(sample_nc)
    (work / "run.json").write_text(json.dumps({"input": "in.nc",
                                               "variable": "air_temperature",
                                               **SMALL, **cfg}))
    return work


def _status(work: Path, run: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "ncreel", "status", run, "--workdir",
                           str(work)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _rows(path: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in path.read_text().splitlines()]


def test_a_movie_of_a_decade_computes_no_row(tmp_path, sample_nc):
    """outputs: [movie] with time_range: ten frames of 1990-1999 from the 240-year series,
    no statistics of cells, no rows, no reduce or load (a cell model that cannot even be
    imported does not matter)."""
    work = _work(tmp_path, sample_nc, {
        "run": "decade", "outputs": ["movie"], "time_range": [1990, 1999],
        "frames_per_shard": 4, "cells": {"model": "no_such_module:model"},
        "database": {"url": "postgresql://nobody@localhost/none"}})
    dry = snakemake(work, "-n", "--configfile", "run.json")
    assert "reduce_cells" not in dry.stdout and "load_database" not in dry.stdout
    snakemake(work, "--configfile", "run.json")
    out = work / "results" / "decade"
    assert int(probe(out / "movie.mp4")["nb_read_frames"]) == 10
    assert not (out / "cells").exists() and not (out / "cell_mean.npy").exists()
    assert not list(out.glob("cells*")) and not (out / "load.json").exists()
    assert not list((work / "logs" / "decade").glob("reduce_cells*"))
    stats = json.loads((out / "stats.json").read_text())
    assert stats["outputs"] == ["movie"] and stats["n_time"] == 10
    summary = (out / "report" / "summary.html").read_text()
    assert "<th>COPY file</th><td>none</td>" in summary
    labels = json.loads(summary.split("id='ncreel-summary'>")[1].split("</script>")[0]
                        .replace("&quot;", '"'))
    assert labels["outputs"] == ["movie"] and labels["frames"] == 10
    status = _status(work, "decade")
    assert status.splitlines()[-1] == "run decade: complete"
    # The run file as it ran: no note. Edited since: the states are the last run's.
    def status_of(run_file):
        return subprocess.run([sys.executable, "-m", "ncreel", "status", "--configfile",
                               run_file, "--workdir", str(work)], capture_output=True,
                              text=True, timeout=120, cwd=work)

    same = status_of("run.json")
    assert same.returncode == 0 and same.stderr == "", same.stderr
    edited = json.loads((work / "run.json").read_text())
    (work / "edited.json").write_text(json.dumps({**edited, "time_range": [1980, 1984]}))
    other = status_of("edited.json")
    assert other.stderr == (
        "ncreel: note: edited.json differs from the settings run 'decade' last ran with "
        "(time_range): the states below are that run's; `snakemake -n --configfile "
        "edited.json` lists the jobs the new settings redo\n")
    assert other.stdout.splitlines()[-1] == "run decade: complete"


def test_a_table_of_a_range_every_third_step_never_calls_ffmpeg(tmp_path, sample_nc):
    """outputs: [table] with time_range and time_every: the rows of steps 1900, 1903 ..
    1948 keep their index in the whole series (40, 43 .. 88); no frame is drawn and
    ffmpeg is never started (an ffmpeg first on PATH fails the run if it is)."""
    work = _work(tmp_path, sample_nc, {
        "run": "rows", "outputs": ["table"], "time_range": ["1900", "1949-12"],
        "time_every": 3, "frames_per_shard": 6})
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ffmpeg").write_text(f"#!/bin/sh\ntouch {tmp_path}/ffmpeg-called\nexit 1\n")
    (fake / "ffmpeg").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    proc = snakemake(work, "--configfile", "run.json", env=env)
    assert not (tmp_path / "ffmpeg-called").exists()
    # A first run redoes nothing (statistics still running when the shards join the DAG
    # had its outputs taken for an interrupted run's).
    assert "interrupted" not in proc.stderr, proc.stderr[-3000:]
    out = work / "results" / "rows"
    for name in ("movie.mp4", "preview.png", "segments", "frames"):
        assert not (out / name).exists(), name
    rows = _rows(out / "cells.copy")
    with xr.open_dataset(sample_nc) as ds:
        data = ds["air_temperature"].values
    t = np.array([int(r[0]) for r in rows])
    cell = np.array([int(r[3]) for r in rows])
    assert sorted(set(t)) == list(range(40, 89, 3))
    assert len(rows) == 17 * 37 * 49
    np.testing.assert_array_equal(np.array([float(r[7]) for r in rows], np.float32),
                                  data.reshape(240, -1)[t, cell])
    assert {r[1] for r in rows if r[0] == "43"} == {"1903-06-01T00:00:00"}
    calibration = json.loads((out / "calibration.json").read_text())
    assert calibration["encoder_peak_mb"] == 0 and calibration["seconds_per_frame"] > 0
    assert "None: the run makes no movie" in (out / "report" / "plan.html").read_text()
    status = _status(work, "rows")
    assert "done" in status and status.splitlines()[-1] == "run rows: complete"


def test_850_hpa_chosen_by_value(tmp_path, eofs_data):
    path = plev_file(eofs_data, tmp_path / "z_plev.nc")
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    cfg = {"input": str(path), "variable": "z", "run": "z850", **SMALL,
           "sel": {"plev": "850 hPa"}, "time_range": [1970, 1979], "frames_per_shard": 5}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    out = work / "results" / "z850"
    assert int(probe(out / "movie.mp4")["nb_read_frames"]) == 10
    with xr.open_dataset(path, decode_times=False) as ds:
        data = ds["z"].isel(plev=1).values  # 850 hPa
    rows = _rows(out / "cells.copy")
    t = np.array([int(r[0]) for r in rows])
    cell = np.array([int(r[3]) for r in rows])
    np.testing.assert_allclose([float(r[7]) for r in rows], data.reshape(65, -1)[t, cell],
                               rtol=1e-12)
    cfg["sel"] = {"plev": 84000}
    (work / "bad.json").write_text(json.dumps({**cfg, "run": "z840"}))
    bad = snakemake(work, "-n", "--configfile", "bad.json", check=False)
    assert bad.returncode != 0
    said = [ln for ln in bad.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert said == ["ncreel: error: config key 'sel.plev': 84000 is not a value of "
                    "coordinate 'plev' (Pa); the nearest are 85000 (index 1), 100000 "
                    "(index 0), 50000 (index 2)"]


def test_a_field_table_inside_a_countrys_movie(tmp_path, sample_nc):
    """The movie of a country, the table of one field polygon inside it (cells.region):
    only the cells the polygon intersects, with their covered fraction."""
    import shapely

    work = _work(tmp_path, sample_nc, {
        "run": "field", "region": "United States of America",
        "cells": {"region": {"file": "field.geojson"}}, "time_range": [2000, 2002],
        "frames_per_shard": 3})
    ring = [[-99.3, 38.1], [-96.2, 38.4], [-96.6, 40.3], [-99.0, 40.0], [-99.3, 38.1]]
    (work / "field.geojson").write_text(json.dumps({
        "type": "Feature", "properties": {},
        "geometry": {"type": "Polygon", "coordinates": [ring]}}))
    snakemake(work, "--configfile", "run.json")
    out = work / "results" / "field"
    stats = json.loads((out / "stats.json").read_text())
    # the movie: the country's box of the grid; the table: the field's few cells
    assert stats["ny"] * stats["nx"] > 200 and stats["table_ny"] * stats["table_nx"] < 20
    assert int(probe(out / "movie.mp4")["nb_read_frames"]) == 3
    rows = _rows(out / "cells.copy")
    header = (out / "cells.sql").read_text().split("\\copy")[1].split("(")[1].split(")")[0]
    names = [c.strip().strip('"') for c in header.split(",")]
    lat, lon, frac = (names.index(c) for c in ("lat", "lon", "covered_fraction"))
    with xr.open_dataset(sample_nc) as ds:
        lats, lons = ds["latitude"].values, ds["longitude"].values - 360.0
    dlat, dlon = abs(lats[1] - lats[0]) / 2, abs(lons[1] - lons[0]) / 2
    field = shapely.Polygon(ring)
    want = {(float(x), float(y)) for y in lats for x in lons
            if shapely.intersects(shapely.box(x - dlon, y - dlat, x + dlon, y + dlat), field)}
    got = {(float(r[lon]), float(r[lat])) for r in rows}
    assert got == want and len(rows) == 3 * len(want)
    assert all(0 <= float(r[frac]) <= 1 for r in rows)
    assert max(float(r[frac]) for r in rows) > 0.5


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (a full "
                                "disk), which needs root (CI runs it as root)")


def _mount(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                   check=True)


@needs_root
def test_a_run_that_cannot_fit_stops_before_any_job(tmp_path, sample_nc):
    work = _work(tmp_path, sample_nc, {"run": "big"})
    _mount(work / "results", "4m")  # the table alone is about 70 MB
    try:
        proc = snakemake(work, "--configfile", "run.json", check=False)
        assert proc.returncode != 0
        said = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
        assert len(said) == 1, proc.stderr[-3000:]
        assert said[0].startswith("ncreel: error: run 'big' needs about ")
        assert "MB free (table" in said[0] and "outputs" in said[0]
        assert "time_range" in said[0] and "cells.compression" in said[0]
        assert "Traceback" not in proc.stderr
        # no job started: no job's log, no script, no output
        assert not [p for p in (work / "logs").rglob("*.log")]
        assert not list((work / ".snakemake").glob("scripts/*.py"))
        assert [p.name for p in (work / "results" / "big").iterdir()] == [".ncreel-run.lock"]
    finally:
        subprocess.run(["umount", "-l", str(work / "results")], check=False)
    # The same run made smaller fits: the movie alone, every third step, in three formats
    # with every frame kept as PNG (the GIF, the PNGs and the report's pages counted).
    small = json.loads((work / "run.json").read_text())
    movie = {**small, "outputs": ["movie"], "time_every": 3, "png_every": 1,
             "formats": ["mp4", "webm", "gif"]}
    (work / "run.json").write_text(json.dumps(movie))
    _mount(work / "results", "16m")
    try:
        snakemake(work, "--configfile", "run.json")
        out = work / "results" / "big"
        assert int(probe(out / "movie.mp4")["nb_read_frames"]) == 80
        written = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    finally:
        subprocess.run(["umount", "-l", str(work / "results")], check=False)
    # What the guard predicted covers what the jobs wrote (it is an upper estimate).
    from ncreel.jobs.diskguard import predicted_needs
    from ncreel.jobs.runconfig import load_config
    from snakemake.utils import validate
    from test_runconfig import user_config

    run = load_config(user_config(**{**movie, "input": str(sample_nc)}), validate=validate)
    predicted = sum(n.total for n in predicted_needs(run, tmp_path / "elsewhere"))
    assert written <= predicted <= 4 * written, (written, predicted)


@needs_root
def test_a_disk_that_fills_while_a_shard_runs_ends_in_one_line_and_status_says_so(
        tmp_path, sample_nc):
    work = _work(tmp_path, sample_nc, {"run": "fills", "outputs": ["table"],
                                       "time_range": [1900, 1919], "frames_per_shard": 10})
    results = work / "results"
    _mount(results, "32m")
    try:
        snakemake(work, "--configfile", "run.json", "--until", "calibrate_render")
        proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1",
                                 "--configfile", "run.json"], cwd=work, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while not list((work / ".snakemake" / "scripts").glob("*.process_shard.py")):
            assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
            time.sleep(0.02)
        filler = fill_disk(results)  # the job has not started writing: it imports first
        _, err = proc.communicate(timeout=300)
        assert proc.returncode != 0
        logs = sorted((work / "logs" / "fills" / "process_shard").glob("*.log"))
        said = [ln for p in logs for ln in p.read_text().splitlines() if "ncreel: error:" in ln]
        assert said and all("no space left on device writing" in ln for ln in said), said
        assert not any("Traceback" in p.read_text() for p in logs)
        assert "not run again" not in err or "full disk" in err
        status = _status(work, "fills")
        last = status.splitlines()[-1]
        assert last.startswith("run fills: stopped on a full disk (process_shard 0000"), status
        assert "interrupted" not in last
        assert not list((results / "fills" / "cells").glob("*.copy")) or all(
            len(p.read_text().splitlines()) == 10 * 37 * 49
            for p in (results / "fills" / "cells").glob("*.copy"))
        filler.unlink()
        snakemake(work, "--configfile", "run.json")  # room again: the same command resumes
        assert _status(work, "fills").splitlines()[-1] == "run fills: complete"
        assert len(_rows(results / "fills" / "cells.copy")) == 20 * 37 * 49
    finally:
        subprocess.run(["umount", "-l", str(results)], check=False)
