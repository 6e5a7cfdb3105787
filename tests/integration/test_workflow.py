"""The whole workflow, run by Snakemake on real NetCDF files in a fresh directory.

Outputs are checked with ffprobe, loaded into a real PostgreSQL server with the generated
``cells.sql``, and compared with xarray.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from conftest import derive_nc
from workflow_run import SMALL, make_workdir, probe, psql_load, snakemake

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def demo_run(tmp_path_factory, sample_nc):
    work = make_workdir(tmp_path_factory.mktemp("demo"))
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    # the statistics in two worker processes, whose cell means the COPY rows' anomaly
    # checks against xarray's below
    proc = snakemake(work, "--config", *SMALL, "statistics_processes=2")
    return work, proc


def test_demo_movie(demo_run):
    work, _ = demo_run
    info = probe(work / "results/demo/movie.mp4")
    assert info["codec_name"] == "h264" and info["pix_fmt"] == "yuv420p"
    assert int(info["nb_read_frames"]) == 240
    assert info["width"] % 2 == 0 and info["height"] % 2 == 0
    assert (work / "results/demo/preview.png").stat().st_size > 0


def test_demo_copy_loads_and_matches_netcdf(demo_run, pg_server, pg_conn, sample_nc):
    work, _ = demo_run
    results = work / "results/demo"
    with open(results / "cells.copy", "rb") as fh:
        assert sum(1 for _ in fh) == 435_120
    psql_load(pg_server, results)
    assert pg_conn.execute("select count(*) from ncreel_demo").fetchone()[0] == 435_120
    da = xr.open_dataset(sample_nc, decode_times=False)["air_temperature"]
    mean = da.astype(np.float64).mean("time").values
    for t, iy, ix in [(0, 0, 0), (17, 5, 30), (239, 36, 48), (120, 20, 0)]:
        row = pg_conn.execute(
            "select value, anomaly, lat, lon, time, time_value, lon_raw from ncreel_demo "
            "where time_index = %s and cell_id = %s", (t, iy * 49 + ix)).fetchone()
        value, anomaly, lat, lon, when, time_value, lon_raw = row
        assert np.float32(value) == da.values[t, iy, ix]
        assert anomaly == pytest.approx(float(da.values[t, iy, ix]) - mean[iy, ix], abs=1e-9)
        # The sample stores 225…315; lon is EPSG:4326's -180…180, lon_raw the file's value.
        assert (lat, lon_raw) == (float(da.latitude[iy]), float(da.longitude[ix]))
        assert lon == float(da.longitude[ix]) - 360
        assert time_value == float(da.time[t])
        assert when == f"{1860 + t}-06-01T00:00:00"
    # Loading again replaces the rows instead of duplicating them.
    psql_load(pg_server, results)
    assert pg_conn.execute("select count(*) from ncreel_demo").fetchone()[0] == 435_120


def test_demo_rules_declare_and_measure(demo_run):
    work, _ = demo_run
    # frames_per_shard is null: the calibration chose the shard length (and stored it).
    calibration = json.loads((work / "results/demo/calibration.json").read_text())
    n_shards = -(-240 // calibration["frames_per_shard"])
    assert n_shards >= 2  # a local run of --cores 2: a shard per core at least
    bench = list((work / "results/demo/benchmarks/process_shard").glob("*.tsv"))
    assert len(bench) == n_shards
    # each shard's rows were written beside its frames, from the blocks they read
    for log in (work / "logs/demo/process_shard").glob("*.log"):
        assert "rows (beside, sharing the blocks of the frames)" in log.read_text(), log
    assert len(list((work / "results/demo/segments").glob("*.mp4"))) == n_shards
    said = (work / "logs/demo/statistics.log").read_text()
    assert "statistics of 'air_temperature': 2 worker processes, time steps 0..119, " \
        "120..239" in said, said
    for name in ("statistics", "calibrate_render", "reduce_cells", "concat_segments"):
        assert (work / f"results/demo/benchmarks/{name}.tsv").is_file()
        assert (work / f"logs/demo/{name}.log").is_file()


def test_demo_progress_in_the_terminal(demo_run):
    """The controller's terminal says how the shards go, and at the end how it went."""
    work, proc = demo_run
    n_shards = len(list((work / "results/demo/segments").glob("*.mp4")))
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: shards ")]
    assert re.fullmatch(rf"ncreel: shards {n_shards}/{n_shards} done · [0-9.]+ frames/s · "
                        r"\d\d:\d\d:\d\d in all", lines[-1]), lines
    for line in lines[:-1]:
        assert re.fullmatch(rf"ncreel: shards \d+/{n_shards} done, \d+ running, \d+ queued · "
                            r"([0-9.]+|-) frames/s · ETA (\d\d:\d\d:\d\d|\?)", line), line
    # In Snakemake's own log of the run too.
    (log,) = (work / ".snakemake" / "log").glob("*.snakemake.log")
    assert lines[-1] in log.read_text()


