"""One shard job (``ncreel.jobs.shard.run_shard``): its COPY rows, PNG frames and segment."""

import json

import numpy as np
import pytest
import xarray as xr
from ncreel.cells import cells_settings
from ncreel.config.settings import CellsSettings, EncodeSettings, RenderSettings, SeriesSelection
from ncreel.jobs.shard import run_shard
from ncreel.run.shardplan import Shard, frame_name
from render_data import ffprobe, write_noisy_nc

RENDER = {"width": 160, "height": 96, "dpi": 40, "cmap": "viridis",
          "map": {"coastlines": None, "borders": False, "projection": "PlateCarree",
                  "projection_params": {}}}
ENCODE = EncodeSettings(fps=10, crf=18, preset="ultrafast")
CELLS = CellsSettings.from_params(cells_settings(
    {"model": "field", "geometry": "none", "compression": "none", "compression_level": None,
     "params": {}}))


@pytest.fixture
def inputs(tmp_path):
    nc = write_noisy_nc(tmp_path / "noisy.nc")  # 11 steps, 9 x 12 cells
    (tmp_path / "stats.json").write_text(json.dumps({"vmin": -2.0, "vmax": 2.0}))
    np.save(tmp_path / "cell_mean.npy", np.zeros((9, 12), np.float32))
    return nc, tmp_path


def _run(nc, d, render=RENDER):
    selection = SeriesSelection(paths=(str(nc),), variable="tas", time_dim="time", select={},
                                lat=None, lon=None, time=None)
    return run_shard(selection, Shard(1, 3, 7), stats_json=d / "stats.json",
                     cell_mean_npy=d / "cell_mean.npy", frames_dir=d / "frames",
                     rows_path=d / "rows.copy", render=RenderSettings.from_params(render),
                     segment=d / "seg.mp4", encode=ENCODE, cells=CELLS, png_times=[3, 6])


def test_shard_writes_its_rows_frames_and_segment(inputs):
    nc, d = inputs
    info = _run(nc, d)
    assert info["frames"] == 4 and info["rows"] == 4 * 9 * 12
    lines = (d / "rows.copy").read_text().splitlines()
    assert len(lines) == info["rows"]
    # Rows are the shard's own time steps (3..6), each cell's value read from the file; the
    # anomaly is against the statistics rule's per-cell mean (zero here).
    with xr.open_dataset(nc) as ds:
        data = ds["tas"].values
    fields = [ln.split("\t") for ln in lines]
    t, cell = (np.array([int(f[i]) for f in fields]) for i in (0, 3))
    # Columns: time_index, time, time_value, cell_id, lat, lon, lon_raw, value, anomaly.
    value, anomaly = (np.array([float(f[i]) for f in fields]) for i in (7, 8))
    assert sorted(set(t)) == [3, 4, 5, 6] and len(set(zip(t, cell, strict=True))) == len(fields)
    np.testing.assert_allclose(value, data.reshape(11, -1)[t, cell], rtol=1e-6)
    np.testing.assert_allclose(anomaly, value, rtol=1e-6)
    assert sorted(p.name for p in (d / "frames").iterdir()) == [frame_name(3), frame_name(6)]
    assert int(ffprobe(d / "seg.mp4")["nb_read_frames"]) == 4
    assert not list(d.glob("*.part"))


def test_failed_shard_leaves_no_output_under_its_final_name(inputs):
    nc, d = inputs
    with pytest.raises(ValueError, match="no-such-colormap"):
        _run(nc, d, render={**RENDER, "cmap": "no-such-colormap"})
    assert not any((d / n).exists() for n in ("frames", "rows.copy", "seg.mp4"))
    assert not list(d.glob("*.part"))


def _selection(nc, **extra):
    return SeriesSelection(paths=(str(nc),), variable="tas", time_dim="time", select={},
                           lat=None, lon=None, time=None, **extra)


def test_a_movie_only_shard_computes_no_row_and_a_table_only_one_draws_nothing(
        inputs, monkeypatch):
    """Config outputs: [movie] passes no rows file, [table] no segment; neither pass runs
    (the rows model and the renderer would raise if they did)."""
    nc, d = inputs
    import ncreel.jobs.shard as shard_job

    def no(*args, **kw):
        raise AssertionError("not wanted")

    monkeypatch.setattr(shard_job.ShardRows, "for_series", no)
    info = run_shard(_selection(nc), Shard(1, 3, 7), stats_json=d / "stats.json",
                     cell_mean_npy=None, frames_dir=d / "frames", rows_path=None,
                     render=RenderSettings.from_params(RENDER), segment=d / "seg.mp4",
                     encode=ENCODE, cells=CELLS)
    assert info["frames"] == 4 and info["rows"] == 0
    assert int(ffprobe(d / "seg.mp4")["nb_read_frames"]) == 4
    assert not (d / "rows.copy").exists()
    monkeypatch.undo()
    monkeypatch.setattr(shard_job, "render_shard", no)
    (d / "stats.json").write_text(json.dumps({"vmin": None, "vmax": None}))  # no limits
    info = run_shard(_selection(nc), Shard(1, 3, 7), stats_json=d / "stats.json",
                     cell_mean_npy=d / "cell_mean.npy", frames_dir=None,
                     rows_path=d / "rows.copy", render=RenderSettings.from_params(RENDER),
                     segment=None, encode=ENCODE, cells=CELLS)
    assert info["frames"] == 0 and info["rows"] == 4 * 9 * 12


