"""Frames drawn into reused pixels (``ncreel.render.frame``): blitting vs the full draw."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import Normalize
from ncreel.render.colorlookup import ColorLookup
from ncreel.render.frame import FrameRenderer, frame_difference
from render_data import fields, renderer


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
                                             ((37, 49), (1920, 1080, 200)),
                                             # 65 792 cells: indices wider than 16 bits
                                             ((256, 257), (1920, 1080, 200))])
def test_index_frames_match_full_pcolormesh_draw(shape, size):
    # Lines above the field (spines, ticks) are re-blended with Agg's integer arithmetic:
    # measured 0.006-0.009 % of map pixels differ, by one 8-bit level.
    w, h, dpi = size
    kw = {"shape": shape, "width": w, "height": h, "dpi": dpi, "cmap": "viridis",
          "vmin": -2.0, "vmax": 2.0, "title": "tas [K]", "xlabel": "lon", "ylabel": "lat"}
    worst = _exactness(FrameRenderer(**kw), FrameRenderer(**kw, blit=False), fields(3, shape))
    assert worst["share_differing"] <= 0.001
    assert worst["share_beyond"] == 0
    assert worst["max_difference"] <= 1


@pytest.mark.parametrize("shape", [(1, 50), (50, 1), (1, 1)])
def test_single_row_or_column_grid_is_drawn(shape):
    # A transect or one point: cells half a unit either side, in both paths (pcolormesh's
    # shading="auto" gives a single row zero height, and the map no pixel).
    kw = {"shape": shape, "width": 320, "height": 180, "dpi": 60, "cmap": "viridis",
          "vmin": -2.0, "vmax": 2.0}
    fast = FrameRenderer(**kw)
    assert fast.map_area().mean() > 0.5
    worst = _exactness(fast, FrameRenderer(**kw, blit=False), fields(2, shape))
    assert worst["share_differing"] <= 0.001 and worst["share_beyond"] == 0


def test_index_frames_match_on_curvilinear_non_monotonic_grid():
    ny, nx = 23, 31
    j, i = np.mgrid[0:ny, 0:nx]
    # A rotated, bent grid whose x decreases along rows (cells do not overlap: where they
    # do, pcolormesh shows a lower cell through a NaN cell, the index image the background).
    x = 50 - 1.5 * i + 0.4 * j + 0.5 * np.sin(j / 4)
    y = -10 + 1.2 * j + 0.3 * i
    kw = {"shape": (ny, nx), "width": 320, "height": 180, "dpi": 60, "cmap": "magma",
          "vmin": -2.0, "vmax": 2.0, "x": x, "y": y}
    data = fields(2, (ny, nx))
    data[1, 0, 0], data[1, 1, 1] = 50.0, -50.0  # over and under colours
    worst = _exactness(FrameRenderer(**kw), FrameRenderer(**kw, blit=False), data)
    assert worst["share_differing"] <= 0.01


@pytest.mark.parametrize("clip", [False, True])  # clip=True: the general (any norm) branch
def test_color_lookup_equals_matplotlib_colouring(clip):
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(under="red", over="blue")
    norm = Normalize(vmin=-2.0, vmax=2.0, clip=clip)
    look = ColorLookup(cmap, norm)
    n = cmap.N
    rows = np.vstack([cmap(np.arange(n)), cmap.get_under(), cmap.get_over(), cmap.get_bad()])
    for dtype in (np.float16, np.float32, np.float64, np.dtype(">f4")):
        v = np.random.default_rng(1).normal(scale=2, size=5000).astype(dtype)
        # The edges: vmin, vmax, just past each, non-finite, far out of range, and values
        # whose normalised r * N lies in [-1, 0) (under, though truncation gives 0).
        t = np.dtype(dtype).type
        v[:12] = [-2.0, 2.0, np.nan, np.inf, -np.inf, np.nextafter(t(2.0), t(3.0)),
                  np.nextafter(t(-2.0), t(-3.0)), -2.0 - 2.0 / n, -2.0 - 4.0 / n,
                  -np.finfo(t).max, np.finfo(t).max, -2.0 + 4.0 / n]
        # Every bin edge and the values one unit in the last place either side of it.
        edges = (-2.0 + 4.0 * np.arange(-2, n + 3) / n).astype(t)
        v = np.concatenate([v, edges, np.nextafter(edges, t(np.inf)),
                            np.nextafter(edges, t(-np.inf))]).astype(dtype)
        rgba = look.rgba32(v)
        with np.errstate(over="ignore"):  # matplotlib's own r * N overflows for finfo.max
            want = np.floor(cmap(norm(np.ma.masked_invalid(v))) * 255 + 0.5).astype(np.uint8)
        got = rgba.view(np.uint8).reshape(-1, 4)
        assert np.array_equal(got, want)
        assert np.array_equal(rgba >> 24 == 255, want[:, 3] == 255)
        assert np.array_equal(np.floor(rows[look.index(v)] * 255 + 0.5), want)
        out = np.zeros(v.size, np.uint32)
        assert look.rgba32(v, out=out) is out and np.array_equal(out, rgba)
    for dtype in (np.int16, np.int64):
        v = np.arange(-4, 5, dtype=dtype)
        want = np.floor(cmap(norm(v)) * 255 + 0.5).astype(np.uint8)
        assert np.array_equal(look.rgba32(v).view(np.uint8).reshape(-1, 4), want)


def test_color_lookup_general_norms_equal_matplotlib_colouring():
    # Norms other than a plain Normalize go through the norm itself, binned as Colormap
    # bins: the norm's mask is bad, integer results are LUT rows, and limits left unset
    # are autoscaled on all values (here the maximum is past the first block).
    import matplotlib
    from matplotlib.colors import BoundaryNorm, CenteredNorm, LogNorm, TwoSlopeNorm

    cmap = matplotlib.colormaps["viridis"].with_extremes(under="red", over="blue")
    wide = np.linspace(0.0, 1.0, 70_000)
    wide[-1] = 10.0
    cases = [(lambda: Normalize(clip=True), wide), (CenteredNorm, wide - 0.3),
             (lambda: LogNorm(1, 10), np.array([-1.0, 0.0, 0.5, 1.0, 5.0, 10.0, 20.0, np.nan])),
             (lambda: TwoSlopeNorm(0, -2, 2), np.linspace(-5, 5, 41)),
             (lambda: BoundaryNorm([0, 1, 2, 3], 256), np.array([-1.0, 0.0, 0.5, 1.5, 2.5, 4.0]))]
    for make_norm, v in cases:
        got = ColorLookup(cmap, make_norm()).rgba32(v).view(np.uint8).reshape(-1, 4)
        with np.errstate(invalid="ignore", divide="ignore"):
            want = np.floor(cmap(make_norm()(np.ma.masked_invalid(v))) * 255 + 0.5)
        assert np.array_equal(got, want.astype(np.uint8)), make_norm()


def test_color_lookup_overflowing_finite_values_are_over_and_under():
    # An undecoded fill value (1e36) is finite: over, as pcolormesh shows it, not bad.
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(under="red", over="blue")
    look = ColorLookup(cmap, Normalize(0.0, 1e-3))
    assert list(look.index(np.array([1e36, -1e36, np.nan], np.float32))) == [257, 256, 258]


def test_integer_field_is_normalised_as_pcolormesh_does():
    # int16 is normalised in float32 by matplotlib: with these limits float64 arithmetic
    # gives the neighbouring colour on every pixel.
    kw = {"shape": (4, 4), "width": 160, "height": 120, "dpi": 40, "cmap": "viridis",
          "vmin": 143.1165548751046, "vmax": 273.88760538935406}
    field = np.full((4, 4), 232, np.int16)
    fast = FrameRenderer(**kw)
    a = fast.draw(field, "").copy()
    b = FrameRenderer(**kw, blit=False).draw(field, "").copy()
    assert frame_difference(a, b, area=fast.interior())["max_difference"] == 0


def test_draw_rejects_wrong_shape():
    r = renderer((4, 5), blit=True)
    with pytest.raises(ValueError, match="grid shape"):
        r.draw(np.zeros((5, 4)), "x")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_colour_lookup_blocks_within_the_limits_match_matplotlib(dtype):
    # A block whose values all lie within the limits takes the short path (no under / over
    # / bad tests); one with a NaN, an inf or a value beyond a limit the full one. Every
    # bin edge and its neighbours inside the limits, then blocks of either kind.
    import matplotlib
    from ncreel.render import colorlookup

    cmap = matplotlib.colormaps["viridis"].with_extremes(under="red", over="blue", bad="grey")
    norm = Normalize(-2.0, 2.0)
    n, t = cmap.N, np.dtype(dtype).type
    edges = (-2.0 + 4.0 * np.arange(n) / n).astype(t)
    inside = np.concatenate([edges, np.nextafter(edges, t(np.inf)),
                             np.nextafter(edges, t(-np.inf))])
    inside = inside[(inside >= -2.0) & (inside < 2.0)]
    block = colorlookup._BLOCK
    v = np.resize(inside, 3 * block).astype(dtype)
    v[block + 5] = np.nan  # the second block: the full path
    v[2 * block + 7] = 2.0  # the third: r == N, the last colour
    got = ColorLookup(cmap, norm).rgba32(v).view(np.uint8).reshape(-1, 4)
    want = np.floor(cmap(norm(np.ma.masked_invalid(v))) * 255 + 0.5).astype(np.uint8)
    assert np.array_equal(got, want)