def test_rerun_does_nothing(demo_run):
    work, _ = demo_run
    proc = snakemake(work, "--config", *SMALL)
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert "ncreel: shards" not in proc.stdout + proc.stderr


def test_rerun_with_other_cores_keeps_the_plan(demo_run):
    """The shard plan follows --cores when it is made, not after: the calibration is not
    redone (nor the shards) for a rerun with other cores."""
    work, _ = demo_run
    proc = snakemake(work, "-n", "--cores", "1", "--config", *SMALL)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_changed_setting_reruns_render(demo_run):
    work, _ = demo_run
    proc = snakemake(work, "-n", "--config", *SMALL[:-1], "preset=veryfast")
    # Shard jobs encode their own segments, so the preset reruns calibration, shards and
    # the join; the statistics stay.
    out = proc.stdout
    assert "calibrate_render" in out and "concat_segments" in out and "statistics" not in out
    assert "ncreel: shards" not in proc.stdout + proc.stderr  # a dry run starts nothing


def test_dag_and_report(demo_run):
    work, _ = demo_run
    for flag in ("--rulegraph", "--dag"):
        dot = snakemake(work, flag, "--config", *SMALL).stdout
        svg = subprocess.run(["dot", "-Tsvg"], input=dot[dot.index("digraph"):],
                             capture_output=True, text=True, check=True).stdout
        assert "process_shard" in svg
    snakemake(work, "--report", "report.html", "--config", *SMALL)
    html = (work / "report.html").read_text(errors="replace")
    assert "movie.mp4" in html and "preview.png" in html


def test_report_is_the_runs_own(demo_run):
    """The run's settings are recorded by its controller: ``--report`` given no run file
    reports the last run made here with them; given other settings, it warns."""
    work, _ = demo_run
    proc = snakemake(work, "--report", "own.html")  # no --config: not the defaults
    assert "ncreel: note: no run file given: reporting the last run made here, 'demo' " \
           "(--config " in proc.stderr
    html = (work / "own.html").read_text(errors="replace")
    assert "movie.mp4" in html
    proc = snakemake(work, "--report", "other.html", "--config", *SMALL[:-1],
                     "preset=veryfast")
    warning = next(ln for ln in proc.stderr.splitlines() if "ncreel: warning:" in ln)
    assert "run 'demo' last ran with other settings than these (" in warning
    assert "preset" in warning and "--config width=... height=..." in warning


