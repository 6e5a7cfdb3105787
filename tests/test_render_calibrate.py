"""Measuring a render worker before any shard runs (``ncreel.render.calibrate``), and the
memory and runtime the render jobs then declare."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ncreel.render.calibrate import calibrate_render
from ncreel.run.resources import (
    ROWS_PASS_MB,
    render_mem_mb_calibrated,
    render_runtime_calibrated,
)
from render_data import spec, write_noisy_nc


@pytest.fixture(scope="module")
def noisy_nc(tmp_path_factory):
    return write_noisy_nc(tmp_path_factory.mktemp("nc") / "noisy.nc")


def _in_fresh_process(*args, **kwargs):
    # A shard job's process starts fresh; in the test process earlier tests may already
    # have pushed the peak (ru_maxrss) above what the probe needs, leaving peak == base.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(calibrate_render, *args, **kwargs).result()


def test_calibration_and_resources(noisy_nc):
    cal = _in_fresh_process(spec(noisy_nc), n_time=11, probe_frames=6, target_minutes=0.01)
    assert cal.worker_peak_mb > cal.base_mb > 0
    assert cal.encoder_peak_mb > 0 and cal.seconds_per_frame > 0
    assert 1 <= cal.frames_per_shard <= 11
    fixed = calibrate_render(spec(noisy_nc), n_time=11, probe_frames=2, frames_per_shard=4)
    assert fixed.frames_per_shard == 4
    measured = cal.worker_peak_mb + cal.encoder_peak_mb
    one = render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=100)
    # on so small a grid the rows pass's libraries are most of what it adds
    assert measured <= one <= 1.5 * (measured + ROWS_PASS_MB)
    assert render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=100, attempt=2) == 2 * one
    # Memory stops growing with the shard's length once the rows pass's block is full
    # (MAX_BLOCK_CELLS values); more workers need more.
    assert (render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=10**5)
            == render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=10**7))
    assert render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=100, workers=2) > one
    short = render_runtime_calibrated(cal, n_frames=10)
    assert short >= 5
    assert render_runtime_calibrated(replace(cal, seconds_per_frame=1.0), n_frames=6000) >= 200


def test_a_local_run_is_planned_into_a_shard_per_core(noisy_nc):
    """11 steps that fit one shard's target time: 2 cores give 2 shards, a cluster run
    (no cores) and a configured length keep 1."""
    from ncreel.run.shardplan import plan_shards

    kw = {"n_time": 11, "probe_frames": 2, "target_minutes": 60.0}
    assert calibrate_render(spec(noisy_nc), **kw).frames_per_shard == 11
    local = calibrate_render(spec(noisy_nc), **kw, cores=2).frames_per_shard
    assert len(plan_shards(11, local)) == 2
    assert calibrate_render(spec(noisy_nc), **kw, cores=2,
                            frames_per_shard=11).frames_per_shard == 11


def test_movie_calibration_draws_with_the_first_steps_limits(noisy_nc, caplog):
    """calibrate_render runs beside statistics: its probe frames take the limits (and the
    overlays' levels) of the first steps, and say nothing about levels of the whole movie."""
    from ncreel.jobs.moviecalib import calibrate_movie

    job = spec(noisy_nc)
    contours = {"variable": "tas", "levels": 4}
    with caplog.at_level("INFO"):
        cal = calibrate_movie(job.series, job.render, job.encode, n_time=11, probe_frames=3,
                              frames_per_shard=5,
                              overlays={"contours": contours, "vectors": None})
    assert cal.frames_per_shard == 5 and cal.probe_frames == 3
    assert cal.seconds_per_frame > 0 and cal.worker_peak_mb > 0
    assert "crosses" not in caplog.text and "no levels" not in caplog.text
