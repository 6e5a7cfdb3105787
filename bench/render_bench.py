"""Benchmark ncreel's render path against xmovie 0.3.1 and matplotlib's FFMpegWriter.

Same data (the real HadCM3 sample, 37 x 49 cells), same frame size (1920 x 1080 at dpi 200)
and identical encoder settings (libx264, crf 18, preset medium, yuv420p, even padding) for
every end-to-end case. Each case runs in its own child process so that its peak resident
memory (``getrusage``: the child itself, and separately its ffmpeg) is its own.

    python bench/render_bench.py [--frames 240] [--long-frames 2000] [--big-frames 40]
    python bench/render_bench.py --smoke     # tiny sizes, seconds: checks that it runs

The map cases draw a synthetic 0.25 degree global field (721 x 1440, PlateCarree and
Robinson, with coastlines), a curvilinear 1000 x 1400 grid (2-D latitude/longitude) and
a CORDEX EUR-11-sized rotated-pole grid (412 x 424, a NetCDF file with a CF grid mapping,
through the workflow's own open and renderer set-up) at the same frame size; xmovie
draws the 0.25 degree field too (8 frames: it is slow).

    python bench/render_bench.py --only map_rotated_pole   # one map case, its lines only

Prints a table, then one ``key=value`` line per figure for scripts. The map cases' and
xmovie's 0.25 degree frames/s are one over the median frame time (each frame timed), the
other cases' frames over total seconds; ``render_cpu_*`` lines use CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

W, H, DPI = 1920, 1080, 200
ENC = {"fps": 12, "crf": 18, "preset": "medium"}
#: Grid of the map cases: 0.25 degree global, and a curvilinear ocean-model-like grid.
BIG = (721, 1440)
CURVI = (1000, 1400)
#: CORDEX EUR-11's rotated grid: 412 x 424 cells of 0.11 degrees, pole 39.25 N 162 W.
ROTATED = (412, 424)


def _smoke():
    # --smoke: the same code paths at sizes that take seconds (the CI test runs it).
    global W, H, DPI, BIG, CURVI, ROTATED, MESH_CELLS
    W, H, DPI, BIG, CURVI, ROTATED = 320, 180, 40, (73, 144), (50, 70), (41, 42)
    MESH_CELLS = 2562  # MPAS's 480 km mesh


def _usage():
    # VmHWM, not ru_maxrss: a child's ru_maxrss includes the image it was forked from
    # (this benchmark's parent, or a worker for ffmpeg), see ncreel.core.procmem.
    from ncreel.core.procmem import peak_rss_mb

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"rss_mb": peak_rss_mb(), "cpu_s": own.ru_utime + own.ru_stime,
            "children_cpu_s": kids.ru_utime + kids.ru_stime}


def _sample(n, path):
    """Write `n` steps of the real sample (tiled in time when n > 240) to `path`."""
    import numpy as np
    import xarray as xr
    from ncreel.sample import sample_path

    src = xr.open_dataset(sample_path(), decode_times=False)
    da = src["air_temperature"]
    reps = -(-n // da.sizes["time"])
    tiled = xr.concat([da] * reps, dim="time").isel(time=slice(0, n))
    tiled = tiled.assign_coords(time=("time", np.arange(n, dtype=float) * 360.0,
                                      {"units": "days since 1860-01-01",
                                       "calendar": "360_day"}))
    tiled.to_dataset(name="air_temperature").to_netcdf(path)
    return path


def _job(path, variable, *, preset, vmin, vmax):
    """Build the FrameJob a shard job of `path` gets (map settings: the config defaults)."""
    from ncreel.config.settings import EncodeSettings, RenderSettings, SeriesSelection
    from ncreel.render.segment import FrameJob

    return FrameJob(
        series=SeriesSelection(paths=(str(path),), variable=variable, time_dim="time",
                               select={}, lat=None, lon=None, time=None),
        render=RenderSettings(width=W, height=H, dpi=DPI, cmap="viridis", map=_map(
            "PlateCarree")),
        encode=EncodeSettings(**{**ENC, "preset": preset}), vmin=vmin, vmax=vmax)


def _map(projection):
    from ncreel.config.settings import MapSettings

    return MapSettings(coastlines=None, borders=False, projection=projection,
                       projection_params={})


def _spec(path, preset=ENC["preset"]):
    return _job(path, "air_temperature", preset=preset, vmin=260.0, vmax=300.0)


def case_ncreel_render(nc, n, tmp):
    """Raw frames from the blitted, reused figure (one process, one core)."""
    from ncreel.input.source import open_series
    from ncreel.render.segment import make_renderer

    with open_series(str(nc), "air_temperature") as s:
        data = s.read(0, n)
        r = make_renderer(s, _spec(nc).render, vmin=260.0, vmax=300.0)
        r.draw(data[0], "warm-up")
        t, c = time.perf_counter(), time.process_time()
        for i in range(n):
            r.draw(data[i], f"step {i}")
        return {"seconds": time.perf_counter() - t, "frames": n,
                "cpu_seconds": time.process_time() - c}


def case_ncreel_png(nc, n, tmp):
    """Blitted frames, each also written as PNG (zlib 6, as savefig): the PNG-path cap."""
    from ncreel.input.source import open_series
    from ncreel.render.segment import make_renderer

    with open_series(str(nc), "air_temperature") as s:
        data = s.read(0, n)
        r = make_renderer(s, _spec(nc).render, vmin=260.0, vmax=300.0)
        t = time.perf_counter()
        for i in range(n):
            r.draw(data[i], f"step {i}")
            r.save_png(Path(tmp) / f"f{i:05d}.png")
        return {"seconds": time.perf_counter() - t, "frames": n}


def case_ncreel_e2e(nc, n, tmp):
    """Run the workflow's path: 2 worker processes, raw RGBA into one ffmpeg each.

    Part segments joined with -c copy, then the movie's concat with +faststart.
    """
    from ncreel.render.movie import concat_segments
    from ncreel.render.segment import render_shard
    from ncreel.run.shardplan import Shard

    t = time.perf_counter()
    info = render_shard(_spec(nc), Shard(0, 0, n), segment=Path(tmp) / "seg.mp4",
                        workers=int(os.environ.get("BENCH_WORKERS", "2")))
    concat_segments([Path(tmp) / "seg.mp4"], Path(tmp) / "movie.mp4")
    return {"seconds": time.perf_counter() - t, "frames": n, "info": info,
            "movie": str(Path(tmp) / "movie.mp4")}


def case_ncreel_shard(nc, n, tmp):
    """Render one single-worker shard of `n` frames.

    Preset ultrafast keeps 2000 frames short: the encoder is a separate process, and this
    case measures the render worker's memory.
    """
    from ncreel.render.segment import render_shard
    from ncreel.run.shardplan import Shard

    t = time.perf_counter()
    info = render_shard(_spec(nc, preset="ultrafast"), Shard(0, 0, n),
                        segment=Path(tmp) / "seg.mp4", workers=1)
    return {"seconds": time.perf_counter() - t, "frames": n, "info": info}


def _xmovie(nc, n):
    import warnings

    import xarray as xr

    warnings.filterwarnings("ignore")
    from xmovie import Movie

    da = xr.open_dataset(nc, decode_times=False)["air_temperature"].isel(time=slice(0, n))
    return Movie(da.load(), pixelwidth=W, pixelheight=H, dpi=DPI, vmin=260, vmax=300)


def case_xmovie_frames(nc, n, tmp):
    """Run xmovie 0.3.1 save_frames_serial: a new figure per frame, PNG each."""
    mov = _xmovie(nc, n)
    t, c = time.perf_counter(), time.process_time()
    mov.save_frames_serial(tmp)
    return {"seconds": time.perf_counter() - t, "frames": n,
            "cpu_seconds": time.process_time() - c}


def case_xmovie_e2e(nc, n, tmp):
    """Run xmovie frames, then the same encoder settings (PNGs piped to ffmpeg)."""
    import glob

    from ncreel.render.movie import encode_movie

    mov = _xmovie(nc, n)
    t = time.perf_counter()
    mov.save_frames_serial(tmp)
    t_frames = time.perf_counter() - t
    frames = sorted(glob.glob(os.path.join(tmp, "frame_*.png")))
    encode_movie(frames, Path(tmp) / "movie.mp4", **ENC)
    return {"seconds": time.perf_counter() - t, "frames_seconds": t_frames, "frames": n,
            "movie": str(Path(tmp) / "movie.mp4")}


def case_ffmpegwriter_e2e(nc, n, tmp):
    """Run matplotlib.animation.FFMpegWriter with the same encoder settings.

    Reused figure, full draw per frame, raw RGBA piped to one ffmpeg.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.animation import FFMpegWriter
    from ncreel.input.source import open_series

    with open_series(str(nc), "air_temperature") as s:
        data = s.read(0, n)
        lat, lon = s.cell_coordinates()
    fig, ax = plt.subplots(figsize=(W / DPI, H / DPI), dpi=DPI, layout="constrained")
    mesh = ax.pcolormesh(lon[0], lat[:, 0], data[0], vmin=260, vmax=300, shading="auto")
    fig.colorbar(mesh, ax=ax)
    label = ax.set_title("")
    writer = FFMpegWriter(fps=ENC["fps"], codec="libx264",
                          extra_args=["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",
                                      "-preset", ENC["preset"], "-crf", str(ENC["crf"]),
                                      "-pix_fmt", "yuv420p"])
    t = time.perf_counter()
    with writer.saving(fig, str(Path(tmp) / "movie.mp4"), dpi=DPI):
        for i in range(n):
            mesh.set_array(np.ma.masked_invalid(data[i]))
            label.set_text(f"step {i}")
            writer.grab_frame()
    return {"seconds": time.perf_counter() - t, "frames": n}


