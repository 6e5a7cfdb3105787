"""One shard job: read a time slice once, render its frames and stream its cell rows."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping

import numpy as np

from ncreel.cells import ShardRows, cells_settings
from ncreel.io import atomic_path
from ncreel.pgcopy import open_copy_writer
from ncreel.render import FrameRenderer
from ncreel.shards import Shard, frame_name
from ncreel.source import Series

log = logging.getLogger(__name__)

#: Bound on cells in one block (time steps x cells): keeps row columns ~100 MB at most.
MAX_BLOCK_CELLS = 1_000_000


def run_shard(series: Series, shard: Shard, *, stats_json: str | os.PathLike,
              cell_mean_npy: str | os.PathLike, frames_dir: str | os.PathLike,
              rows_path: str | os.PathLike, render: Mapping, cells: Mapping | None = None) -> dict:
    """Render the frames and write the COPY rows of time steps ``shard.start:shard.stop``.

    The shard is read in blocks of at most ``MAX_BLOCK_CELLS`` values, each used for both
    outputs and then dropped, so peak memory does not grow with the shard's length.
    Both outputs are written under temporary names and renamed only when complete.

    Parameters
    ----------
    series : Series
        The opened input.
    shard : Shard
        Which time steps.
    stats_json, cell_mean_npy : path
        Outputs of the statistics rule (colour limits; per-cell means, shape (ny, nx)).
    frames_dir : path
        Directory to create, holding ``frame_<time_index>.png`` for each step.
    rows_path : path
        COPY text file of this shard's rows.
    render : mapping
        ``width``, ``height`` (pixels), ``dpi``, ``cmap``.
    cells : mapping, optional
        Cell-model settings from :func:`ncreel.cells.cells_settings` (default: ``field``
        model, no geometry, no compression).

    Returns
    -------
    dict
        ``frames`` and ``rows`` written.
    """
    stats = json.loads(open(stats_json).read())
    time = series.time_axis()
    lat, lon = series.cell_coordinates()
    cells = cells_settings(cells or {})
    rows = ShardRows.for_series(series, cell_mean=np.load(cell_mean_npy), cells=cells)
    x, y, xlabel, ylabel = _axes(series, lat, lon)
    renderer = FrameRenderer(
        shape=(series.ny, series.nx), width=render["width"], height=render["height"],
        dpi=render["dpi"], cmap=render["cmap"], vmin=stats["vmin"], vmax=stats["vmax"],
        x=x, y=y, title=f"{series.long_name} [{series.units}]" if series.units
        else series.long_name, xlabel=xlabel, ylabel=ylabel)
    n_rows = 0
    max_bytes = MAX_BLOCK_CELLS * series.dtype.itemsize
    with atomic_path(frames_dir) as fdir, atomic_path(rows_path) as rtmp, \
            open_copy_writer(rtmp, cells["compression"], cells["compression_level"]) as fh:
        fdir.mkdir()
        for t0, block in series.iter_blocks(shard.start, shard.stop, max_bytes):
            n_rows += rows.write(fh, t0, block)
            for i in range(block.shape[0]):
                t = t0 + i
                label = (time.labels[t] if time.decoded
                         else f"{series.time_dim} = {time.values[t]:g}")
                renderer.render(block[i], label, fdir / frame_name(t))
    renderer.close()
    log.info("shard %s: %d frames, %d rows", shard.name, shard.n_frames, n_rows)
    return {"frames": shard.n_frames, "rows": n_rows}


def _axes(series: Series, lat, lon):
    ds = series._dataset(0)
    if lat is not None and lon is not None:
        return lon, lat, "longitude [degrees_east]", "latitude [degrees_north]"
    x = ds[series.x_dim].values if series.x_dim in ds.variables else None
    y = ds[series.y_dim].values if series.y_dim in ds.variables else None
    return x, y, series.x_dim, series.y_dim
