"""The shard plan of a run without a movie: its COPY rows measured, no frame drawn.

A run with ``outputs: [table]`` never draws or encodes: its ``calibrate_render`` job
writes the rows of a few probe steps as a shard job does (the configured cell model,
geometry and compression, into a temporary file) and records their memory and seconds
per step in ``calibration.json``, from which the shard plan and every ``process_shard``
job's ``mem_mb`` and ``runtime`` follow as for a movie (:mod:`ncreel.run.resources`).
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from ncreel.config.settings import Calibration, CellsSettings, EncodeSettings, RenderSettings
from ncreel.core.procmem import current_rss_mb, peak_rss_mb
from ncreel.run.shardplan import fill_cores

log = logging.getLogger(__name__)


def calibrate_table(selection, cells: CellsSettings, *, render: RenderSettings,
                    encode: EncodeSettings, n_time: int, probe_frames: int = 64,
                    target_minutes: float = 10.0,
                    frames_per_shard: int | None = None,
                    cores: int | None = None) -> Calibration:
    """Write the COPY rows of `probe_frames` steps; measure memory and seconds per step.

    Runs in the calling process, a job like ``process_shard``, reading the steps in the
    blocks a shard job's rows pass reads, so that the measured peak is what that pass
    holds.

    Parameters
    ----------
    selection : ncreel.config.settings.SeriesSelection
        The run's series (the table reads its
        :meth:`~ncreel.config.settings.SeriesSelection.table_selection`).
    cells : CellsSettings
        Cell model, geometry and compression, as the shard jobs write them. A model that
        needs the degradation pre-pass (``etr_risk`` with a temperature variable, which
        runs after this job) is probed as ``field``: the probe measures the writer.
    render, encode : RenderSettings, EncodeSettings
        Recorded in the calibration as configured (nothing is drawn).
    n_time : int
        Time steps of the series; probes take its first ones.
    probe_frames : int
        Steps to write, >= 1 (config ``calibration_frames``).
    target_minutes : float
        Wanted wall time of one shard job, used when `frames_per_shard` is None.
    frames_per_shard : int, optional
        Configured shard length; None computes it from `target_minutes`, shortened so
        that a local run of `cores` cores has a shard per core
        (:func:`ncreel.run.shardplan.fill_cores`).
    cores : int, optional
        The cores of a local run (``--cores``); None on a cluster.

    Returns
    -------
    Calibration
        ``seconds_per_frame`` are seconds per step of the rows pass, start-up included;
        ``worker_peak_mb`` this process's peak; the encoder's and drawing's fields 0.

    Raises
    ------
    ValueError
        If `probe_frames` or `n_time` is below 1.
    NcreelError
        If the input cannot be read or the model fails.
    """
    from ncreel.cells import ShardRows
    from ncreel.cells.rows import probe_settings
    from ncreel.input.source import MAX_BLOCK_CELLS
    from ncreel.pg.copytext import open_copy_writer
    from ncreel.region.selection import open_selection

    if probe_frames < 1 or n_time < 1:
        raise ValueError(f"probe_frames={probe_frames}, n_time={n_time}: need >= 1")
    cells = probe_settings(cells)
    base_mb = current_rss_mb()
    t_start = time.perf_counter()
    n = min(n_time, probe_frames)
    with open_selection(selection.table_selection()) as table, \
            tempfile.TemporaryDirectory(prefix="ncreel-calibrate-") as tdir:
        rows = ShardRows.for_series(table, cell_mean=np.zeros((table.ny, table.nx)),
                                    cells=cells)
        startup_s = time.perf_counter() - t_start
        written = 0
        with open_copy_writer(Path(tdir) / f"probe{cells.suffix}", cells.compression,
                              cells.compression_level) as fh:
            # In the blocks of a shard's rows pass (each time chunk read once, as there).
            for t0, block in table.iter_blocks(0, n, MAX_BLOCK_CELLS * table.dtype.itemsize):
                written += rows.write(fh, t0, block)
    wall = time.perf_counter() - t_start
    s_per_step = wall / n
    if frames_per_shard is None:
        frames_per_shard = fill_cores(
            max(1, math.floor(target_minutes * 60 / max(s_per_step, 1e-6))), n_time, cores)
    result = Calibration(
        width=render.width, height=render.height, dpi=render.dpi, preset=encode.preset,
        crf=encode.crf, probe_frames=n, base_mb=round(base_mb, 1),
        worker_peak_mb=round(peak_rss_mb(), 1), encoder_peak_mb=0.0,
        encoder_cpu_s_per_frame=0.0, startup_s=round(startup_s, 3),
        seconds_per_frame=round(s_per_step, 4), render_s_per_frame=0.0,
        target_minutes=target_minutes, frames_per_shard=int(min(frames_per_shard, n_time)),
        workers=1)
    log.info("calibration (rows of %d steps, %d rows, no frames): %s", n, written,
             json.dumps(result.to_params()))
    return result