def _big_coords():
    import numpy as np

    ny, nx = BIG
    return np.linspace(-90, 90, ny), np.linspace(-180, 180, nx, endpoint=False)


def _big_fields(n, shape=None, *, lat=None, lon=None):
    """`n` frames of a smooth synthetic field (K-like values 250-300) with weather-like noise."""
    import numpy as np

    if lat is None:
        lat, lon = _big_coords()
        lon, lat = np.meshgrid(lon, lat)
    rng = np.random.default_rng(0)
    base = 275 + 25 * np.cos(np.deg2rad(lat))
    out = np.empty((n, *lat.shape), np.float32)
    for t in range(n):
        out[t] = base + 8 * np.sin(np.deg2rad(3 * lon + 15 * t)) * np.cos(np.deg2rad(2 * lat)) \
            + rng.normal(scale=1.0, size=lat.shape)
    return out


def _curvi_coords():
    import numpy as np

    ny, nx = CURVI
    j, i = np.mgrid[0:ny, 0:nx]
    # A rotated, bent North-Atlantic grid, ~1/25 degree, longitude decreasing along rows'
    # tilt: 2-D coordinates as a curvilinear ocean model writes them.
    lon = -80 + 60 * i / nx + 8 * (j / ny) ** 2
    lat = 5 + 55 * j / ny - 6 * np.sin(np.pi * i / nx)
    return lat, lon


def _map_renderer(kind, *, blit=True):
    import numpy as np
    from ncreel.render.frame import FrameRenderer
    from ncreel.render.segment import map_settings

    if kind == "curvilinear":
        lat, lon = _curvi_coords()
        x, y, shape = lon, lat, CURVI
        data = _big_fields(4, lat=lat, lon=lon)
    else:
        y, x = _big_coords()
        shape = BIG
        lon2, lat2 = np.meshgrid(x, y)
        data = _big_fields(4, lat=lat2, lon=lon2)
    proj = {"robinson": "Robinson"}.get(kind, "PlateCarree")
    projection, features = map_settings(_map(proj), lon=x, lat=y)
    r = FrameRenderer(shape=shape, width=W, height=H, dpi=DPI, cmap="viridis", vmin=255.0,
                      vmax=300.0, x=x, y=y, title="synthetic tas [K]", blit=blit,
                      projection=projection, features=features)
    return r, data


