"""Measure what one render worker costs at the configured frame size, before any shard runs.

The ``calibrate_render`` job renders and encodes a few probe frames of the real input,
exactly as a shard job does, and records its peak resident memory (itself and its ffmpeg)
and seconds per frame. From those, :mod:`ncreel.run.resources` derives every ``process_shard``
job's ``mem_mb`` and ``runtime``, and, when ``frames_per_shard`` is not configured, how many
frames fill the target job runtime. Measuring beats a formula here: the encoder's memory
alone (libx264 keeps ~40 look-ahead frames) depends on frame size and preset in ways no
simple formula tracks.
"""

from __future__ import annotations

import json
import logging
import math
import resource
import tempfile
import time
from pathlib import Path

from ncreel.config.settings import Calibration
from ncreel.core.procmem import current_rss_mb, peak_rss_mb
from ncreel.region.selection import open_selection
from ncreel.render.movie import SegmentEncoder
from ncreel.run.shardplan import fill_cores

log = logging.getLogger(__name__)

#: Probe frames: enough to fill libx264's look-ahead (rc-lookahead 40 + B-frames at the
#: slower presets), so the encoder reaches the memory it holds in a long shard.
PROBE_FRAMES = 64


def calibrate_render(job, *, n_time: int, probe_frames: int = PROBE_FRAMES,
                     target_minutes: float = 10.0, frames_per_shard: int | None = None,
                     workers: int = 1, cores: int | None = None) -> Calibration:
    """Render and encode `probe_frames` frames of the input; measure memory and speed.

    Runs in the calling process, which should be a job like ``process_shard`` (same
    interpreter and imports), so that the measured peak memory is what a shard job holds.

    Parameters
    ----------
    job : ncreel.render.segment.FrameJob
        As for a shard job: the input's selection, render and encode settings, colour
        limits.
    n_time : int
        Time steps in the series; probes cycle through the first ones if there are fewer.
    probe_frames : int
        Frames to render and encode, >= 1.
    target_minutes : float
        Wanted wall time of one shard job, used when `frames_per_shard` is None.
    frames_per_shard : int, optional
        Configured shard length; None computes it from `target_minutes`, shortened so
        that a local run of `cores` cores has a shard per core
        (:func:`ncreel.run.shardplan.fill_cores`). A configured length is kept.
    workers : int
        Worker processes per shard job (the job's ``threads``).
    cores : int, optional
        The cores of a local run (``--cores``); None on a cluster.

    Returns
    -------
    Calibration
        ``base_mb`` (process before rendering), ``worker_peak_mb`` (this process's peak),
        ``encoder_peak_mb`` (its ffmpeg's peak), ``seconds_per_frame`` (wall, drawing and
        encoding together, start-up included), ``startup_s``, ``render_s_per_frame``
        (drawing alone), ``probe_frames``, ``frames_per_shard`` (configured or computed),
        ``workers``, and the frame size.

    Raises
    ------
    ValueError
        If `probe_frames` or `n_time` is below 1.
    NcreelError
        If the input cannot be read or ffmpeg fails.
    """
    from ncreel.render.segment import frame_source, time_labels

    if probe_frames < 1 or n_time < 1:
        raise ValueError(f"probe_frames={probe_frames}, n_time={n_time}: need >= 1")
    base_mb = current_rss_mb()
    rend, enc = job.render, job.encode
    t_start = time.perf_counter()
    draw_s = 0.0
    n_read = min(n_time, probe_frames)
    with open_selection(job.series) as series, \
            tempfile.TemporaryDirectory(prefix="ncreel-calibrate-") as tdir:
        labels = time_labels(series, rend.time_format)
        # The full layout (every panel, the overlays' fields) read in the blocks and drawn
        # by the renderer a shard job uses; probes cycle through the first n_read steps.
        renderer, frames, close = frame_source(job, series, labels)
        startup_s = time.perf_counter() - t_start
        with SegmentEncoder(Path(tdir) / "probe.mp4", width=rend.width,
                            height=rend.height, fps=enc.fps, crf=enc.crf,
                            preset=enc.preset, threads=1) as encoder:
            done = 0
            while done < probe_frames:
                for _, args in frames(0, min(n_read, probe_frames - done)):
                    t1 = time.perf_counter()
                    rgba = renderer.draw(*args)
                    draw_s += time.perf_counter() - t1
                    encoder.write(rgba)
                    done += 1
            # Shard jobs also write a few PNGs: include Pillow's encoder in the peak.
            renderer.save_png(Path(tdir) / "probe.png")
        close()
    wall = time.perf_counter() - t_start
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    s_per_frame = wall / probe_frames
    if frames_per_shard is None:
        # A job of `workers` processes renders about `workers` times as fast.
        frames_per_shard = fill_cores(
            max(1, math.floor(target_minutes * 60 * max(workers, 1) / s_per_frame)),
            n_time, cores, workers)
    result = Calibration(
        width=rend.width, height=rend.height, dpi=rend.dpi,
        preset=enc.preset, crf=enc.crf, probe_frames=probe_frames,
        base_mb=round(base_mb, 1),
        worker_peak_mb=round(peak_rss_mb(), 1),
        # ffmpeg's own peak (ru_maxrss of a child would include this process's image).
        encoder_peak_mb=round(encoder.peak_rss_mb or kids.ru_maxrss / 1024, 1),
        encoder_cpu_s_per_frame=round((kids.ru_utime + kids.ru_stime) / probe_frames, 4),
        startup_s=round(startup_s, 3),
        seconds_per_frame=round(s_per_frame, 4),
        render_s_per_frame=round(draw_s / probe_frames, 4),
        target_minutes=target_minutes,
        frames_per_shard=int(min(frames_per_shard, n_time)),
        workers=int(workers),
    )
    log.info("calibration: %s", json.dumps(result.to_params()))
    return result
