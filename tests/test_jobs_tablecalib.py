"""The shard plan of a run without a movie (ncreel.jobs.tablecalib): rows measured, no frame."""

from __future__ import annotations

import pytest
from ncreel.cells import cells_settings
from ncreel.config.settings import CellsSettings, EncodeSettings, RenderSettings, SeriesSelection
from ncreel.jobs.tablecalib import calibrate_table

RENDER = RenderSettings.from_params({
    "width": 160, "height": 96, "dpi": 40, "cmap": "viridis",
    "map": {"coastlines": None, "borders": False, "projection": "PlateCarree",
            "projection_params": {}}})
ENCODE = EncodeSettings(fps=10, crf=18, preset="ultrafast")


def _selection(sample_nc, **extra):
    return SeriesSelection(paths=(str(sample_nc),), variable="air_temperature",
                           time_dim="time", select={}, lat=None, lon=None, time=None, **extra)


@pytest.mark.parametrize("cells", [{}, {"compression": "zstd", "geometry": "text"},
                                   {"model": "etr_risk", "params": {
                                       "first_application": "1990-06-01",
                                       "dt50_days": 30.0,
                                       "temperature_variable": "air_temperature"}}])
def test_rows_of_probe_steps_plan_the_shards_without_drawing(sample_nc, cells):
    settings = CellsSettings.from_params(cells_settings(cells))
    cal = calibrate_table(_selection(sample_nc, window=[100, 200, 1]), settings,
                          render=RENDER, encode=ENCODE, n_time=100, probe_frames=3,
                          target_minutes=0.5)
    assert cal.encoder_peak_mb == 0 and cal.render_s_per_frame == 0 and cal.workers == 1
    assert cal.probe_frames == 3 and cal.seconds_per_frame > 0
    assert cal.worker_peak_mb >= cal.base_mb > 0
    # the plan fills target_minutes at the measured rate, at most the whole series
    # (seconds_per_frame is stored rounded: one step either way)
    assert abs(cal.frames_per_shard - min(100, 30 / cal.seconds_per_frame)) <= 1
    fixed = calibrate_table(_selection(sample_nc), settings, render=RENDER, encode=ENCODE,
                            n_time=240, probe_frames=2, frames_per_shard=60)
    assert fixed.frames_per_shard == 60
    # a local run of 4 cores: 4 shards of the 240 steps however fast; a configured
    # length still wins
    local = calibrate_table(_selection(sample_nc), settings, render=RENDER, encode=ENCODE,
                            n_time=240, probe_frames=2, target_minutes=600.0, cores=4)
    assert local.frames_per_shard == 60
    fixed = calibrate_table(_selection(sample_nc), settings, render=RENDER, encode=ENCODE,
                            n_time=240, probe_frames=2, frames_per_shard=240, cores=4)
    assert fixed.frames_per_shard == 240
