"""One shard job: stream its cell rows, then render its frames into a movie segment."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path

import numpy as np

from ncreel.cells import ShardRows
from ncreel.cells.soil import read_degradation_state
from ncreel.config.settings import CellsSettings, EncodeSettings, RenderSettings, SeriesSelection
from ncreel.core.io import atomic_path
from ncreel.input.identity import check_inputs
from ncreel.input.source import MAX_BLOCK_CELLS
from ncreel.pg.copytext import open_copy_writer
from ncreel.region.selection import open_selection, table_series
from ncreel.render.segment import FrameJob, colorbar_extend, render_shard
from ncreel.run.progress import Progress
from ncreel.run.shardplan import Shard

log = logging.getLogger(__name__)


def run_shard(selection: SeriesSelection, shard: Shard, *, stats_json: str | os.PathLike,
              cell_mean_npy: str | os.PathLike, frames_dir: str | os.PathLike,
              rows_path: str | os.PathLike, render: RenderSettings,
              segment: str | os.PathLike, encode: EncodeSettings, cells: CellsSettings,
              png_times=(), workers: int = 1, png_compress: int = 6,
              degradation: tuple | None = None, table_paths: dict | None = None) -> dict:
    """Write the COPY rows and render the frames of time steps ``shard.start:shard.stop``.

    Frames: :func:`ncreel.render.segment.render_shard` reads the slice in its own small
    blocks. Rows, afterwards: the shard is read again in blocks of at most
    ``MAX_BLOCK_CELLS`` values, each written and then dropped (a second read of the slice
    costs far less than drawing). The passes stay independent, so peak memory is about the
    larger of the two, not the sum; neither grows with the shard's length. Every output is
    written under a temporary name and renamed only when complete. The input is opened
    once here; render worker processes (``workers > 1``) open their own from `selection`.

    Parameters
    ----------
    selection : SeriesSelection
        The input.
    shard : Shard
        Which time steps.
    stats_json, cell_mean_npy : path
        Outputs of the statistics rule (colour limits; per-cell means, shape (ny, nx)).
    frames_dir : path
        Directory to create, holding ``frame_<time_index>.png`` for `png_times`.
    rows_path : path or None
        COPY text file of this shard's rows; None writes no rows (config ``outputs``
        without ``table``).
    render : RenderSettings
    segment : path or None
        The shard's H.264 MP4 segment; None draws no frame (``outputs`` without
        ``movie``).
    encode : EncodeSettings
    cells : CellsSettings
        Cell model, geometry column and compression of the COPY file.
    png_times : iterable of int
        Global time indices also written as PNG (see :func:`ncreel.render.segment.png_sample`).
    workers : int
        Render worker processes (the job's ``threads``).
    png_compress : int
        zlib level of the PNG frames.
    degradation : (path, path) or None
        ``degradation_state.npy`` and ``.json`` of the ``degradation_state`` rule (etr_risk
        with a temperature variable); (None, None) or None when not used.

    table_paths : dict, optional
        ``cells`` and ``steps``: the shard's files of the normalised layout
        (``cells.layout: normalised``; `rows_path` then holds the values rows only).

    Returns
    -------
    dict
        ``frames`` and ``rows`` written, and the render statistics.

    Raises
    ------
    NcreelError
        If an input file is not the version ``stats.json`` records (:mod:`ncreel.input.identity`),
        before any read or after the last one.
    """
    stats = json.loads(Path(stats_json).read_text())
    # The files must be the versions the statistics (colour limits, cell means) describe;
    # checked again after the last read, before the rows file gets its final name.
    recorded = stats.get("inputs")
    # The files this job reads: the input's and, with panels, every panel's.
    panels = render.panels["panels"] if render.panels else []
    paths = list(dict.fromkeys([*selection.paths, *(
        q for p in panels if p["series"] for q in p["series"]["paths"])]))
    if recorded is not None:
        check_inputs(recorded, paths)
    job = FrameJob(series=selection, render=render, encode=encode, vmin=stats["vmin"],
                   vmax=stats["vmax"], png_compress=png_compress,
                   overlay_limits=stats.get("overlays"),
                   extend=colorbar_extend(render.colorbar_extend, stats),
                   panel_limits=stats.get("panels"), label=f"shard {shard.name} frames"
                   ) if segment is not None else None
    with open_selection(selection) as series, table_series(selection, series) as table:
        # Frames first: their encoder has exited before the rows pass starts, so the job's
        # peak is the larger of the two passes (what calibration measures), not their sum.
        info = {"frames": 0, "pngs": 0, "workers": 0, "wall_s": 0.0, "render_s": 0.0,
                "maxrss_mb": 0.0, "encoder_maxrss_mb": 0.0}
        if segment is not None:  # config outputs: movie
            with atomic_path(frames_dir) as fdir:
                fdir.mkdir()
                info = render_shard(job, shard, segment=segment, frames_dir=fdir,
                                    png_times=png_times, workers=workers, series=series)
        if rows_path is None:  # config outputs: no table
            if recorded is not None:
                check_inputs(recorded, paths)
            log.info("shard %s: %d frames, no rows (outputs: movie)", shard.name,
                     info["frames"])
            return {**info, "rows": 0}
        state = {}
        if degradation and degradation[0]:
            state["degradation"] = read_degradation_state(*degradation)
        rows = ShardRows.for_series(table, cell_mean=np.load(cell_mean_npy), cells=cells,
                                    state=state)
        n_rows = 0
        max_bytes = MAX_BLOCK_CELLS * table.dtype.itemsize
        with contextlib.ExitStack() as stack:
            rtmp = stack.enter_context(atomic_path(rows_path))
            fh = stack.enter_context(open_copy_writer(rtmp, cells.compression,
                                                      cells.compression_level))
            if table_paths:
                from ncreel.cells.normalised import NormalisedRows

                split = NormalisedRows(rows)
                ctmp, stmp = (stack.enter_context(atomic_path(table_paths[k]))
                              for k in ("cells", "steps"))
                steps_fh = stack.enter_context(open_copy_writer(
                    stmp, cells.compression, cells.compression_level))
            progress = Progress(shard.n_frames, f"shard {shard.name} rows", unit="time steps")
            for t0, block in table.iter_blocks(shard.start, shard.stop, max_bytes):
                n_rows += (split.write(fh, steps_fh, t0, block) if table_paths
                           else rows.write(fh, t0, block))
                progress.update(t0 + block.shape[0] - shard.start, rows_written=n_rows)
            if table_paths:
                with open_copy_writer(ctmp, cells.compression, cells.compression_level) as cfh:
                    split.finish(cfh)
            if recorded is not None:
                check_inputs(recorded, paths)
    log.info("shard %s: %d rows; %d frames (%d PNG) by %d worker(s) in %.1f s, %.1f frames/s "
             "drawn, worker peak RSS %.0f MiB, encoder peak RSS %.0f MiB", shard.name, n_rows,
             info["frames"], info["pngs"], info["workers"], info["wall_s"],
             info["frames"] / max(info["render_s"], 1e-9), info["maxrss_mb"],
             info["encoder_maxrss_mb"])
    return {**info, "rows": n_rows}

