"""An ERA5-like NetCDF-4 file: hourly 2 m temperature on the 0.25° global grid, zlib.

The layout of the reanalysis files scientists keep on scratch: ``t2m`` float32 on
``(time, latitude, longitude)`` = (n, 721, 1440), latitude 90 → −90, longitude 0 → 359.75,
time in hours since 1900-01-01, deflate level 1 with shuffle, chunked one step per chunk
(``--chunks step``) or one day per chunk (``--chunks day``, 24 steps). The field is smooth
in space and time (a latitude profile, a diurnal wave moving west, large-scale weather from
upsampled noise) so that it compresses about as real 2 m temperature does.

    python bench/era5like.py OUT.nc --steps 48 --chunks day
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def era5like_field(n_steps: int, ny: int, nx: int, *, seed: int = 0):
    """Yield the field one hourly step at a time, shape (ny, nx), float32, K."""
    lat = np.linspace(90, -90, ny)
    lon = np.linspace(0, 360, nx, endpoint=False)
    rng = np.random.default_rng(seed)
    base = (300 - 50 * np.sin(np.deg2rad(lat)) ** 2)[:, None]
    # Weather: coarse noise (about 10° cells) interpolated to the grid, drifting east.
    coarse = rng.normal(0, 4, (19, 37))
    yi = np.linspace(0, 18, ny)
    xi = np.linspace(0, 36, nx)
    y0 = np.minimum(yi.astype(int), 17)
    x0 = np.minimum(xi.astype(int), 35)
    fy, fx = (yi - y0)[:, None], (xi - x0)[None, :]
    weather = ((1 - fy) * (1 - fx) * coarse[y0][:, x0] + fy * (1 - fx) * coarse[y0 + 1][:, x0]
               + (1 - fy) * fx * coarse[y0][:, x0 + 1] + fy * fx * coarse[y0 + 1][:, x0 + 1])
    for t in range(n_steps):
        diurnal = 6 * np.cos(np.deg2rad(lon[None, :] + 15 * t))
        shift = (t * nx) // 480  # the weather moves 0.75° an hour
        yield (base + diurnal * np.cos(np.deg2rad(lat))[:, None]
               + np.roll(weather, shift, axis=1)).astype(np.float32)


def make_era5like(path: str | Path, n_steps: int, *, chunks: str | int = "step", ny: int = 721,
                  nx: int = 1440, complevel: int = 1) -> Path:
    """Write the ERA5-like file; return its path.

    Parameters
    ----------
    path : path
        Output NetCDF-4 file (overwritten).
    n_steps : int
        Hourly steps from 2000-01-01T00.
    chunks : {"step", "day"} or int
        Time chunk of ``t2m``: 1 step, 24 steps, or that many (the whole spatial field
        either way).
    ny, nx : int
        Grid size (721 × 1440 is ERA5's 0.25° grid; smaller for tests).
    complevel : int
        zlib level (ERA5 copies on disk commonly use 1).
    """
    import netCDF4

    path = Path(path)
    tchunk = {"step": 1, "day": 24}.get(chunks, chunks)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("time", n_steps)
        ds.createDimension("latitude", ny)
        ds.createDimension("longitude", nx)
        t = ds.createVariable("time", "i4", ("time",))
        t.units, t.calendar, t.standard_name = "hours since 1900-01-01 00:00:00.0", \
            "gregorian", "time"
        t[:] = 876576 + np.arange(n_steps)  # 2000-01-01T00
        la = ds.createVariable("latitude", "f4", ("latitude",))
        la.units, la.standard_name = "degrees_north", "latitude"
        la[:] = np.linspace(90, -90, ny)
        lo = ds.createVariable("longitude", "f4", ("longitude",))
        lo.units, lo.standard_name = "degrees_east", "longitude"
        lo[:] = np.linspace(0, 360, nx, endpoint=False)
        v = ds.createVariable("t2m", "f4", ("time", "latitude", "longitude"), zlib=True,
                              complevel=complevel, shuffle=True,
                              chunksizes=(min(tchunk, n_steps), ny, nx))
        v.units, v.long_name, v.standard_name = "K", "2 metre temperature", "air_temperature"
        block = []
        for i, field in enumerate(era5like_field(n_steps, ny, nx)):
            block.append(field)
            if len(block) == tchunk or i == n_steps - 1:  # whole chunks per write
                v[i + 1 - len(block):i + 1] = np.stack(block)
                block = []
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=48)
    ap.add_argument("--chunks", choices=["step", "day"], default="step")
    ap.add_argument("--grid", default="721x1440", help="NYxNX")
    args = ap.parse_args()
    ny, nx = map(int, args.grid.split("x"))
    print(make_era5like(args.out, args.steps, chunks=args.chunks, ny=ny, nx=nx))


if __name__ == "__main__":
    main()
