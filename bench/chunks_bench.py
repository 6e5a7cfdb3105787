"""Reading an ERA5-like file in day chunks against per-step chunks, as a run's passes read.

Writes the ERA5-like 2 m temperature of ``bench/era5like.py`` (721 x 1440, float32, zlib)
twice: in per-step chunks (1, 721, 1440) and in day chunks (24, 721, 1440). Each file is
then read as the jobs read it (:class:`ncreel.input.source.Series`): the frames one step
at a time (a shard's render pass on this grid), the rows pass in its blocks
(``MAX_BLOCK_CELLS`` values) and the statistics job's two passes. The day-chunked file is
read twice: with the chunk held between reads (today), and with nothing held
(``MAX_HELD_BYTES = 0``: each read decodes its chunk again, as NetCDF files were read
before). Every figure is measured in this run, on this machine; the ratios are the
figures. Ends with ``key=value`` lines.

    .venv/bin/python bench/chunks_bench.py [--steps 48] [--smoke]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from era5like import make_era5like  # noqa: E402
from ncreel.input import chunking  # noqa: E402
from ncreel.input.source import MAX_BLOCK_CELLS, open_series  # noqa: E402
from ncreel.jobs.stats import series_statistics  # noqa: E402


def passes(path: Path) -> dict:
    """Seconds of the frames pass, the rows pass and the statistics job's two passes."""
    out = {}
    with open_series(str(path), "t2m") as s:
        t0 = time.perf_counter()
        for t in range(s.n_time):
            s.read(t, t + 1)
        out["frames"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in s.iter_blocks(0, s.n_time, MAX_BLOCK_CELLS * s.dtype.itemsize):
            pass
        out["rows"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        series_statistics(s)
        out["stats"] = time.perf_counter() - t0
        out["held_mb"] = s.held_chunk_bytes() / 2**20
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: every phase runs")
    args = ap.parse_args(argv)
    ny, nx, steps, day = (721, 1440, args.steps, 24) if not args.smoke else (31, 60, 12, 4)
    with tempfile.TemporaryDirectory(prefix="ncreel-chunks-") as tmp:
        step_file = make_era5like(Path(tmp) / "step.nc", steps, chunks=1, ny=ny, nx=nx)
        day_file = make_era5like(Path(tmp) / "day.nc", steps, chunks=day, ny=ny, nx=nx)
        step = passes(step_file)
        held = passes(day_file)
        bound = chunking.MAX_HELD_BYTES
        chunking.MAX_HELD_BYTES = 0  # nothing held: each read decodes its chunk again
        try:
            unheld = passes(day_file)
        finally:
            chunking.MAX_HELD_BYTES = bound
    print(f"# {steps} steps of {ny} x {nx} float32, zlib; day chunks of {day} steps")
    for name in ("frames", "rows", "stats"):
        base = max(step[name], 1e-9)
        print(f"read_{name}_s_step_chunks={step[name]:.3f}")
        print(f"read_{name}_s_day_chunks={held[name]:.3f}")
        print(f"read_{name}_s_day_chunks_unheld={unheld[name]:.3f}")
        print(f"read_{name}_day_vs_step_chunks={held[name] / base:.3f}")
        print(f"read_{name}_day_unheld_vs_step_chunks={unheld[name] / base:.3f}")
    print(f"held_chunk_mb_day_chunks={held['held_mb']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
