"""Frame text: the title and time label fit the frame above the map; readable colour bars."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from ncreel.config.settings import RenderSettings
from ncreel.input.source import open_series
from ncreel.render.frame import FrameRenderer
from ncreel.render.frametext import PlainFormatter
from ncreel.render.segment import make_renderer, time_labels

SAMPLE = Path(__import__("iris_sample_data").__file__).parent / "sample_data"
LONG = ("Near-Surface Air Temperature Daily Maximum over the Ice-Free Ocean Surface of the "
        "Northern Hemisphere")


def _settings(w, h, dpi):
    return RenderSettings.from_params({
        "width": w, "height": h, "dpi": dpi, "cmap": "viridis",
        "map": {"coastlines": True, "borders": False, "projection": "PlateCarree",
                "projection_params": {}}})


def _write(path, long_name=LONG, n=3):
    rng = np.random.default_rng(0)
    lat, lon = np.linspace(20, 60, 17), np.linspace(-130, -60, 29)
    xr.Dataset({"tasmax": (("time", "lat", "lon"), rng.normal(290, 5, (n, 17, 29)).astype("f4"),
                           {"units": "K", "long_name": long_name})},
               coords={"time": ("time", 6.0 * np.arange(n),
                                {"units": "hours since 1980-06-01", "calendar": "noleap"}),
                       "lat": ("lat", lat, {"units": "degrees_north"}),
                       "lon": ("lon", lon, {"units": "degrees_east"})}).to_netcdf(path)
    return str(path)


def _inside(box, fig):
    return box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1


@pytest.mark.parametrize("size", [(320, 180, 100), (160, 96, 40), (96, 64, 100),
                                  (1280, 720, 100)])
@pytest.mark.parametrize("blit", [True, False])
def test_title_and_time_label_fit_the_frame_and_stay_off_the_map(tmp_path, size, blit):
    with open_series(_write(tmp_path / "long.nc"), "tasmax") as s:
        labels = time_labels(s)
        assert labels == ["1980-06-01 00:00", "1980-06-01 06:00", "1980-06-01 12:00"]
        r = make_renderer(s, _settings(*size), vmin=280.0, vmax=300.0, blit=blit)
        data = s.read(0, 3)
    rend = r.canvas.get_renderer()
    map_box = r.ax.get_window_extent(rend)
    bar_box = r.colorbar.ax.get_window_extent(rend)
    for t, label in enumerate(labels):
        r.draw(data[t], label)
        title, time = r.title.get_window_extent(rend), r.label.get_window_extent(rend)
        assert r.label.get_text() == label
        assert _inside(title, r.fig) and _inside(time, r.fig), (title, time)
        for box in (map_box, bar_box):
            assert not time.overlaps(box) and not title.overlaps(box)
        assert not title.overlaps(time)
    if size[0] >= 320:  # wrapped or shrunk, never cut
        assert " ".join(r.title.get_text().split()) == f"{LONG} [K]"
        assert r.title.get_fontsize() >= 0.5 * 12
    else:  # 96 x 64 at 100 dpi: cut with an ellipsis rather than spill out of the frame
        assert r.title.get_text().endswith("\u2026") or size[2] < 100
    assert r.colorbar.ax.get_ylabel() == "K"
    r.close()


def test_the_time_label_never_changes_a_map_pixel(tmp_path):
    with open_series(_write(tmp_path / "long.nc"), "tasmax") as s:
        r = make_renderer(s, _settings(320, 180, 100), vmin=280.0, vmax=300.0)
        field = s.read(0, 1)[0]
    a = r.draw(field, "1980-06-01 00:00").copy()
    b = r.draw(field, "2099-12-31 18:00").copy()
    changed = (a != b).any(-1)
    assert changed.any()  # the label is drawn ...
    assert not (changed & r.map_area()).any()  # ... and never over a cell
    r.close()


@pytest.mark.parametrize("size", [(320, 180, 100), (960, 540, 100), (1280, 720, 100)])
def test_demo_frame_reads_year_and_units_just_above_the_map(tmp_path, size):
    path = shutil.copy(SAMPLE / "A1B_north_america.nc", tmp_path / "a1b.nc")
    with open_series(str(path), "air_temperature") as s:
        r = make_renderer(s, _settings(*size), vmin=260.0, vmax=300.0)
        r.draw(s.read(0, 1)[0], time_labels(s)[0])
    assert r.title.get_text() == "air_temperature [K]"  # one line, beside the time label
    assert r.label.get_text() == "1860"
    rend = r.canvas.get_renderer()
    title, time = r.title.get_window_extent(rend), r.label.get_window_extent(rend)
    assert abs((title.y0 + title.y1) - (time.y0 + time.y1)) < 2  # one row
    # On the map's top edge, from its left to its right end (not the frame's corners).
    box = r.ax.get_window_extent(rend)
    assert 0 < time.y0 - box.y1 < 8 and 0 < title.y0 - box.y1 < 8
    assert abs(title.x0 - box.x0) < 1 and abs(time.x1 - box.x1) < 1
    assert r.colorbar.ax.get_ylabel() == "K"
    r.close()


def _tick_labels(vmin, vmax, units="1"):
    r = FrameRenderer(shape=(4, 5), width=320, height=180, dpi=100, cmap="viridis",
                      vmin=vmin, vmax=vmax, title="field", units=units)
    r.draw(np.full((4, 5), vmin), "x")
    axis = r.colorbar.ax.yaxis
    # The labels as drawn, of the ticks on the colour bar.
    pairs = [(loc, t.get_text()) for loc, t in zip(axis.get_majorticklocs(),
                                                    axis.get_majorticklabels(), strict=True)
             if vmin <= loc <= vmax]
    ticks, texts = [p[0] for p in pairs], [p[1] for p in pairs]
    offset = axis.get_offset_text().get_text()
    r.close()
    return ticks, texts, offset


def _number(text):
    return float(text.replace("\u2212", "-"))


def test_constant_field_colour_bar_reads_the_value():
    # Statistics widens a constant field's limits to (value, value + 1e-6 |value|).
    for value, want in ((1.0, "1"), (287.5, "287.5"), (-3.25e-4, "\u22120.000325")):
        ticks, texts, offset = _tick_labels(value, value + abs(value) * 1e-6)
        assert texts == [want] and offset == "", (value, texts, offset)


@pytest.mark.parametrize(("vmin", "vmax"), [(289.3, 290.6), (289.998, 290.0015),
                                            (1e-8, 5e-8), (-2.0, 2.0), (1.2e8, 1.5e8)])
def test_narrow_and_extreme_ranges_get_plain_distinct_ticks(vmin, vmax):
    ticks, texts, offset = _tick_labels(vmin, vmax)
    assert offset == ""  # no shared offset or multiplier (the old '1e-7+1')
    assert len(texts) >= 2 and len(set(texts)) == len(texts)
    np.testing.assert_allclose([_number(t) for t in texts], ticks, rtol=1e-9, atol=0)


def test_plain_formatter():
    f = PlainFormatter()
    assert f.format_ticks([289.5, 290.0, 290.5]) == ["289.5", "290.0", "290.5"]
    assert f.format_ticks([-1.0, 0.0, 1.0]) == ["\u22121", "0", "1"]
    assert f.format_ticks([2e-8, 4e-8]) == ["2e\u22128", "4e\u22128"]
    assert f(1.5e9) == "1.5e9"


@pytest.mark.parametrize("blit", [True, False])
def test_a_200000_character_long_name_draws_a_bounded_title(tmp_path, blit):
    """The title of a 200 000-character ``long_name`` is cut once to MAX_TITLE_CHARS with an
    ellipsis (every frame drew and measured all of it: 46x slower); fitting it to a small
    frame may cut it further."""
    from ncreel.render.frametext import MAX_TITLE_CHARS

    huge = "very long name " * (200_000 // 15)
    with open_series(_write(tmp_path / "huge.nc", long_name=huge), "tasmax") as s:
        r = make_renderer(s, _settings(320, 180, 100), vmin=280.0, vmax=300.0, blit=blit)
        data = s.read(0, 3)
    for t, label in enumerate(time_labels(s)):
        r.draw(data[t], label)
        text = r.title.get_text()
        assert len(text) <= MAX_TITLE_CHARS and "\u2026" in text, len(text)
        assert text.startswith("very long name")
    r.close()


def test_bounded_title_keeps_short_titles_and_units():
    from ncreel.render.frametext import bounded_title

    assert bounded_title("air temperature [K]") == "air temperature [K]"
    assert bounded_title("a" * 300 + " [K]", 50) == "a" * 45 + "\u2026 [K]"
    assert bounded_title("b" * 300, 50) == "b" * 49 + "\u2026"
    assert len(bounded_title("x " * 1000 + "[" + "u" * 100 + "]", 80)) == 80


def test_a_time_label_shrunk_to_fit_a_narrow_frame_is_said(caplog):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from ncreel.render.frametext import fit_header

    def header(labels):
        fig = Figure(figsize=(240 / 50, 150 / 50), dpi=50)
        canvas = FigureCanvasAgg(fig)
        with caplog.at_level("WARNING", logger="ncreel.render.frametext"):
            caplog.clear()
            fit_header(fig, canvas.get_renderer(), "tas [K]", labels)
        return caplog.text

    assert header(["2000-01-01", "2000-01-02"]) == ""
    # time_format "%Y " * 60: a 300-character label on a 240-pixel frame, drawn at a few
    # per cent of its size (unreadable): said once, with what to change.
    text = header(["2000 " * 60])
    assert "is shrunk to" in text and "shorten config time_format" in text