def test_rows_of_a_time_window_keep_the_whole_series_time_index(inputs):
    """time_range/time_every: a shard's step t is step 2 + 3 t of the file, and its rows
    say so (the same time_index as a run of every step), with that step's time and value."""
    nc, d = inputs
    selection = _selection(nc, window=[2, 11, 3])  # steps 2, 5, 8 of the file
    info = run_shard(selection, Shard(0, 1, 3), stats_json=d / "stats.json",
                     cell_mean_npy=d / "cell_mean.npy", frames_dir=None,
                     rows_path=d / "rows.copy", render=RenderSettings.from_params(RENDER),
                     segment=None, encode=ENCODE, cells=CELLS)
    assert info["rows"] == 2 * 9 * 12
    with xr.open_dataset(nc, decode_times=False) as ds:
        data = ds["tas"].values
        times = ds["time"].values
    fields = [ln.split("\t") for ln in (d / "rows.copy").read_text().splitlines()]
    t = np.array([int(f[0]) for f in fields])
    cell = np.array([int(f[3]) for f in fields])
    assert sorted(set(t)) == [5, 8]
    np.testing.assert_allclose([float(f[7]) for f in fields], data.reshape(11, -1)[t, cell],
                               rtol=1e-6)
    # time_value: the file's own number of that step
    assert {int(f[0]): float(f[2]) for f in fields} == {5: times[5], 8: times[8]}


# --- rows beside the frames -------------------------------------------------------------

