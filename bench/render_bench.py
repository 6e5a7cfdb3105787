"""Benchmark ncreel's render path against xmovie 0.3.1 and matplotlib's FFMpegWriter.

Same data (the real HadCM3 sample, 37 x 49 cells), same frame size (1920 x 1080 at dpi 200)
and identical encoder settings (libx264, crf 18, preset medium, yuv420p, even padding) for
every end-to-end case. Each case runs in its own child process so that its peak resident
memory (``getrusage``: the child itself, and separately its ffmpeg) is its own.

    python bench/render_bench.py [--frames 240] [--long-frames 2000]

Prints a table, then one ``key=value`` line per figure for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

W, H, DPI = 1920, 1080, 200
ENC = {"fps": 12, "crf": 18, "preset": "medium"}


def _usage():
    # VmHWM, not ru_maxrss: a child's ru_maxrss includes the image it was forked from
    # (this benchmark's parent, or a worker for ffmpeg), see ncreel.procmem.
    from ncreel.procmem import peak_rss_mb

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


def _spec(path, preset=ENC["preset"]):
    return {"series": {"paths": [str(path)], "variable": "air_temperature",
                       "time_dim": "time", "select": {}},
            "render": {"width": W, "height": H, "dpi": DPI, "cmap": "viridis"},
            "encode": {**ENC, "preset": preset}, "vmin": 260.0, "vmax": 300.0}


def case_ncreel_render(nc, n, tmp):
    """Raw frames from the blitted, reused figure (one process, one core)."""
    from ncreel.shardrender import make_renderer
    from ncreel.source import open_series

    with open_series(str(nc), "air_temperature") as s:
        data = s.read(0, n)
        r = make_renderer(s, _spec(nc)["render"], vmin=260.0, vmax=300.0)
        r.draw(data[0], "warm-up")
        t = time.perf_counter()
        for i in range(n):
            r.draw(data[i], f"step {i}")
        return {"seconds": time.perf_counter() - t, "frames": n}


def case_ncreel_png(nc, n, tmp):
    """Blitted frames, each also written as PNG (zlib 6, as savefig): the PNG-path cap."""
    from ncreel.shardrender import make_renderer
    from ncreel.source import open_series

    with open_series(str(nc), "air_temperature") as s:
        data = s.read(0, n)
        r = make_renderer(s, _spec(nc)["render"], vmin=260.0, vmax=300.0)
        t = time.perf_counter()
        for i in range(n):
            r.draw(data[i], f"step {i}")
            r.save_png(Path(tmp) / f"f{i:05d}.png")
        return {"seconds": time.perf_counter() - t, "frames": n}


def case_ncreel_e2e(nc, n, tmp):
    """Run the workflow's path: 2 worker processes, raw RGBA into one ffmpeg each.

    Part segments joined with -c copy, then the movie's concat with +faststart.
    """
    from ncreel.movie import concat_segments
    from ncreel.shardrender import render_shard
    from ncreel.shards import Shard

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
    from ncreel.shardrender import render_shard
    from ncreel.shards import Shard

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
    t = time.perf_counter()
    mov.save_frames_serial(tmp)
    return {"seconds": time.perf_counter() - t, "frames": n}


def case_xmovie_e2e(nc, n, tmp):
    """Run xmovie frames, then the same encoder settings (PNGs piped to ffmpeg)."""
    import glob

    from ncreel.movie import encode_movie

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
    from ncreel.source import open_series

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


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def _child(case, nc, n):
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


def run(case, nc, n):
    """Run one case in a fresh interpreter; return its result dict (with wall time)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", case, "--nc", str(nc),
                           "--frames", str(n)], capture_output=True, text=True)
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
    ap.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--nc", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.child, args.nc, args.frames)
        return
    n = args.frames
    with tempfile.TemporaryDirectory(prefix="ncreel-bench-data-") as d:
        nc = _sample(max(n, 20), Path(d) / "sample.nc")
        long_nc = _sample(args.long_frames, Path(d) / "long.nc")
        print(f"# {n} frames of the HadCM3 sample (37x49) at {W}x{H} dpi {DPI}; "
              f"libx264 preset {ENC['preset']} crf {ENC['crf']} yuv420p; {os.cpu_count()} cores")
        r = {c: run(c, nc, n) for c in ("ncreel_render", "ncreel_png", "xmovie_frames",
                                        "ffmpegwriter_e2e", "xmovie_e2e", "ncreel_e2e")}
        r["shard_20"] = run("ncreel_shard", long_nc, 20)
        r["shard_long"] = run("ncreel_shard", long_nc, args.long_frames)
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
    for k, v in keys.items():
        print(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}")


if __name__ == "__main__":
    main()