def _rotated_pole_nc(path, n=4):
    """Write a EUR-11-sized rotated-pole file (`n` steps of a synthetic field, CF mapping)."""
    import numpy as np
    import xarray as xr
    from ncreel.input.gridmap import GridMapping

    ny, nx = ROTATED
    step = 0.11 * 424 / nx  # the same domain at smoke sizes
    rlat = -23.375 + step * np.arange(ny)
    rlon = -28.375 + step * np.arange(nx)
    gm = {"grid_mapping_name": "rotated_latitude_longitude",
          "grid_north_pole_latitude": 39.25, "grid_north_pole_longitude": -162.0}
    from pyproj import CRS

    lon, lat = GridMapping("rotated_pole", CRS.from_cf(gm).to_wkt()).to_lonlat(
        *np.meshgrid(rlon, rlat))
    xr.Dataset(
        {"tas": (("time", "rlat", "rlon"), _big_fields(n, lat=lat, lon=lon),
                 {"units": "K", "grid_mapping": "rotated_pole"}),
         "rotated_pole": ((), np.int32(0), gm)},
        coords={"time": ("time", np.arange(n, dtype=float), {"units": "hours since 2000-01-01"}),
                "rlat": ("rlat", rlat, {"standard_name": "grid_latitude", "units": "degrees"}),
                "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees"})},
    ).to_netcdf(path)
    return path


def _rotated_renderer(tmp, *, blit=True):
    from ncreel.config.settings import RenderSettings
    from ncreel.input.source import open_series
    from ncreel.render.segment import make_renderer

    with open_series(str(_rotated_pole_nc(Path(tmp) / "eur11.nc")), "tas") as s:
        data = s.read(0, s.n_time)
        settings = RenderSettings(width=W, height=H, dpi=DPI, cmap="viridis",
                                  map=_map("PlateCarree"))
        return make_renderer(s, settings, vmin=255.0, vmax=300.0, blit=blit), data


def _map_fps(kind, n, tmp=None):
    t0 = time.perf_counter()
    r, data = _rotated_renderer(tmp) if kind == "rotated_pole" else _map_renderer(kind)
    startup = time.perf_counter() - t0
    r.draw(data[0], "warm-up")
    t, c = time.perf_counter(), time.process_time()
    frame_s = []
    for i in range(n):
        t1 = time.perf_counter()
        r.draw(data[i % len(data)], f"step {i}")
        frame_s.append(time.perf_counter() - t1)
    return {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c,
            "frames": n, "startup_s": startup, "frame_seconds": frame_s}


def case_map_0p25deg(nc, n, tmp):
    """Index-image frames of the 0.25 degree global field, PlateCarree + coastlines."""
    return _map_fps("platecarree", n)


def case_map_0p25deg_robinson(nc, n, tmp):
    """Index-image frames of the 0.25 degree global field, Robinson + coastlines."""
    return _map_fps("robinson", n)


def case_map_curvilinear(nc, n, tmp):
    """Index-image frames of the curvilinear grid (2-D lat/lon), PlateCarree + coastlines."""
    return _map_fps("curvilinear", n)


def case_map_rotated_pole(nc, n, tmp):
    """Index-image frames of the EUR-11-sized rotated-pole file, PlateCarree + coastlines."""
    return _map_fps("rotated_pole", n, tmp)


def case_map_exactness(nc, n, tmp):
    """Index path vs a full pcolormesh redraw: share of map pixels differing, and by how much."""
    from ncreel.render.frame import frame_difference

    out = {"frames": 1, "seconds": 0.0}
    for kind in ("platecarree", "robinson", "curvilinear"):
        fast, data = _map_renderer(kind)
        full, _ = _map_renderer(kind, blit=False)
        a = fast.draw(data[1], "x").copy()
        b = full.draw(data[1], "x").copy()
        d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
        inner = frame_difference(a, b, area=fast.interior(), tolerance=fast.level_step())
        out[kind] = {**d, "share_beyond_interior": inner["share_beyond"]}
    fast, data = _rotated_renderer(tmp)
    full, _ = _rotated_renderer(tmp, blit=False)
    a, b = fast.draw(data[1], "x").copy(), full.draw(data[1], "x").copy()
    d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
    inner = frame_difference(a, b, area=fast.interior(), tolerance=fast.level_step())
    out["rotated_pole"] = {**d, "share_beyond_interior": inner["share_beyond"]}
    return out


def case_demo_exactness(nc, n, tmp):
    """Index path vs a full pcolormesh redraw on the demo grid (HadCM3 sample, PlateCarree)."""
    from ncreel.input.source import open_series
    from ncreel.render.frame import frame_difference
    from ncreel.render.segment import make_renderer

    with open_series(str(nc), "air_temperature") as s:
        data = s.read(0, 2)
        fast = make_renderer(s, _spec(nc).render, vmin=260.0, vmax=300.0)
        full = make_renderer(s, _spec(nc).render, vmin=260.0, vmax=300.0, blit=False)
    a, b = fast.draw(data[1], "x").copy(), full.draw(data[1], "x").copy()
    d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
    inner = frame_difference(a, b, area=fast.interior(), tolerance=fast.level_step())
    return {"frames": 1, "seconds": 0.0, "demo": {**d,
                                                  "share_beyond_interior": inner["share_beyond"]}}


