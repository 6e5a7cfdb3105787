"""One shard job (``ncreel.process_shard.run_shard``): its COPY rows, PNG frames and segment."""

import json

import numpy as np
import pytest
import xarray as xr
from ncreel.cells import cells_settings
from ncreel.process_shard import run_shard
from ncreel.settings import CellsSettings, EncodeSettings, RenderSettings, SeriesSelection
from ncreel.shardplan import Shard, frame_name
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
