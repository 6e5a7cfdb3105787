"""Render path: blitting vs full draw, raw frames into segments, workers, calibration."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import xarray as xr
from matplotlib.colors import Normalize
from ncreel.errors import NcreelError
from ncreel.render.calibrate import calibrate_render
from ncreel.render.frame import ColorLookup, FrameRenderer, frame_difference
from ncreel.render.movie import SegmentEncoder, concat_segments
from ncreel.render.shard import png_sample, render_shard
from ncreel.resources import render_mem_mb_calibrated, render_runtime_calibrated
from ncreel.shards import Shard, frame_name

needs_ffprobe = pytest.mark.skipif(shutil.which("ffprobe") is None, reason="needs ffprobe")

W, H = 320, 180


def _renderer(shape, *, blit, **kw):
    ny, nx = shape
    return FrameRenderer(shape=shape, width=W, height=H, dpi=60, cmap="viridis", vmin=-2.0,
                         vmax=2.0, x=np.linspace(-120, -60, nx), y=np.linspace(20, 60, ny),
                         title="tas [K]", xlabel="longitude", ylabel="latitude", blit=blit,
                         **kw)


def _fields(n, shape, seed=0):
    data = np.random.default_rng(seed).normal(size=(n, *shape)).astype(np.float32)
    data[0, 2:5, 3:7] = np.nan  # masked cells are transparent in both paths
    return data


def _exactness(fast, full, data):
    worst = {"share_differing": 0.0, "max_difference": 0, "share_beyond": 0.0}
    inner = fast.interior()
    for i, field in enumerate(data):
        a = fast.draw(field, f"1860-01-{i + 1:02d}").copy()
        b = full.draw(field, f"1860-01-{i + 1:02d}").copy()
        assert a.shape == b.shape and a.dtype == np.uint8
        d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
        # Away from cell edges: never more than one colour level.
        assert frame_difference(a, b, area=inner,
                                tolerance=fast.level_step())["share_beyond"] == 0
        # Outside the map (ticks, colour bar, title) both paths draw the same background.
        assert frame_difference(a, b, area=~fast.map_area())["max_difference"] <= 2
        worst = {k: max(worst[k], d[k]) for k in worst}
    return worst


@pytest.mark.parametrize(("shape", "size"), [((37, 49), (320, 180, 60)),
                                             ((5, 3), (320, 180, 60)),
                                             ((37, 49), (1920, 1080, 200))])
def test_index_frames_match_full_pcolormesh_draw(shape, size):
    # Only where an antialiased line above the field (spine, tick) meets it may a pixel
    # round differently (Agg blends in 8 bits); never by more than one colour level. In a
    # 320 x 180 frame of a 5 x 3 grid the spines are 1.1 % of the map area.
    w, h, dpi = size
    kw = {"shape": shape, "width": w, "height": h, "dpi": dpi, "cmap": "viridis",
          "vmin": -2.0, "vmax": 2.0, "title": "tas [K]", "xlabel": "lon", "ylabel": "lat"}
    worst = _exactness(FrameRenderer(**kw), FrameRenderer(**kw, blit=False), _fields(3, shape))
    assert worst["share_differing"] <= (0.01 if w >= 1920 else 0.015)
    assert worst["share_beyond"] == 0
    assert worst["max_difference"] <= 2


def test_index_frames_match_on_curvilinear_non_monotonic_grid():
    ny, nx = 23, 31
    j, i = np.mgrid[0:ny, 0:nx]
    # A rotated, bent grid whose x decreases along rows (cells do not overlap: where they
    # do, pcolormesh shows a lower cell through a NaN cell, the index image the background).
    x = 50 - 1.5 * i + 0.4 * j + 0.5 * np.sin(j / 4)
    y = -10 + 1.2 * j + 0.3 * i
    kw = {"shape": (ny, nx), "width": 320, "height": 180, "dpi": 60, "cmap": "magma",
          "vmin": -2.0, "vmax": 2.0, "x": x, "y": y}
    data = _fields(2, (ny, nx))
    data[1, 0, 0], data[1, 1, 1] = 50.0, -50.0  # over and under colours
    worst = _exactness(FrameRenderer(**kw), FrameRenderer(**kw, blit=False), data)
    assert worst["share_differing"] <= 0.01


def test_color_lookup_equals_matplotlib_colouring():
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(under="red", over="blue")
    norm = Normalize(vmin=-2.0, vmax=2.0)
    look = ColorLookup(cmap, norm)
    for dtype in (np.float32, np.float64):
        v = np.random.default_rng(1).normal(scale=2, size=5000).astype(dtype)
        v[:6] = [-2.0, 2.0, np.nan, np.inf, -np.inf, np.nextafter(dtype(2.0), dtype(3.0))]
        rgba, opaque = look.rgba32(v)
        want = np.floor(cmap(norm(np.ma.masked_invalid(v))) * 255 + 0.5).astype(np.uint8)
        got = rgba.view(np.uint8).reshape(-1, 4)
        assert np.array_equal(got, want)
        assert np.array_equal(opaque, want[:, 3] == 255)


def test_draw_rejects_wrong_shape():
    r = _renderer((4, 5), blit=True)
    with pytest.raises(ValueError, match="grid shape"):
        r.draw(np.zeros((5, 4)), "x")


def test_png_sample_includes_ends_middle_every_and_extra():
    assert png_sample(0, 10) == [0, 4, 9]
    assert png_sample(10, 20, every=4) == [10, 12, 14, 16, 19]
    assert png_sample(10, 20, extra=[3, 15, 25]) == [10, 14, 15, 19]
    assert png_sample(5, 6) == [5]
    assert png_sample(5, 5) == []


def _ffprobe(path, entries="stream=nb_read_frames,codec_name,pix_fmt,width,height"):
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", entries, "-of", "json", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["streams"][0]


@needs_ffprobe
def test_segments_concat_to_right_frame_count(tmp_path):
    shape = (6, 8)
    data = _fields(13, shape)
    r = _renderer(shape, blit=True)
    segments = []
    for k, (a, b) in enumerate([(0, 5), (5, 6), (6, 13)]):
        seg = tmp_path / f"seg{k}.mp4"
        with SegmentEncoder(seg, width=W, height=H, fps=12, crf=18, preset="ultrafast") as enc:
            for i in range(a, b):
                enc.write(r.draw(data[i], str(i)))
        assert enc.n_frames == b - a
        assert not seg.with_name(seg.name + ".part").exists()
        segments.append(seg)
    movie = tmp_path / "movie.mp4"
    concat_segments(segments, movie)
    info = _ffprobe(movie)
    assert int(info["nb_read_frames"]) == 13
    assert (info["codec_name"], info["pix_fmt"]) == ("h264", "yuv420p")
    assert (info["width"], info["height"]) == (W, H)


def test_concat_fails_loudly_on_missing_segment(tmp_path):
    (tmp_path / "a.mp4").write_bytes(b"x")
    with pytest.raises(NcreelError, match="1 of 2 segments missing"):
        concat_segments([tmp_path / "a.mp4", tmp_path / "b.mp4"], tmp_path / "m.mp4")
    assert not (tmp_path / "m.mp4").exists()


def test_segment_encoder_leaves_no_file_on_error(tmp_path):
    seg = tmp_path / "seg.mp4"
    with pytest.raises(RuntimeError), SegmentEncoder(seg, width=W, height=H, fps=12, crf=18,
                                                     preset="ultrafast") as enc:
        enc.write(np.zeros((H, W, 4), np.uint8))
        raise RuntimeError("killed mid-shard")
    assert not seg.exists() and not seg.with_name("seg.mp4.part").exists()


def test_segment_encoder_rejects_wrong_frame_size(tmp_path):
    with pytest.raises(ValueError, match="expected"), SegmentEncoder(
            tmp_path / "s.mp4", width=W, height=H, fps=12, crf=18, preset="ultrafast") as enc:
        enc.write(np.zeros((H + 1, W, 4), np.uint8))


@pytest.fixture(scope="module")
def noisy_nc(tmp_path_factory):
    """A small CF file whose frames differ strongly, so any reordering would show."""
    path = tmp_path_factory.mktemp("nc") / "noisy.nc"
    n, ny, nx = 11, 9, 12
    data = np.random.default_rng(3).normal(size=(n, ny, nx)).astype(np.float32)
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), data, {"units": "K", "long_name": "noise"})},
        coords={"time": ("time", np.arange(n, dtype=float),
                         {"units": "days since 2000-01-01", "calendar": "standard"}),
                "lat": ("lat", np.linspace(-40, 40, ny), {"units": "degrees_north"}),
                "lon": ("lon", np.linspace(0, 330, nx), {"units": "degrees_east"})})
    ds.to_netcdf(path)
    return path


def _spec(path, preset="ultrafast"):
    return {"series": {"paths": [str(path)], "variable": "tas", "time_dim": "time",
                       "select": {}},
            "render": {"width": 160, "height": 96, "dpi": 40, "cmap": "viridis"},
            "encode": {"fps": 10, "crf": 18, "preset": preset}, "vmin": -2.0, "vmax": 2.0}


def _decode(path, w=160, h=96):
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3).astype(np.int16)


@needs_ffprobe
def test_worker_processes_match_single_process(noisy_nc, tmp_path):
    shard = Shard(0, 1, 11)  # 10 frames, not starting at 0
    outs = {}
    for workers in (1, 3):
        frames = tmp_path / f"frames{workers}"
        frames.mkdir()
        seg = tmp_path / f"seg{workers}.mp4"
        info = render_shard(_spec(noisy_nc), shard, segment=seg, frames_dir=frames,
                            png_times=range(1, 11), workers=workers)
        assert info["frames"] == 10 and info["workers"] == workers
        assert int(_ffprobe(seg)["nb_read_frames"]) == 10
        assert not seg.with_name(seg.name + ".parts").exists()
        outs[workers] = (frames, _decode(seg))
    # Every frame's pixels are identical whichever process drew it ...
    for t in range(1, 11):
        a = (outs[1][0] / frame_name(t)).read_bytes()
        b = (outs[3][0] / frame_name(t)).read_bytes()
        assert a == b, f"PNG of step {t} differs"
    # ... and the movies show them in the same order (encoding is lossy, so compare each
    # decoded frame with every frame of the other movie: the closest must be the same index).
    one, three = outs[1][1], outs[3][1]
    dist = np.abs(one[:, None] - three[None]).mean(axis=(2, 3, 4))
    assert list(dist.argmin(axis=1)) == list(range(10))


def test_calibration_and_resources(noisy_nc):
    cal = calibrate_render(_spec(noisy_nc), n_time=11, probe_frames=6, target_minutes=0.01)
    assert cal["worker_peak_mb"] > cal["base_mb"] > 0
    assert cal["encoder_peak_mb"] > 0 and cal["seconds_per_frame"] > 0
    assert 1 <= cal["frames_per_shard"] <= 11
    fixed = calibrate_render(_spec(noisy_nc), n_time=11, probe_frames=2, frames_per_shard=4)
    assert fixed["frames_per_shard"] == 4
    measured = cal["worker_peak_mb"] + cal["encoder_peak_mb"]
    one = render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=100)
    assert measured <= one <= 1.5 * measured
    assert render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=100, attempt=2) == 2 * one
    # Memory stops growing with the shard's length once the rows pass's block is full
    # (MAX_BLOCK_CELLS values); more workers need more.
    assert (render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=10**5)
            == render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=10**7))
    assert render_mem_mb_calibrated(cal, ny=9, nx=12, n_frames=100, workers=2) > one
    short = render_runtime_calibrated(cal, n_frames=10)
    assert short >= 5
    assert render_runtime_calibrated({**cal, "seconds_per_frame": 1.0}, n_frames=6000) >= 200