def case_xmovie_0p25deg(nc, n, tmp):
    """Run xmovie 0.3.1 save_frames_serial on the 0.25 degree field (same frame size)."""
    import warnings

    import xarray as xr

    warnings.filterwarnings("ignore")
    from xmovie import Movie

    lat, lon = _big_coords()
    da = xr.DataArray(_big_fields(n), dims=("time", "lat", "lon"),
                      coords={"lat": lat, "lon": lon}, name="tas")
    from xmovie.core import save_single_frame

    mov = Movie(da, pixelwidth=W, pixelheight=H, dpi=DPI, vmin=255, vmax=300)
    t, c = time.perf_counter(), time.process_time()
    frame_s = []
    # Movie.save_frames_serial's own loop, each frame timed.
    for i in range(n):
        t1 = time.perf_counter()
        fig, _, _ = mov.render_single_frame(i)
        save_single_frame(fig, i, odir=tmp, frame_pattern=mov.frame_pattern, dpi=mov.dpi)
        frame_s.append(time.perf_counter() - t1)
    return {"seconds": time.perf_counter() - t, "frames": n,
            "cpu_seconds": time.process_time() - c, "frame_seconds": frame_s}


def _panel_fields(n):
    """Four 0.25 degree fields (the synthetic one, shifted and scaled per panel), n frames."""
    base = _big_fields(n)
    return [base, base[::-1] + 2.0, base * 0.5 + 140.0, base - base.mean(axis=0)]


PANEL_LIMITS = [(255.0, 300.0), (257.0, 302.0), (267.5, 290.0), (-8.0, 8.0)]
PANEL_CMAPS = ["viridis", "magma", "cividis", "RdBu_r"]


def case_panels_2x2(nc, n, tmp):
    """Index-image frames of a 2 x 2 layout of four 0.25 degree fields, PlateCarree maps."""
    from ncreel.render.panels import Panel, PanelRenderer
    from ncreel.render.segment import map_settings

    y, x = _big_coords()
    data = _panel_fields(min(n, 4))
    t0 = time.perf_counter()
    projection, features = map_settings(_map("PlateCarree"), lon=x, lat=y)
    panels = [Panel(shape=BIG, x=x, y=y, cmap=c, vmin=lo, vmax=hi, title=f"field {i}",
                    units="K", projection=projection, features=features)
              for i, (c, (lo, hi)) in enumerate(zip(PANEL_CMAPS, PANEL_LIMITS, strict=True))]
    r = PanelRenderer(panels, width=W, height=H, dpi=DPI, time_labels=["step 000"])
    startup = time.perf_counter() - t0
    k = len(data[0])
    r.draw([d[0] for d in data], "warm-up")
    t, c = time.perf_counter(), time.process_time()
    frame_s = []
    for i in range(n):
        t1 = time.perf_counter()
        r.draw([d[i % k] for d in data], f"step {i:03d}")
        frame_s.append(time.perf_counter() - t1)
    return {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c,
            "frames": n, "startup_s": startup, "frame_seconds": frame_s}


def case_xmovie_panels_2x2(nc, n, tmp):
    """Draw the same four panels with xmovie 0.3.1 through a custom plot function.

    Plain axes (no cartopy): the cheapest way xmovie can draw them, so the ratio is a lower
    bound of ncreel's lead over xmovie drawing maps.
    """
    import warnings

    import xarray as xr

    warnings.filterwarnings("ignore")
    from xmovie import Movie
    from xmovie.core import save_single_frame

    lat, lon = _big_coords()
    ds = xr.Dataset({f"f{i}": (("time", "lat", "lon"), d)
                     for i, d in enumerate(_panel_fields(n))},
                    coords={"lat": lat, "lon": lon})

    def four_panels(ds, fig, tt, framedim="time", **kwargs):
        axes = fig.subplots(2, 2)
        for i, ax in enumerate(axes.flat):
            lo, hi = PANEL_LIMITS[i]
            pp = ax.pcolormesh(ds.lon, ds.lat, ds[f"f{i}"].isel({framedim: tt}).values,
                               cmap=PANEL_CMAPS[i], vmin=lo, vmax=hi)
            fig.colorbar(pp, ax=ax, label="K")
            ax.set_title(f"field {i}")
        fig.suptitle(f"step {tt:03d}")
        return ax, pp

    mov = Movie(ds, plotfunc=four_panels, input_check=False, pixelwidth=W, pixelheight=H,
                dpi=DPI)
    t, c = time.perf_counter(), time.process_time()
    frame_s = []
    for i in range(n):
        t1 = time.perf_counter()
        fig, _, _ = mov.render_single_frame(i)
        save_single_frame(fig, i, odir=tmp, frame_pattern=mov.frame_pattern, dpi=mov.dpi)
        frame_s.append(time.perf_counter() - t1)
    return {"seconds": time.perf_counter() - t, "frames": n,
            "cpu_seconds": time.process_time() - c, "frame_seconds": frame_s}


def panel_keys(*, frames: int, xmovie_frames: int, smoke: bool) -> dict:
    """``render_fps_panels_2x2`` and ``panels_speedup_vs_xmovie`` (median frame times)."""
    p = run("panels_2x2", "", frames, smoke)
    x = run("xmovie_panels_2x2", "", xmovie_frames, smoke)
    fps = 1 / statistics.median(p["frame_seconds"])
    xfps = 1 / statistics.median(x["frame_seconds"])
    print(f"# panels 2x2: four {BIG[0]}x{BIG[1]} fields at {W}x{H}; ncreel {frames} frames, "
          f"xmovie {xmovie_frames}; start-up {p['startup_s']:.1f} s")
    return {"render_fps_panels_2x2": fps, "render_fps_xmovie_panels_2x2": xfps,
            "panels_speedup_vs_xmovie": fps / xfps,
            "panels_cpu_speedup_vs_xmovie": ((x["cpu_seconds"] / x["frames"])
                                             / (p["cpu_seconds"] / p["frames"])),
            "render_startup_s_panels_2x2": p["startup_s"],
            "render_rss_mb_panels_2x2": p["rss_mb"]}


def _big_nc(n, path):
    """`n` steps of the synthetic 0.25 degree field as a CF NetCDF file."""
    import numpy as np
    import xarray as xr

    lat, lon = _big_coords()
    xr.Dataset({"tas": (("time", "lat", "lon"), _big_fields(n),
                        {"units": "K", "long_name": "synthetic air temperature"})},
               coords={"time": ("time", np.arange(n, dtype=float),
                                {"units": "hours since 2000-01-01", "calendar": "standard"}),
                       "lat": ("lat", lat, {"units": "degrees_north"}),
                       "lon": ("lon", lon, {"units": "degrees_east"})}).to_netcdf(path)
    return path


