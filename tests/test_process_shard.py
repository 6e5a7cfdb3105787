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