SLOW_MODEL = """
import os, time
from pathlib import Path
from ncreel.cells import cell_model, field_columns, field_model

@cell_model(columns=field_columns)
def slow(block, t0, ctx):
    Path(os.environ["NCREEL_TEST_MARK"]).touch()  # the rows have started
    time.sleep(float(os.environ.get("NCREEL_TEST_SLEEP", "0.3")))
    return field_model(block, t0, ctx)

@cell_model(columns=field_columns)
def broken(block, t0, ctx):
    if t0 >= 5:
        raise RuntimeError(f"model broke at step {t0}")
    return field_model(block, t0, ctx)
"""


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    (tmp_path / "shard_models.py").write_text(SLOW_MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("NCREEL_TEST_MARK", str(tmp_path / "started"))
    yield tmp_path
    import sys

    sys.modules.pop("shard_models", None)


def _cells(**kw):
    return CellsSettings.from_params(cells_settings({**CELLS.to_params(), **kw}))


def _step_blocks(monkeypatch):
    # The frames read one step a block, so that the shard's 4 steps pass the rows' queue
    # (QUEUED_BLOCKS) one by one.
    import ncreel.render.segment as segment

    monkeypatch.setattr(segment, "RENDER_BLOCK_BYTES", 9 * 12 * 8)


@pytest.mark.parametrize("layout", ["wide", "normalised"])
def test_rows_written_beside_the_frames_are_the_rows_written_alone(inputs, monkeypatch,
                                                                   layout):
    nc, d = inputs
    _step_blocks(monkeypatch)
    cells = _cells(layout=layout)

    def shard(out, **kw):
        out.mkdir()
        tables = ({"cells": out / "cells.copy", "steps": out / "steps.copy"}
                  if layout == "normalised" else None)
        return run_shard(_selection(nc), Shard(1, 3, 7), stats_json=d / "stats.json",
                         cell_mean_npy=d / "cell_mean.npy", rows_path=out / "rows.copy",
                         render=RenderSettings.from_params(RENDER), encode=ENCODE,
                         cells=cells, table_paths=tables, **kw)

    alone = shard(d / "alone", segment=None, frames_dir=None)
    both = shard(d / "both", segment=d / "both" / "seg.mp4", frames_dir=d / "both" / "frames")
    assert (alone["rows_mode"], both["rows_mode"]) == ("after", "shared")
    assert both["rows"] == alone["rows"] == 4 * 9 * 12 and both["frames"] == 4
    names = ["rows.copy", *(["cells.copy", "steps.copy"] if layout == "normalised" else [])]
    for name in names:
        assert (d / "both" / name).read_bytes() == (d / "alone" / name).read_bytes(), name
    assert int(ffprobe(d / "both" / "seg.mp4")["nb_read_frames"]) == 4
    assert not list(d.rglob("*.part"))


def test_a_table_of_its_own_extent_reads_its_own_blocks_beside_the_frames(inputs):
    """A movie of a region with a table of the whole grid: the rows are of other cells
    than the frames', written beside them from their own read."""
    nc, d = inputs
    from ncreel.region.spec import region_from_config

    region = region_from_config({"lon": [0, 200], "lat": [-20, 20], "table": "global"})
    info = run_shard(_selection(nc, region=region.to_params()), Shard(1, 3, 7),
                     stats_json=d / "stats.json", cell_mean_npy=d / "cell_mean.npy",
                     frames_dir=d / "frames", rows_path=d / "rows.copy",
                     render=RenderSettings.from_params(RENDER), segment=d / "seg.mp4",
                     encode=ENCODE, cells=CELLS)
    assert info["rows_mode"] == "beside" and info["frames"] == 4
    assert info["rows"] == 4 * 9 * 12  # every cell, not the region's
    assert len((d / "rows.copy").read_text().splitlines()) == info["rows"]


def test_an_error_of_the_rows_beside_the_frames_fails_the_shard_and_leaves_nothing(
        inputs, user_models, monkeypatch):
    nc, d = inputs
    _step_blocks(monkeypatch)
    import threading

    with pytest.raises(RuntimeError, match="model broke at step 5"):
        run_shard(_selection(nc), Shard(1, 3, 9), stats_json=d / "stats.json",
                  cell_mean_npy=d / "cell_mean.npy", frames_dir=d / "frames",
                  rows_path=d / "rows.copy", render=RenderSettings.from_params(RENDER),
                  segment=d / "seg.mp4", encode=ENCODE,
                  cells=_cells(model="shard_models:broken"))
    assert not any((d / n).exists() for n in ("frames", "rows.copy", "seg.mp4"))
    assert not list(d.glob("*.part"))
    assert not [t for t in threading.enumerate() if t.name.endswith(" rows")]


STOPPED_SHARD = """
import json, sys
from pathlib import Path
import numpy as np
from ncreel.cells import cells_settings
from ncreel.config.settings import CellsSettings, EncodeSettings, RenderSettings, SeriesSelection
from ncreel.jobs.shard import run_shard
from ncreel.run.logs import configure
from ncreel.run.shardplan import Shard
import ncreel.render.segment as segment

d = Path(sys.argv[1])
configure(d / "job.log")  # the job's stop signals, as process_shard.py sets them
segment.RENDER_BLOCK_BYTES = 9 * 12 * 8
run_shard(SeriesSelection(paths=(sys.argv[2],), variable="tas", time_dim="time", select={},
                          lat=None, lon=None, time=None),
          Shard(0, 0, 11), stats_json=d / "stats.json", cell_mean_npy=d / "cell_mean.npy",
          frames_dir=d / "frames", rows_path=d / "rows.copy",
          render=RenderSettings.from_params(json.loads(sys.argv[3])), segment=d / "seg.mp4",
          encode=EncodeSettings(fps=10, crf=18, preset="ultrafast"),
          cells=CellsSettings.from_params(cells_settings({"model": "shard_models:slow"})))
"""


def test_a_stop_signal_stops_the_frames_and_the_rows_beside_them(inputs, user_models):
    """SIGTERM (a scheduler's kill) while the rows are written beside the frames: the job
    ends within a block of the rows, says why in one line and keeps no output."""
    import os
    import signal
    import subprocess
    import sys
    import time

    nc, d = inputs
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_SHARD, str(d), str(nc),
                             json.dumps(RENDER)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                [str(user_models), os.environ["PYTHONPATH"]]),
                                "NCREEL_TEST_SLEEP": "1.0"})
    try:
        for _ in range(600):  # the rows have started (11 blocks of 1 s: far from done)
            if (user_models / "started").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()
        t = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=30)[1]
    finally:
        proc.kill()
    assert time.monotonic() - t < 5  # a block of the rows (1 s), not the 11 s left
    assert proc.returncode != 0
    assert "job interrupted by SIGTERM" in err, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert not any((d / n).exists() for n in ("frames", "rows.copy", "seg.mp4"))
    assert not list(d.glob("*.part"))


def test_a_full_disk_under_the_rows_beside_the_frames_names_the_rows_file(inputs, tmp_path,
                                                                         monkeypatch):
    """The rows' thread meets the full disk; the job's error is the disk's, naming the rows
    file (not the frames being drawn when it is raised), and nothing is left."""
    import os
    import subprocess

    from conftest import fill_disk
    from ncreel.core.errors import disk_full, disk_full_line

    if os.geteuid() != 0:
        pytest.skip("mounts a small tmpfs (a full disk), which needs root")
    nc, d = inputs
    _step_blocks(monkeypatch)
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        fill_disk(full, "filler")
        with pytest.raises(BaseException) as err:
            run_shard(_selection(nc), Shard(0, 0, 11), stats_json=d / "stats.json",
                      cell_mean_npy=d / "cell_mean.npy", frames_dir=d / "frames",
                      rows_path=full / "rows.copy", render=RenderSettings.from_params(RENDER),
                      segment=d / "seg.mp4", encode=ENCODE, cells=CELLS)
        assert disk_full(err.value) is not None, err.value
        assert f"writing '{full / 'rows.copy'}'" in disk_full_line(err.value)
        assert not list(full.glob("rows.copy*"))
    finally:
        subprocess.run(["umount", "-l", str(full)], check=True)
    assert not any((d / n).exists() for n in ("frames", "seg.mp4"))
    assert not list(d.glob("*.part"))