def _big_spec(nc):
    # Shard spec of the 0.25 degree file (preset ultrafast: these cases measure the worker).
    return _job(nc, "tas", preset="ultrafast", vmin=255.0, vmax=300.0)


def case_big_shard(nc, n, tmp):
    """One single-worker shard of the 0.25 degree file: the worker's peak memory."""
    from ncreel.render.segment import render_shard
    from ncreel.run.shardplan import Shard

    spec = _big_spec(nc)
    t = time.perf_counter()
    info = render_shard(spec, Shard(0, 0, n), segment=Path(tmp) / "seg.mp4", workers=1)
    return {"seconds": time.perf_counter() - t, "frames": n, "info": info}


def case_big_calibrate(nc, n, tmp):
    """calibrate_render on the 0.25 degree file: the mem_mb a process_shard job declares."""
    from ncreel.render.calibrate import calibrate_render
    from ncreel.run.resources import render_mem_mb_calibrated

    spec = _big_spec(nc)
    t = time.perf_counter()
    cal = calibrate_render(spec, n_time=n, probe_frames=n, frames_per_shard=n)
    return {"seconds": time.perf_counter() - t, "frames": n, "calibration": cal.to_params(),
            "mem_mb": render_mem_mb_calibrated(cal, ny=BIG[0], nx=BIG[1], n_frames=n)}


# Unstructured mesh cases ----------------------------------------------------------------
#: Cells of the MPAS-like mesh: 655 362, as MPAS's quasi-uniform 30 km mesh (x1.655362).
MESH_CELLS = 655_362
#: Where the mesh and its NetCDF file are kept between runs (building the mesh takes a while).
MESH_CACHE = Path(os.environ.get("NCREEL_BENCH_CACHE", ROOT / ".bench-cache"))


def _mesh_nc(n):
    """Write (once) an MPAS-like file of `n` steps on a Voronoi mesh of MESH_CELLS.

    The mesh is built by uxarray (``Grid.from_points(..., method="spherical_voronoi")`` on
    quasi-uniform Fibonacci points) and written as MPAS writes it (tests/meshes.py).
    Returns the path and the seconds spent building the mesh (0 when cached).
    """
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    from meshes import voronoi_mesh, write_mpas

    MESH_CACHE.mkdir(parents=True, exist_ok=True)
    mesh_file = MESH_CACHE / f"voronoi_{MESH_CELLS}.npz"
    build_s = 0.0
    if not mesh_file.exists():
        t = time.perf_counter()
        fn, node_lon, node_lat, lon, lat = voronoi_mesh(MESH_CELLS)
        build_s = time.perf_counter() - t
        np.savez(mesh_file, fn=fn.astype(np.int32), node_lon=node_lon, node_lat=node_lat,
                 lon=lon, lat=lat)
    path = MESH_CACHE / f"mpas_{MESH_CELLS}_{n}.nc"
    if not path.exists():
        z = np.load(mesh_file)
        mesh = (z["fn"].astype(np.int64), z["node_lon"], z["node_lat"], z["lon"], z["lat"])
        write_mpas(path.with_suffix(".tmp"), mesh, nt=n)
        path.with_suffix(".tmp").rename(path)
    return path, build_s


def _mesh_job(nc):
    import dataclasses

    job = _job(nc, "temperature", preset="ultrafast", vmin=255.0, vmax=305.0)
    return dataclasses.replace(job, series=dataclasses.replace(job.series, time_dim="Time"))


def case_mesh_render(nc, n, tmp):
    """Index-image frames of the MPAS-like mesh (PlateCarree + coastlines), each timed."""
    from ncreel.region.selection import open_selection
    from ncreel.render.segment import make_renderer

    job = _mesh_job(nc)
    t0 = time.perf_counter()
    with open_selection(job.series) as s:
        open_s = time.perf_counter() - t0
        r = make_renderer(s, job.render, vmin=job.vmin, vmax=job.vmax)
        startup = time.perf_counter() - t0
        data = s.read(0, min(n, s.n_time, 8))
    r.draw(data[0], "warm-up")
    r.save_png(Path(tmp) / "mesh.png")
    t, c = time.perf_counter(), time.process_time()
    frame_s = []
    for i in range(n):
        t1 = time.perf_counter()
        r.draw(data[i % len(data)], f"step {i}")
        frame_s.append(time.perf_counter() - t1)
    return {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c,
            "frames": n, "startup_s": startup, "open_s": open_s, "frame_seconds": frame_s}


def case_uxarray_mesh(nc, n, tmp):
    """Plot the same field as uxarray does: to_polycollection + savefig per frame."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import cartopy.crs as ccrs
    import matplotlib.pyplot as plt
    import uxarray as ux

    warnings.filterwarnings("ignore")
    uxds = ux.open_dataset(nc, nc)
    da = uxds["temperature"]
    frame_s = []
    t, c = time.perf_counter(), time.process_time()
    for i in range(n + 1):  # the first builds (and caches) the polygons: not counted
        t1 = time.perf_counter()
        pc = da.isel(Time=i % da.sizes["Time"]).to_polycollection()
        pc.set_cmap("viridis")
        pc.set_clim(255.0, 305.0)
        pc.set_antialiased(False)
        # uxarray's polygons carry a cartopy transform: a GeoAxes (no coastlines: cartopy
        # would download them).
        fig, ax = plt.subplots(figsize=(W / DPI, H / DPI), dpi=DPI,
                               subplot_kw={"projection": ccrs.PlateCarree()})
        ax.add_collection(pc)
        ax.set_global()
        fig.colorbar(pc, ax=ax)
        ax.set_title(f"temperature step {i}")
        fig.savefig(Path(tmp) / f"ux_{i}.png", dpi=DPI)
        plt.close(fig)
        if i:
            frame_s.append(time.perf_counter() - t1)
    return {"seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c,
            "frames": n, "frame_seconds": frame_s}


def case_mesh_shard(nc, n, tmp):
    """One single-worker shard of the mesh file: the worker's peak memory after n frames."""
    from ncreel.render.segment import render_shard
    from ncreel.run.shardplan import Shard

    t = time.perf_counter()
    info = render_shard(_mesh_job(nc), Shard(0, 0, n), segment=Path(tmp) / "seg.mp4",
                        workers=1)
    return {"seconds": time.perf_counter() - t, "frames": n, "info": info}