@pytest.mark.parametrize("case", ["sst_missing_values", "hgt_select_level", "months_since"])
def test_other_real_files(case, tmp_path, eofs_data, sample_nc, pg_server, pg_conn):
    work = make_workdir(tmp_path)
    if case == "sst_missing_values":
        path, var, extra = eofs_data / "sst_ndjfm_anom.nc", "sst", []
    elif case == "hgt_select_level":
        path, var, extra = eofs_data / "hgt_djf.nc", "z", ["select={pressure: 0}"]
    else:  # renamed time dim, undecodable units: must still run on raw time values
        path = derive_nc(ostia := sample_nc.parent / "ostia_monthly.nc", tmp_path / "o.nc",
                         variable="surface_temperature", rename={"time": "month"},
                         time_attrs={"units": "months since 1990-01-01"})
        var, extra = "surface_temperature", []
        assert ostia.is_file()
    snakemake(work, "--config", f"input={path}", f"variable={var}", f"run={case}", *SMALL,
              "frames_per_shard=20", *extra)
    results = work / "results" / case
    with xr.open_dataset(path, decode_times=False) as ds:
        da = ds[var].isel({k: 0 for k in ("pressure",) if k in ds[var].dims})
        n_time, finite = da.shape[0], int(np.isfinite(da.values).sum())
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == n_time
    psql_load(pg_server, results)
    table = f"ncreel_{case}"
    assert pg_conn.execute(f"select count(*) from {table}").fetchone()[0] == finite
    types = dict(pg_conn.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_name = %s", (table,)).fetchall())
    if case == "months_since":
        assert types["time"] == "text"
        assert pg_conn.execute(f"select count(time) from {table}").fetchone()[0] == 0
        assert "time could not be decoded" in (results / "cells.sql").read_text()
        assert "months since" in (work / f"logs/{case}/statistics.log").read_text()
    else:
        assert types["time"] == "timestamp without time zone"


def _error_line(proc) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize("config, expected", [
    (["input=missing.nc"], "input 'missing.nc': file not found"),
    (["variable=tas"], "no variable 'tas' (variables: air_temperature"),
    (["colour=red"], "config key 'colour' is not a setting of ncreel: did you mean 'cmap'?"),
    (["map={coastline: false}"], "config key 'map.coastline' is not a setting of ncreel: "
                                 "did you mean 'map.coastlines'?"),
    (["run=my run"], "config key 'run' = 'my run' is not accepted: use letters, digits"),
    (["frames_per_shard=0"], "frames_per_shard"),
    (["time_dim=month"], "'month' is not a dimension of 'air_temperature'"),
    (["map={projection: Robinsn}"], "map.projection 'Robinsn' is not a cartopy.crs projection"),
])
def test_bad_input_one_line_errors(config, expected, tmp_path, sample_nc):
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    line = _error_line(snakemake(work, "-n", "--config", *config, check=False))
    assert expected in line
    assert not (work / "results").exists()


def test_bad_input_not_2d(tmp_path, eofs_data):
    work = make_workdir(tmp_path)
    line = _error_line(snakemake(work, "-n", "--config", f"input={eofs_data / 'hgt_djf.nc'}",
                                 "variable=z", check=False))
    assert "extra dims pressure" in line and "select" in line


def _incomplete(work: Path) -> set[str]:
    d = work / ".snakemake" / "incomplete"
    return {base64.b64decode(p.name).decode() for p in d.iterdir()} if d.is_dir() else set()


def test_kill_and_resume(tmp_path, sample_nc):
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")
    args = ["--config", *SMALL, "frames_per_shard=15"]
    cells = work / "results/demo/cells"
    with subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", *args],
                          cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True) as proc:
        deadline = time.time() + 300
        while time.time() < deadline and len(list(cells.glob("*.copy"))) < 3:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)  # snakemake and all its jobs, no clean-up
    assert list((work / ".snakemake/locks").iterdir()), "the killed run should leave its lock"
    incomplete = _incomplete(work)
    done = {p: p.stat().st_mtime_ns for p in cells.glob("*.copy")
            if f"results/demo/cells/{p.name}" not in incomplete}
    assert 1 <= len(done) < 16  # a just-renamed file may not be recorded as done yet
    assert not (work / "results/demo/cells.copy").exists()
    snakemake(work, *args)  # the same command again
    with open(work / "results/demo/cells.copy", "rb") as fh:
        assert sum(1 for _ in fh) == 435_120
    assert int(probe(work / "results/demo/movie.mp4")["nb_read_frames"]) == 240
    assert {p: p.stat().st_mtime_ns for p in done} == done, "finished shards were redone"
    assert not list(work.glob("results/demo/**/*.part"))


def test_input_replaced_during_the_run_stops_then_reruns_from_it(tmp_path, sample_nc):
    """The input replaced (+100 K) after the statistics job: no output mixes the versions."""
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    src = work / "resources" / "A1B_north_america.nc"
    shutil.copy(sample_nc, src)
    warmer = tmp_path / "warmer.nc"
    with xr.open_dataset(sample_nc, decode_times=False) as ds:
        ds = ds.load()
    ds["air_temperature"] = ds["air_temperature"] + np.float32(100)
    ds.to_netcdf(warmer)
    args = ["--config", *SMALL, "frames_per_shard=40"]
    stats = work / "results/demo/stats.json"
    with subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", *args],
                          cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        deadline = time.time() + 300
        while time.time() < deadline and not stats.exists() and proc.poll() is None:
            time.sleep(0.05)
        os.replace(warmer, src)  # a re-downloaded file under the same name
        _, err = proc.communicate(timeout=600)
    assert proc.returncode != 0
    assert "changed after this run's statistics were computed" in err, err[-3000:]
    assert not (work / "results/demo/cells.copy").exists()
    assert not (work / "results/demo/movie.mp4").exists()
    snakemake(work, *args)  # the same command again: redone from the file as it is now
    recorded = json.loads(stats.read_text())
    assert recorded["inputs"][0]["size"] == src.stat().st_size
    with open(work / "results/demo/cells.copy") as fh:
        anomalies = [float(line.rstrip("\n").split("\t")[-1]) for line in fh]
    assert len(anomalies) == 435_120
    assert abs(np.mean(anomalies)) < 1e-6  # against the new file's own means (was 100.0)


