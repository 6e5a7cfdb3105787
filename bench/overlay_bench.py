"""Frames per second with contour and vector overlays, against matplotlib redrawing them.

A synthetic global field with a second field (contours, 10 fixed levels) and a u/v pair
(vectors, ``--density`` arrows across the map) is drawn by ncreel's renderer on its fast
path (the field gathered from the index image, the overlays drawn by Agg each frame) and
by matplotlib's own ``FuncAnimation.save``, calling ``contour`` and ``quiver`` again each
frame. Drawing only, no encoder on either side: ncreel's frames are not written, and
matplotlib's pipe writer (``FFMpegWriter``) sends its frames to /dev/null instead of an
ffmpeg process. Frames/s are one over the median frame time (wall clock), and
``*_cpu_ms_*`` the median CPU time of a frame (``time.process_time``: on a machine shared
with other work, the figure to compare; ``*_speedup_*_cpu`` are the speedups in CPU
time). Both sides run on one thread (``render_threads=1``): a shard job's declared
threads are its worker processes.

The baseline (``matplotlib_*``, ``*_speedup_vs_matplotlib*``) is ``FuncAnimation.save``
on the same figure, size and dpi, with a frame function that gives the field's
``pcolormesh`` the new values and removes and calls ``contour`` / ``quiver`` again. For
each frame ``Animation.save`` then draws the figure twice in full: the ``draw_idle``
after the frame function (on an Agg canvas it draws at once) and ``grab_frame``'s
``savefig``. ``matplotlib_one_draw_*`` and ``*_speedup_vs_one_draw_cpu`` are the same
frame with one full draw (``canvas.draw()``), a lower bound for any way of making the
movie with matplotlib redrawing the figure. Most of matplotlib's time is the
``pcolormesh`` of the field, so the speedups measure the whole frame, field included,
not the overlays alone.

    python bench/overlay_bench.py                  # demo size: 960 x 540, 1 degree grid
    python bench/overlay_bench.py --grid 0.25 --width 1920 --height 1080 --dpi 200
    python bench/overlay_bench.py --smoke          # tiny sizes, seconds

Prints one ``key=value`` line per figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))


def fields(lon, lat, t):
    """Field, contoured field, u and v at frame `t` (moving patterns)."""
    lon2, lat2 = np.meshgrid(lon, lat)
    f = 30 * np.cos(np.radians(lat2)) + 5 * np.sin(np.radians(2 * lon2 + 10 * t))
    p = 1000 + 20 * np.sin(np.radians(lon2 + 5 * t)) * np.cos(np.radians(2 * lat2))
    u = 10 * np.cos(np.radians(3 * lat2 + t))
    v = 5 * np.sin(np.radians(2 * lon2 - t)) * np.cos(np.radians(lat2))
    return f, p, u, v


def time_frames(renderer, frames, which):
    """Frames/s (wall) and median CPU ms of a frame on the fast path."""
    times, cpu = [], []
    for t in range(frames):
        f, p, u, v = frames_data[t]
        extra = [(p,)] if "c" in which else []
        if "v" in which:
            extra.append((u, v))
        t0, c0 = time.perf_counter(), time.process_time()
        renderer.draw(f, "2000-01-01", extra)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return 1.0 / statistics.median(times), 1e3 * statistics.median(cpu)


def _step_slice(step):
    return slice(step // 2, None, step)


def time_matplotlib(renderer, frames, which, lon, lat, levels, step, scale):
    """One full draw per frame: ``contour``/``quiver`` again, then ``canvas.draw()``."""
    times, cpu, old = [], [], []
    for t in range(frames):
        f, p, u, v = frames_data[t]
        t0, c0 = time.perf_counter(), time.process_time()
        old = _redo_overlays(renderer, old, which, lon, lat, levels, step, scale, p, u, v)
        renderer.draw(f, "2000-01-01")
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    for artist in old:
        artist.remove()
    return 1.0 / statistics.median(times), 1e3 * statistics.median(cpu)


def _redo_overlays(renderer, old, which, lon, lat, levels, step, scale, p, u, v):
    # What a FuncAnimation's frame function does: remove last frame's contour / quiver
    # and call them again.
    for artist in old:
        artist.remove()
    new = []
    if "c" in which:
        new.append(renderer.ax.contour(lon, lat, p, levels, colors="black", linewidths=0.8,
                                       zorder=2.3))
    if "v" in which:
        s = _step_slice(step)
        new.append(renderer.ax.quiver(lon[s], lat[s], u[s, s], v[s, s], scale=scale,
                                      scale_units="width", pivot="middle", zorder=2.35))
    return new


def time_funcanimation(renderer, frames, which, lon, lat, levels, step, scale):
    """``FuncAnimation.save`` itself, its frames sent to /dev/null instead of ffmpeg.

    matplotlib's pipe writer (``FFMpegWriter``) with its ffmpeg process replaced by a
    null sink: each frame is the frame function (``set_array`` of the field's
    ``pcolormesh``, the time label, ``contour``/``quiver`` removed and called again),
    the ``draw_idle`` that ``Animation.save`` makes after it (a full draw on the Agg
    canvas) and ``grab_frame``'s ``savefig(format="rgba")`` (a second full draw). Frame
    times are the intervals between successive grabs.

    Returns frames/s, median CPU ms of a frame and the figure's draws per frame.
    """
    import os
    import tempfile

    from matplotlib.animation import FFMpegWriter, FuncAnimation

    stamps = []

    class NullPipe:
        def __init__(self):
            self.stdin = open(os.devnull, "wb")  # noqa: SIM115 (closed in communicate)
            self.returncode = 0

        def communicate(self):
            self.stdin.close()
            return b"", b""

    class NullFFMpegWriter(FFMpegWriter):
        def _run(self):
            self._proc = NullPipe()

        def grab_frame(self, **savefig_kwargs):
            super().grab_frame(**savefig_kwargs)
            stamps.append((time.perf_counter(), time.process_time()))

    old = []

    def frame(t):
        nonlocal old
        f, p, u, v = frames_data[t % len(frames_data)]
        renderer.mesh.set_array(renderer._to_mesh(f))
        renderer.label.set_text("2000-01-01")
        old = _redo_overlays(renderer, old, which, lon, lat, levels, step, scale, p, u, v)
        return []

    anim = FuncAnimation(renderer.fig, frame, frames=frames + 1, blit=False,
                         cache_frame_data=False, repeat=False)
    draws = []
    counter = renderer.fig.canvas.mpl_connect("draw_event", lambda event: draws.append(1))
    # The renderer's figure keeps a placeholder layout engine (its layout was fixed after
    # a constrained draw), for which savefig draws once more without rendering: not
    # counted against matplotlib.
    engine = renderer.fig.get_layout_engine()
    renderer.fig.set_layout_engine(None)
    with tempfile.TemporaryDirectory() as tmp:
        anim.save(os.path.join(tmp, "movie.mp4"), writer=NullFFMpegWriter(fps=24))
    renderer.fig.canvas.mpl_disconnect(counter)
    renderer.fig.set_layout_engine(engine)
    renderer.fig.canvas.mpl_disconnect(anim._first_draw_id)  # a later draw: no restart
    for artist in old:
        artist.remove()
    wall, cpu = np.diff(np.array(stamps), axis=0).T
    return 1.0 / float(np.median(wall)), 1e3 * float(np.median(cpu)), len(draws) / (frames + 1)


def main() -> None:
    from ncreel.render.frame import FrameRenderer
    from ncreel.render.maps import map_features, map_projection
    from ncreel.render.overlays import ContourOverlay, VectorOverlay

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=float, default=1.0, help="grid spacing, degrees")
    ap.add_argument("--width", type=int, default=960)
    ap.add_argument("--height", type=int, default=540)
    ap.add_argument("--dpi", type=float, default=100)
    ap.add_argument("--frames", type=int, default=20)
    ap.add_argument("--density", type=int, default=60, help="arrows across the map")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    if a.smoke:
        a.grid, a.width, a.height, a.dpi, a.frames, a.density = 5.0, 320, 180, 40, 3, 20
    lon = np.arange(-180 + a.grid / 2, 180, a.grid)
    lat = np.arange(-90 + a.grid / 2, 90, a.grid)
    global frames_data
    frames_data = [fields(lon, lat, t) for t in range(a.frames)]
    speed = max(float(np.hypot(u, v).max()) for _, _, u, v in frames_data)
    levels = np.linspace(985, 1015, 10)
    out = {}
    name = {"": "plain", "c": "contours", "v": "vectors", "cv": "contours_vectors"}
    for blit in (True, False):
        for which in ("", "c", "v", "cv"):
            overlays = []
            if blit and "c" in which:
                overlays.append(ContourOverlay(levels))
            if blit and "v" in which:
                overlays.append(VectorOverlay(speed, density=a.density))
            r = FrameRenderer(shape=(lat.size, lon.size), width=a.width, height=a.height,
                              dpi=a.dpi, cmap="viridis", vmin=-5, vmax=35, x=lon, y=lat,
                              title="field [K]", blit=blit,
                              projection=map_projection("PlateCarree", {}),
                              features=map_features(coastlines=True, borders=False),
                              overlays=overlays)
            if blit:
                fps, cpu = time_frames(r, a.frames, which)
                out[f"render_fps_{name[which]}"] = fps
                out[f"render_cpu_ms_{name[which]}"] = cpu
                if which == "v":
                    vec = r.overlays[0]
                    out["vector_arrows"] = int(vec.n_arrows)
                    step = vec._rows.step
                    # quiver's scale: speed per axes width, as the overlay's arrows
                    scale = speed / (0.9 * vec._spacing)
            else:
                n = max(3, a.frames // 4)
                args = (lon, lat, levels, step, scale)
                fps, cpu = time_matplotlib(r, n, which, *args)
                out[f"matplotlib_one_draw_fps_{name[which]}"] = fps
                out[f"matplotlib_one_draw_cpu_ms_{name[which]}"] = cpu
                fps, cpu, draws_per_frame = time_funcanimation(r, n, which, *args)
                out[f"matplotlib_fps_{name[which]}"] = fps
                out[f"matplotlib_cpu_ms_{name[which]}"] = cpu
                out["matplotlib_draws_per_frame"] = draws_per_frame
            r.close()
    for which in ("contours", "vectors"):
        out[f"{which}_speedup_vs_matplotlib"] = (out[f"render_fps_{which}"]
                                                 / out[f"matplotlib_fps_{which}"])
        out[f"{which}_speedup_vs_matplotlib_cpu"] = (out[f"matplotlib_cpu_ms_{which}"]
                                                     / out[f"render_cpu_ms_{which}"])
        out[f"{which}_speedup_vs_one_draw_cpu"] = (out[f"matplotlib_one_draw_cpu_ms_{which}"]
                                                   / out[f"render_cpu_ms_{which}"])
    out["render_threads"] = 1
    print(f"# grid {lat.size} x {lon.size}, frame {a.width} x {a.height} at dpi {a.dpi:g}")
    for k, v in out.items():
        print(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}")


if __name__ == "__main__":
    main()