def case_mesh_calibrate(nc, n, tmp):
    """calibrate_render on the mesh file: the mem_mb a process_shard job declares."""
    from ncreel.render.calibrate import calibrate_render
    from ncreel.run.resources import render_mem_mb_calibrated

    t = time.perf_counter()
    cal = calibrate_render(_mesh_job(nc), n_time=n, probe_frames=min(n, 16),
                           frames_per_shard=n)
    return {"seconds": time.perf_counter() - t, "frames": n, "calibration": cal.to_params(),
            "mem_mb": render_mem_mb_calibrated(cal, ny=1, nx=MESH_CELLS, n_frames=n)}


def mesh_keys(*, frames: int, ux_frames: int, long_frames: int, smoke: bool) -> dict:
    """Run the mesh cases; return their key=value figures."""
    t = time.perf_counter()
    nc, build_s = _mesh_nc(long_frames)
    prep_s = time.perf_counter() - t
    print(f"# mesh cases: MPAS-like Voronoi mesh of {MESH_CELLS} cells at {W}x{H}; mesh "
          f"built in {build_s:.1f} s (0: cached in {MESH_CACHE}), file ready in {prep_s:.1f} s")
    m = run("mesh_render", nc, frames, smoke)
    ux_ = run("uxarray_mesh", nc, ux_frames, smoke)
    short = run("mesh_shard", nc, min(10, long_frames), smoke)
    long_ = run("mesh_shard", nc, long_frames, smoke)
    cal = run("mesh_calibrate", nc, long_frames, smoke)
    fps = 1 / statistics.median(m["frame_seconds"])
    ux_fps = 1 / statistics.median(ux_["frame_seconds"])
    peak = max(v["info"]["maxrss_mb"] + v["info"]["encoder_maxrss_mb"] for v in (short, long_))
    print(f"# mesh_render: {fps:.2f} frames/s, start-up {m['startup_s']:.1f} s (open "
          f"{m['open_s']:.1f} s), {m['rss_mb']:.0f} MiB peak; uxarray {ux_fps:.3f} frames/s")
    return {
        "mesh_cells": MESH_CELLS,
        "mesh_build_s": build_s,
        "render_fps_mesh": fps,
        "render_cpu_fps_mesh": m["frames"] / m["cpu_seconds"],
        "render_startup_s_mesh": m["startup_s"],
        "render_fps_uxarray_mesh": ux_fps,
        "mesh_speedup_vs_uxarray": fps / ux_fps,
        f"render_rss_mb_mesh_{short['frames']}": short["info"]["maxrss_mb"],
        f"render_rss_mb_mesh_{long_['frames']}": long_["info"]["maxrss_mb"],
        "calibrated_mem_mb_mesh": cal["mem_mb"],
        "measured_peak_mb_mesh": peak,
        "calibrated_mem_covers_peak_mesh": int(cal["mem_mb"] >= peak),
    }


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}
#: Map cases -> the suffix of their key=value lines.
MAP_KEYS = {"map_0p25deg": "0p25deg", "map_0p25deg_robinson": "0p25deg_robinson",
            "map_curvilinear": "curvilinear", "map_rotated_pole": "rotated_pole"}


def _child(case, nc, n, smoke=False):
    if smoke:
        _smoke()
    with tempfile.TemporaryDirectory(prefix="ncreel-bench-") as tmp:
        result = CASES[case](nc, n, tmp)
        if "movie" in result:
            out = subprocess.run(
                ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                 "-show_entries", "stream=nb_read_frames,codec_name,pix_fmt,width,height",
                 "-of", "json", result["movie"]], capture_output=True, text=True)
            if out.returncode == 0:
                result["probe"] = json.loads(out.stdout)["streams"][0]
        result.update(_usage())
    print("RESULT " + json.dumps(result))


