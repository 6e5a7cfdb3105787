"""Benchmark of the ``geom`` column writer; ends with one ``key=value`` line per figure.

Writes the ``field`` model's COPY rows with ``cells.geometry: text`` for a global
rectilinear grid stored with 0…360 longitudes, one column centred on the antimeridian
(those cells are split), and
reports rows/s of :meth:`ncreel.cells.ShardRows.write` with and without the geometry
column, and the geometry's share of the time.

``--smoke`` runs a 1° grid (65 000 rows) in about a second; the default is a 0.25° grid
(1 036 800 cells) for ``--steps`` steps.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))


def _write_grid(path: Path, res: float, steps: int) -> None:
    import numpy as np
    import xarray as xr

    lat = np.arange(-90 + res / 2, 90, res)
    # 0…360 with a column of cells centred on 180: those cells cross the antimeridian.
    lon = np.arange(0.0, 360.0, res)
    rng = np.random.default_rng(0)
    data = rng.normal(280, 10, (steps, lat.size, lon.size)).astype(np.float32)
    xr.Dataset({"tas": (("time", "lat", "lon"), data, {"units": "K"})},
               coords={"time": ("time", np.arange(steps, dtype=float),
                                {"units": "days since 2000-01-01", "calendar": "standard"}),
                       "lat": ("lat", lat, {"units": "degrees_north"}),
                       "lon": ("lon", lon, {"units": "degrees_east"})}).to_netcdf(path)


def _rate(path: Path, geometry: str, repeats: int) -> tuple[float, float, int]:
    import numpy as np
    from ncreel.cells import ShardRows, cells_settings
    from ncreel.config.settings import CellsSettings
    from ncreel.input.source import open_series

    with open_series([str(path)], "tas") as s:
        block = s.read(0, s.n_time)
        cells = CellsSettings(**cells_settings({"geometry": geometry}))
        rows = ShardRows.for_series(s, cell_mean=np.nanmean(block, axis=0), cells=cells)
        best, cpu, n, size = float("inf"), float("inf"), 0, 0
        for _ in range(repeats):
            fh = io.BytesIO()
            t, c = time.perf_counter(), time.process_time()
            n = rows.write(fh, 0, block)
            best = min(best, time.perf_counter() - t)
            cpu = min(cpu, time.process_time() - c)  # all threads: steadier on a busy machine
            size = fh.tell()
    return n / best, n / cpu, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--res", type=float, default=0.25, help="grid spacing, degrees")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="1 degree, 1 step, 1 repeat")
    a = ap.parse_args()
    if a.smoke:
        a.res, a.steps, a.repeats = 1.0, 1, 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "grid.nc"
        _write_grid(path, a.res, a.steps)
        plain, plain_cpu, plain_bytes = _rate(path, "none", a.repeats)
        geom, geom_cpu, geom_bytes = _rate(path, "text", a.repeats)
    rows = int(round(180 / a.res) * round(360 / a.res) * a.steps)
    print(f"rows={rows}")
    print(f"rows_per_s_no_geometry={plain:.0f}")
    print(f"rows_per_s_geometry_text={geom:.0f}")
    print(f"rows_per_cpu_s_no_geometry={plain_cpu:.0f}")
    print(f"rows_per_cpu_s_geometry_text={geom_cpu:.0f}")
    print(f"bytes_per_row_geometry_text={geom_bytes / rows:.1f}")
    print(f"geometry_bytes_per_row={(geom_bytes - plain_bytes) / rows:.1f}")
    print(f"geometry_slowdown={plain / geom:.2f}")


if __name__ == "__main__":
    main()
