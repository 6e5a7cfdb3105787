"""Memory and runtime each job declares to Snakemake (``resources: mem_mb, runtime``).

Estimates are deliberately simple, explicit formulas; each grows linearly with Snakemake's
``attempt`` so that a job killed for memory is retried asking for more.
"""

from __future__ import annotations

import math

#: Resident memory of a Python process with numpy, xarray, netCDF4 and matplotlib imported.
BASE_MB = 250


def render_mem_mb(*, width: int, height: int, ny: int, nx: int, attempt: int = 1,
                  max_block_cells: int = 1_000_000) -> int:
    """``mem_mb`` of one ``render_shard`` job.

    Peak = interpreter and libraries (``BASE_MB``) + Agg canvas and PNG encoding
    (about 12 bytes per pixel: RGBA buffer, its copy for the PNG writer and the mesh) +
    one block of at most `max_block_cells` values and its row columns (about 120 bytes per
    value: float, mask, indices, 8 columns and their formatted text) + the grid's per-cell
    arrays (mean, lat, lon, mesh: about 48 bytes per cell). It does not depend on the
    number of frames in the shard, because the shard is streamed block by block.

    Parameters
    ----------
    width, height : int
        Frame size in pixels.
    ny, nx : int
        Grid size.
    attempt : int
        Snakemake's attempt counter (1 on the first try).
    max_block_cells : int
        Bound on values held at once (see :data:`ncreel.shardjob.MAX_BLOCK_CELLS`).

    Returns
    -------
    int
        Megabytes, times `attempt`.
    """
    cells = ny * nx
    block = max(max_block_cells, cells)  # a block always holds at least one whole time step
    est = BASE_MB + (width * height * 12 + block * 120 + cells * 48) / 1e6
    return int(math.ceil(est * 1.5 / 50) * 50) * max(int(attempt), 1)


def statistics_mem_mb(*, ny: int, nx: int, attempt: int = 1,
                      max_block_bytes: int = 64 * 2**20) -> int:
    """``mem_mb`` of the statistics job: one block, its mask, and (ny, nx) accumulators."""
    est = BASE_MB + (3 * max_block_bytes + ny * nx * 40) / 1e6
    return int(math.ceil(est * 1.5 / 50) * 50) * max(int(attempt), 1)


def runtime_minutes(n_frames: int, seconds_per_frame: float = 0.5, attempt: int = 1) -> int:
    """Walltime (``runtime`` resource, minutes) for `n_frames` frames, with a 5-minute floor."""
    return max(5, int(math.ceil(n_frames * seconds_per_frame * 2 / 60))) * max(int(attempt), 1)