def run(case, nc, n, smoke=False):
    """Run one case in a fresh interpreter; return its result dict (with wall time)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", case, "--nc", str(nc),
                           "--frames", str(n)] + (["--smoke"] if smoke else []),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench case {case} failed:\n{proc.stderr[-3000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[7:])
    result["wall_s"] = time.perf_counter() - t
    return result


def main(argv=None):
    """Run every case in its own process; print the table and key=value lines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=240,
                    help="frames per speed case (240: the whole sample)")
    ap.add_argument("--long-frames", type=int, default=2000, help="frames of the long shard")
    ap.add_argument("--map-frames", type=int, default=100,
                    help="frames per map case (0.25 degree, Robinson, curvilinear)")
    ap.add_argument("--big-frames", type=int, default=40,
                    help="steps of the 0.25 degree file for the worker-memory shards")
    ap.add_argument("--xmovie-big-frames", type=int, default=8,
                    help="frames xmovie draws of the 0.25 degree field")
    ap.add_argument("--mesh-frames", type=int, default=100,
                    help="frames timed on the MPAS-like mesh")
    ap.add_argument("--uxarray-frames", type=int, default=3,
                    help="frames uxarray draws of the mesh (after one that builds its polygons)")
    ap.add_argument("--mesh-long-frames", type=int, default=40,
                    help="steps of the mesh file; the long worker-memory shard")
    ap.add_argument("--panels-frames", type=int, default=40,
                    help="frames of the 2 x 2 panel layout")
    ap.add_argument("--xmovie-panels-frames", type=int, default=3,
                    help="frames xmovie draws of the 2 x 2 panel layout")
    ap.add_argument("--panels-only", action="store_true",
                    help="run only the panel-layout cases")
    ap.add_argument("--mesh-only", action="store_true",
                    help="run only the unstructured-mesh cases")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes and frame counts: checks in seconds that every case runs")
    ap.add_argument("--only", choices=sorted(MAP_KEYS),
                    help="run only this map case (--map-frames frames) and print its lines")
    ap.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--nc", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.nc, args.frames, smoke=args.smoke)
        return
    if args.smoke:
        _smoke()
        args.frames, args.long_frames, args.map_frames = 4, 8, 4
        args.big_frames, args.xmovie_big_frames = 6, 1
        args.mesh_frames, args.uxarray_frames, args.mesh_long_frames = 4, 1, 12
        args.panels_frames, args.xmovie_panels_frames = 4, 1
    n, sm = args.frames, args.smoke
    panels = {"frames": args.panels_frames, "xmovie_frames": args.xmovie_panels_frames,
              "smoke": sm}
    if args.panels_only:
        for k, v in panel_keys(**panels).items():
            print(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}")
        return
    mesh = {"frames": args.mesh_frames, "ux_frames": args.uxarray_frames,
            "long_frames": args.mesh_long_frames, "smoke": sm}
    if args.mesh_only:
        for k, v in mesh_keys(**mesh).items():
            print(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}")
        return
    if args.only:
        v = run(args.only, "", args.map_frames, sm)
        key = MAP_KEYS[args.only]
        print(f"# {args.only}: {args.map_frames} frames at {W}x{H} dpi {DPI}")
        print(f"render_fps_{key}={1 / statistics.median(v['frame_seconds']):.4f}")
        print(f"render_cpu_fps_{key}={v['frames'] / v['cpu_seconds']:.4f}")
        print(f"render_startup_s_{key}={v['startup_s']:.4f}")
        print(f"render_rss_mb_{key}={v['rss_mb']:.4f}")
        return
    with tempfile.TemporaryDirectory(prefix="ncreel-bench-data-") as d:
        nc = _sample(max(n, 20), Path(d) / "sample.nc")
        long_nc = _sample(args.long_frames, Path(d) / "long.nc")
        print(f"# {n} frames of the HadCM3 sample (37x49) at {W}x{H} dpi {DPI}; "
              f"libx264 preset {ENC['preset']} crf {ENC['crf']} yuv420p; {os.cpu_count()} cores")
        r = {c: run(c, nc, n, sm) for c in ("ncreel_render", "ncreel_png", "xmovie_frames",
                                            "ffmpegwriter_e2e", "xmovie_e2e", "ncreel_e2e")}
        r["shard_20"] = run("ncreel_shard", long_nc, min(20, args.long_frames), sm)
        r["shard_long"] = run("ncreel_shard", long_nc, args.long_frames, sm)
        print(f"# map cases: {BIG[0]}x{BIG[1]} global and {CURVI[0]}x{CURVI[1]} curvilinear "
              f"grids, synthetic fields, {args.map_frames} frames each")
        m = {c: run(c, nc, args.map_frames, sm)
             for c in ("map_0p25deg", "map_0p25deg_robinson", "map_curvilinear",
                       "map_rotated_pole")}
        m["xmovie_0p25deg"] = run("xmovie_0p25deg", nc, args.xmovie_big_frames, sm)
        exact = run("map_exactness", nc, 1, sm)
        exact.update(run("demo_exactness", nc, 1, sm))
        big_nc = _big_nc(args.big_frames, Path(d) / "big.nc")
        short = max(2, args.big_frames // 4)
        m["big_shard_short"] = run("big_shard", big_nc, short, sm)
        m["big_shard_long"] = run("big_shard", big_nc, args.big_frames, sm)
        cal = run("big_calibrate", big_nc, min(args.big_frames, 16), sm)
    fps = {k: v["frames"] / v["seconds"] for k, v in r.items()}
    print(f"{'case':<22}{'frames/s':>10}{'seconds':>9}{'peak RSS MiB':>14}"
          f"{'ffmpeg RSS MiB':>16}")
    for k, v in r.items():
        # For ncreel cases: the worker's and its own ffmpeg's peak (VmHWM).
        rss = v.get("info", {}).get("maxrss_mb", v["rss_mb"])
        enc = v.get("info", {}).get("encoder_maxrss_mb")
        print(f"{k:<22}{fps[k]:>10.2f}{v['seconds']:>9.1f}{rss:>14.0f}"
              f"{'n/a' if enc is None else f'{enc:.0f}':>16}")
    e2e = r["ncreel_e2e"]
    info = e2e["info"]
    # CPU split of ncreel's end-to-end run: the workers' own CPU vs their encoders'.
    enc_cpu = info["encoder_cpu_s"]
    xm_cpu = r["xmovie_e2e"]["cpu_s"] + r["xmovie_e2e"]["children_cpu_s"]
    nc_cpu = e2e["cpu_s"] + e2e["children_cpu_s"]
    worker_cpu = nc_cpu - enc_cpu
    for name in ("ncreel_e2e", "xmovie_e2e"):
        p = r[name].get("probe", {})
        print(f"# {name} movie: {p.get('nb_read_frames')} frames {p.get('codec_name')} "
              f"{p.get('pix_fmt')} {p.get('width')}x{p.get('height')}")
    keys = {
        "render_fps_ncreel": fps["ncreel_render"],
        "render_fps_ncreel_png": fps["ncreel_png"],
        "render_fps_xmovie": fps["xmovie_frames"],
        "render_speedup_vs_xmovie": fps["ncreel_render"] / fps["xmovie_frames"],
        "png_speedup_vs_xmovie": fps["ncreel_png"] / fps["xmovie_frames"],
        "e2e_seconds_ncreel": e2e["seconds"],
        "e2e_seconds_xmovie": r["xmovie_e2e"]["seconds"],
        "e2e_seconds_ffmpegwriter": r["ffmpegwriter_e2e"]["seconds"],
        "e2e_speedup_vs_xmovie": r["xmovie_e2e"]["seconds"] / e2e["seconds"],
        "e2e_speedup_vs_ffmpegwriter": r["ffmpegwriter_e2e"]["seconds"] / e2e["seconds"],
        "e2e_cpu_speedup_vs_xmovie": xm_cpu / nc_cpu,
        "encoder_cpu_share": enc_cpu / nc_cpu,
        "encoder_cpu_s_per_frame": enc_cpu / n,
        "render_rss_mb_ncreel": r["ncreel_render"]["rss_mb"],
        "render_rss_mb_xmovie": r["xmovie_frames"]["rss_mb"],
        "render_rss_mb_ffmpegwriter": r["ffmpegwriter_e2e"]["rss_mb"],
        "e2e_worker_rss_mb": info["maxrss_mb"],
        "e2e_encoder_rss_mb": info["encoder_maxrss_mb"],
        "render_rss_mb_20": r["shard_20"]["info"]["maxrss_mb"],
        f"render_rss_mb_{args.long_frames}": r["shard_long"]["info"]["maxrss_mb"],
        "encoder_rss_mb_20": r["shard_20"]["info"]["encoder_maxrss_mb"],
        f"encoder_rss_mb_{args.long_frames}": r["shard_long"]["info"]["encoder_maxrss_mb"],
        "worker_cpu_s": worker_cpu,
    }
    # Frames/s of the map cases and xmovie's 0.25 degree frames: one over the median frame
    # time, so that a burst of other load on a shared machine does not move the ratio.
    mfps = {k: (1 / statistics.median(v["frame_seconds"]) if "frame_seconds" in v
                else v["frames"] / v["seconds"]) for k, v in m.items()}
    for k in ("map_0p25deg", "map_0p25deg_robinson", "map_curvilinear", "map_rotated_pole",
              "xmovie_0p25deg"):
        v = m[k]
        print(f"# {k}: {mfps[k]:.2f} frames/s, {v['rss_mb']:.0f} MiB peak"
              + (f", start-up {v['startup_s']:.1f} s" if "startup_s" in v else ""))
    keys.update({
        "render_fps_0p25deg": mfps["map_0p25deg"],
        "render_fps_0p25deg_robinson": mfps["map_0p25deg_robinson"],
        "render_fps_curvilinear": mfps["map_curvilinear"],
        "render_fps_rotated_pole": mfps["map_rotated_pole"],
        # CPU seconds: what a worker needs on a core of its own (the machine may be shared).
        "render_cpu_fps_0p25deg": m["map_0p25deg"]["frames"] / m["map_0p25deg"]["cpu_seconds"],
        "render_cpu_fps_0p25deg_robinson": (m["map_0p25deg_robinson"]["frames"]
                                            / m["map_0p25deg_robinson"]["cpu_seconds"]),
        "render_cpu_fps_curvilinear": (m["map_curvilinear"]["frames"]
                                       / m["map_curvilinear"]["cpu_seconds"]),
        "render_fps_xmovie_0p25deg": mfps["xmovie_0p25deg"],
        "render_speedup_vs_xmovie_0p25deg": mfps["map_0p25deg"] / mfps["xmovie_0p25deg"],
        # The same in CPU seconds per frame: robust to other jobs sharing the cores.
        "render_cpu_speedup_vs_xmovie_0p25deg": (
            (m["xmovie_0p25deg"]["cpu_seconds"] / m["xmovie_0p25deg"]["frames"])
            / (m["map_0p25deg"]["cpu_seconds"] / m["map_0p25deg"]["frames"])),
        "render_cpu_speedup_vs_xmovie": (
            (r["xmovie_frames"]["cpu_seconds"] / r["xmovie_frames"]["frames"])
            / (r["ncreel_render"]["cpu_seconds"] / r["ncreel_render"]["frames"])),
        "render_startup_s_0p25deg": m["map_0p25deg"]["startup_s"],
        "render_startup_s_0p25deg_robinson": m["map_0p25deg_robinson"]["startup_s"],
        "render_startup_s_curvilinear": m["map_curvilinear"]["startup_s"],
        "render_rss_mb_0p25deg": m["map_0p25deg"]["rss_mb"],
        "render_rss_mb_curvilinear": m["map_curvilinear"]["rss_mb"],
        f"render_rss_mb_0p25deg_{m['big_shard_short']['frames']}":
            m["big_shard_short"]["info"]["maxrss_mb"],
        f"render_rss_mb_0p25deg_{m['big_shard_long']['frames']}":
            m["big_shard_long"]["info"]["maxrss_mb"],
    })
    # A process_shard job of the big grid (ultrafast preset, as the shards here) declares
    # mem_mb from calibrate_render; it must cover the shard's measured worker + ffmpeg peak.
    peak = max(v["info"]["maxrss_mb"] + v["info"]["encoder_maxrss_mb"]
               for v in (m["big_shard_short"], m["big_shard_long"]))
    keys["calibrated_mem_mb_0p25deg"] = cal["mem_mb"]
    keys["measured_peak_mb_0p25deg"] = peak
    keys["calibrated_mem_covers_peak_0p25deg"] = int(cal["mem_mb"] >= peak)
    for grid in ("demo", "platecarree", "robinson", "curvilinear", "rotated_pole"):
        e = exact[grid]
        name = {"platecarree": "0p25deg", "robinson": "0p25deg_robinson"}.get(grid, grid)
        keys[f"exact_share_differing_{name}"] = e["share_differing"]
        keys[f"exact_max_difference_{name}"] = e["max_difference"]
        keys[f"exact_share_beyond_level_{name}"] = e["share_beyond"]
        keys[f"exact_share_beyond_level_interior_{name}"] = e["share_beyond_interior"]
    keys.update(mesh_keys(**mesh))
    keys.update(panel_keys(**panels))
    for k, v in keys.items():
        print(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}")


if __name__ == "__main__":
    main()