def test_formats_added_to_a_finished_run_render_nothing(demo_run):
    """webm and gif from the finished demo's MP4: no shard is run again."""
    work, _ = demo_run
    movie = work / "results/demo/movie.mp4"
    before = movie.stat().st_mtime_ns
    proc = snakemake(work, "--config", *SMALL, "formats=[mp4, webm, gif]", "gif={width: 120}")
    ran = proc.stdout + proc.stderr
    assert "rule movie_format:" in ran or "localrule movie_format:" in ran, ran[-3000:]
    assert "process_shard" not in ran and "calibrate_render" not in ran, ran[-3000:]
    assert movie.stat().st_mtime_ns == before
    webm = probe(work / "results/demo/movie.webm")
    assert webm["codec_name"] == "vp9" and int(webm["nb_read_frames"]) == 240
    assert (webm["width"], webm["height"]) == (160, 96)
    gif = probe(work / "results/demo/movie.gif")
    assert gif["codec_name"] == "gif" and gif["width"] == 120
    # 240 frames at 12 fps are 20 s; at the GIF's 10 fps that is 200 frames.
    assert int(gif["nb_read_frames"]) == 200


def test_sigint_to_a_background_run_stops_it_without_retries(tmp_path, sample_nc):
    """A run started in the background of a script (SIGINT inherited ignored), then Ctrl-C
    to the script's process group: the run stops, nothing is retried, no tracebacks."""
    work = make_workdir(tmp_path)
    (work / "resources").mkdir()
    shutil.copy(sample_nc, work / "resources" / "A1B_north_america.nc")

    def as_background_job():
        os.setpgrp()
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    logs = work / "logs/demo/process_shard"
    # One job at a time, signalled once it runs ncreel's code (its attempts record exists,
    # written after the signal handlers are set): a job still importing Snakemake's script
    # preamble has no handler yet, and Python prints KeyboardInterrupt there.
    with subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--config",
                           *SMALL, "frames_per_shard=120"], cwd=work, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          preexec_fn=as_background_job) as proc:
        deadline = time.time() + 300
        while time.time() < deadline and not list(logs.glob("*.attempts.jsonl")):
            time.sleep(0.05)
        time.sleep(0.5)  # the shard job (and its ffmpeg) is rendering
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.time()
        _, err = proc.communicate(timeout=120)
    assert time.time() - t0 < 60
    assert proc.returncode != 0
    assert "Traceback" not in err, err[-4000:]
    assert not (work / "results/demo/movie.mp4").exists()
    for record in logs.glob("*.attempts.jsonl"):
        starts = [json.loads(ln) for ln in record.read_text().splitlines() if '"start"' in ln]
        assert len(starts) == 1, f"{record.name} was retried: {starts}"
        ends = [json.loads(ln) for ln in record.read_text().splitlines() if '"end"' in ln]
        assert all(e["ok"] or e.get("reason") == "interrupted" for e in ends), ends


def test_a_run_given_by_config_alone_in_another_directory(tmp_path, sample_nc):
    # `snakemake --directory DIR --config input=... variable=... run=...` without a run
    # file stopped with Snakemake's "config/config.yaml ... is not present": the run is
    # now the --config values; a missing key is ncreel's one line.
    (tmp_path / "ncreel").mkdir()
    work = make_workdir(tmp_path / "ncreel")
    runs = tmp_path / "runs"
    runs.mkdir()
    given = [f"input={sample_nc}", "variable=air_temperature", "run=elsewhere"]
    proc = snakemake(work, "-n", "--directory", str(runs), "--config", *given)
    assert "statistics" in proc.stdout and "not present" not in proc.stderr
    proc = snakemake(work, "-n", "--directory", str(runs), "--config", *given[1:],
                     check=False)
    errors = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()]
    assert proc.returncode != 0 and errors == [
        "ncreel: error: config key 'input' is required: set it in the run file (`ncreel "
        "config` writes one) or with --config input=..."], proc.stderr
