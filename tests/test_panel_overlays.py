"""Overlays (contours, vectors) and ``decorate`` on panels: which panels get them, their
per-panel levels, pixels against a full redraw, and bad layouts stopped with one line."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import xarray as xr
from ncreel.config.settings import RenderSettings, SeriesSelection
from ncreel.core.errors import NcreelError
from ncreel.jobs.stats import panel_statistics
from ncreel.region.selection import open_selection
from ncreel.render.frame import frame_difference
from ncreel.render.panelplan import PanelReader, plan_panels
from ncreel.render.segment import PanelFrames, time_labels
from test_overlays import write_weather

CONTOURS = {"variable": "psl", "levels": 6}
VECTORS = {"u": "uas", "v": "vas", "density": 12, "colour": "white"}


def _plan(main, panels, **top):
    sel = SeriesSelection(paths=(main,), variable="tas", time_dim=None, select={}, lat=None,
                          lon=None, time=None)
    cfg = {"input": main, "variable": "tas", "select": {}, "sel": {}, "cmap": "viridis",
           "vmin": None, "vmax": None, "contours": None, "vectors": None, **top}
    with open_selection(sel) as s:
        labels = time_labels(s)
        return plan_panels(panels, config=cfg, selection=sel, movie_labels=labels,
                           movie_paths=s.paths, width=480, height=200), labels


def _render(layout, projection="PlateCarree", coastlines=True, **kw):
    return RenderSettings.from_params({
        "width": 480, "height": 200, "dpi": 50, "cmap": "viridis", "panels": layout,
        "map": {"coastlines": coastlines, "borders": False, "projection": projection,
                "projection_params": {}}, **kw})


@pytest.fixture
def weather(tmp_path):
    return str(write_weather(tmp_path / "w.nc", n_time=4))


def test_top_level_overlays_go_to_the_panels_of_the_top_level_input(tmp_path, weather):
    other = str(write_weather(tmp_path / "other.nc", n_time=4))
    panels = [{"name": "a"}, {"name": "psl", "variable": "psl", "input": weather},
              {"name": "b", "input": other}, {"difference_of": ["a", "b"]},
              {"variable": "psl", "contours": None},
              {"input": other, "contours": {"variable": "psl", "levels": [1000.0]}}]
    layout, _ = _plan(weather, panels, contours=CONTOURS, vectors=VECTORS)
    got = [(p["contours"] and p["contours"]["variable"], p["vectors"] and p["vectors"]["u"])
           for p in layout["panels"]]
    # The top-level input's panels (given or not), not another file's, not a difference;
    # a panel's own key replaces the top-level one (null: none).
    assert got == [("psl", "uas"), ("psl", "uas"), (None, None), (None, None),
                   (None, "uas"), ("psl", None)]
    assert layout["panels"][5]["contours"] == {"variable": "psl", "levels": [1000.0],
                                               "colour": "black", "linewidth": 0.8}


def test_levels_and_scale_are_per_panel_over_the_movies_steps(tmp_path, weather):
    layout, labels = _plan(weather, [{}, {"variable": "psl",
                                          "contours": {"variable": "tas", "levels": 4}}],
                           vectors=VECTORS)
    limits = panel_statistics(layout, len(labels))
    with xr.open_dataset(weather) as ds:
        tas, u, v = ds["tas"].values, ds["uas"].values, ds["vas"].values
    speed = pytest.approx(np.hypot(u, v).max())
    assert limits[0]["overlays"] == {"vector_speed": speed}
    # Panel 1 shows the top-level input too: its own contours and the top-level vectors.
    levels = limits[1]["overlays"]["contour_levels"]
    assert 2 <= len(levels) <= 5 and tas.min() <= min(levels) and max(levels) <= tas.max()
    assert limits[1]["overlays"]["vector_speed"] == speed
    # Shard jobs read each overlay variable's slab for their own steps only.
    with PanelReader(layout) as reader:
        got = reader.read_overlays(1, 3)
    assert [len(g) for g in got] == [1, 2]
    np.testing.assert_array_equal(got[0][0][0], u[1:3])
    np.testing.assert_array_equal(got[0][0][1], v[1:3])
    np.testing.assert_array_equal(got[1][0][0], tas[1:3])


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
def test_contours_on_one_of_two_panels_match_a_full_redraw(weather, projection):
    layout, labels = _plan(weather, [{"contours": CONTOURS}, {"variable": "psl"}])
    bare_layout, _ = _plan(weather, [{}, {"variable": "psl"}])
    limits = panel_statistics(layout, len(labels))
    bare_limits = [{k: v for k, v in x.items() if k != "overlays"} for x in limits]
    rs, bare_rs = _render(layout, projection), _render(bare_layout, projection)
    with PanelFrames(layout, rs, limits, labels) as fast, \
            PanelFrames(layout, rs, limits, labels, blit=False) as full, \
            PanelFrames(bare_layout, bare_rs, bare_limits, labels) as bare, \
            PanelFrames(bare_layout, bare_rs, bare_limits, labels, blit=False) as bare_full:
        f = fast.renderer
        area, inner, step = f.map_area(), f.interior(), f.level_step()
        frames = list(fast.frames(0, 4, 2**20))
        assert all(len(args) == 3 for _, args in frames)
        for _, args in frames:
            a, b = f.draw(*args).copy(), full.renderer.draw(*args).copy()
            c = bare.renderer.draw(*args[:2]).copy()
            c_full = bare_full.renderer.draw(*args[:2]).copy()
            # Tolerance: away from cell edges the antialiased contour lines (the same Agg
            # artists onto the same colours) differ no more than the frame without them
            # (coastline pixels re-blended: at most one 8-bit level); over the whole map
            # pixels beyond one colour level no more than without them plus 0.2 % (lines
            # crossing a Robinson map's curved boundary, drawn above it on the fast path).
            d_in, d0_in = (frame_difference(x, y, area=inner) for x, y in ((a, b), (c, c_full)))
            assert d_in["max_difference"] <= max(d0_in["max_difference"], 1)
            assert d_in["share_differing"] <= d0_in["share_differing"] + 1e-3
            d = frame_difference(a, b, area=area, tolerance=step)
            d0 = frame_difference(c, c_full, area=area, tolerance=step)
            assert d["share_beyond"] <= d0["share_beyond"] + 0.002, (d, d0)
            # Outside the maps (titles, colour bars, label) the same pixels, but where a
            # line leaves a curved map's boundary.
            out = frame_difference(a, b, area=~area)
            assert out["share_differing"] <= (0 if projection == "PlateCarree" else 1e-3)
            # The lines are there, on the first panel only.
            drawn = (a != c).any(-1)
            assert drawn[f._box[0]].mean() > 0.01
            assert not drawn[f._box[1]].any()


@pytest.mark.parametrize("panels, top, message", [
    ([{}, {"contours": {"variable": "slp"}}], {},
     "config key 'panels[1].contours.variable': "),
    ([{}, {"vectors": {"u": "uas", "v": "vaz"}}], {}, "no variable 'vaz'"),
    ([{}, {"contours": {"variable": "other"}}], {}, "has dims (time, y, x)"),
    ([{}, {"vectors": {"u": "uas", "v": "vas", "colour": "whyte"}}], {},
     "config key 'panels[1].vectors.colour': 'whyte' is not a"),
    ([{"name": "a"}, {"name": "b"}, {"difference_of": ["a", "b"], "contours": CONTOURS}],
     {}, "config key 'panels[2].contours': a difference panel has no file of its own"),
    ([{"input": "OTHER"}], {"contours": CONTOURS},
     "config key 'contours': no panel shows the top-level input"),
])
def test_bad_panel_overlays_stop_with_one_line(tmp_path, weather, panels, top, message):
    other = str(write_weather(tmp_path / "other.nc", n_time=4))
    panels = [{k: other if v == "OTHER" else v for k, v in p.items()} for p in panels]
    with pytest.raises(NcreelError) as err:
        _plan(weather, panels, **top)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_panel_selecting_a_level_of_the_top_level_input_gets_its_overlays(tmp_path):
    # The overlay variable (psl) has no level: it is read as is beside the selected level.
    path = tmp_path / "lev.nc"
    write_weather(path)
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds["ta"] = ds["tas"].expand_dims(level=[850.0, 500.0], axis=1)
    ds.to_netcdf(tmp_path / "lev2.nc")
    main = str(tmp_path / "lev2.nc")
    layout, _ = _plan(main, [{}, {"variable": "ta", "select": {"level": 1}}],
                      contours=CONTOURS)
    assert [p["contours"]["variable"] for p in layout["panels"]] == ["psl", "psl"]


def test_mesh_panel_with_overlays_is_refused_naming_the_panel(tmp_path, weather):
    from meshes import write_healpix

    write_healpix(tmp_path / "hp.nc", 1)
    with pytest.raises(NcreelError) as err:
        _plan(weather, [{}, {"input": str(tmp_path / "hp.nc"), "contours": CONTOURS}])
    assert "panels[1]" in str(err.value) and "unstructured mesh" in str(err.value)
    assert "\n" not in str(err.value)


def test_u_without_v_on_a_panel_is_a_schema_error():
    import jsonschema
    from ncreel.config.configcheck import load_schema, schema_error_message

    config = {"input": "a.nc", "variable": "tas", "run": "r",
              "panels": [{}, {"vectors": {"u": "uas"}}]}
    errs = list(jsonschema.Draft202012Validator(load_schema()).iter_errors(config))
    assert len(errs) == 1
    message = schema_error_message(errs[0])
    assert "panels.1.vectors.v" in message and "\n" not in message, message


def _stations(fig, ax, info):
    # A marker per panel, at a place only the panel's own map puts there.
    x, y = info.to_map([20.0 + 100.0 * info.panel], [10.0])
    ax.plot(x, y, "o", color="red", markersize=8, zorder=5)
    _stations.calls.append((info.panel, info.variable))


_stations.calls = []


class _Clock:
    n = 0


def _changing(fig, ax, info):
    from matplotlib.text import Text

    class Tick(Text):
        def draw(self, renderer):
            _Clock.n += 1
            self.set_text(str(_Clock.n))
            super().draw(renderer)

    ax.add_artist(Tick(0.5, 0.5, "0", transform=ax.transAxes))


def test_decorate_is_called_once_per_panel_and_drawn_in_the_background(weather):
    layout, labels = _plan(weather, [{}, {"variable": "psl", "contours": CONTOURS}])
    limits = panel_statistics(layout, len(labels))
    dec = {"function": "test_panel_overlays:_stations", "source": ""}
    _stations.calls.clear()
    rs, plain = _render(layout, decorate=dec), _render(layout)
    with PanelFrames(layout, rs, limits, labels) as fast, \
            PanelFrames(layout, rs, limits, labels, blit=False) as full, \
            PanelFrames(layout, plain, limits, labels) as bare:
        assert _stations.calls == [(0, "tas"), (1, "psl"), (0, "tas"), (1, "psl")]
        for _, args in fast.frames(0, 3, 2**20):
            a = fast.renderer.draw(*args).copy()
            b = full.renderer.draw(*args).copy()
            c = bare.renderer.draw(*args).copy()
            assert not fast.renderer.full_redraw
            d = frame_difference(a, b, area=fast.renderer.interior())
            assert d["max_difference"] <= 1
            red = (a[..., 0] > 200) & (a[..., 1] < 60) & (a[..., 2] < 60)
            assert red[fast.renderer._box[0]].sum() > 10
            assert red[fast.renderer._box[1]].sum() > 10
            assert not ((c[..., 0] > 200) & (c[..., 1] < 60) & (c[..., 2] < 60)).any()


def test_a_changing_decoration_on_panels_falls_back_to_full_redraws(weather, caplog):
    layout, labels = _plan(weather, [{"contours": CONTOURS}, {"variable": "psl"}])
    limits = panel_statistics(layout, len(labels))
    rs = _render(layout, decorate={"function": "test_panel_overlays:_changing",
                                   "source": ""})
    with caplog.at_level(logging.WARNING), PanelFrames(layout, rs, limits, labels) as fast, \
            PanelFrames(layout, _render(layout), limits, labels, blit=False) as full:
        for _, args in fast.frames(0, 4, 2**20):
            a = fast.renderer.draw(*args).copy()
            # Drawn in full: fields, lines and all, as a full redraw without the
            # decoration, but for the two changing numbers (measured: 0.08 % of pixels).
            d = frame_difference(a, full.renderer.draw(*args))
            assert 0 < d["share_differing"] < 0.002, d
        assert fast.renderer.full_redraw
    said = [r for r in caplog.records if "decorate: what it drew changed" in r.message]
    assert len(said) == 1


def _second_only(fig, ax, info):
    if info.panel is None:
        raise ValueError("called without a panel index")
    {0: "tas"}[info.panel]  # a function that has nothing for panel 1


def test_decorate_is_checked_for_every_panel_index_before_any_job(weather):
    from ncreel.render.decorate import check_decorate

    sel = SeriesSelection(paths=(weather,), variable="tas", time_dim=None, select={},
                          lat=None, lon=None, time=None)
    rs = _render(None)
    with open_selection(sel) as s:
        from ncreel.render.segment import map_settings, plot_axes

        x, y, _, _ = plot_axes(s)
        projection, _ = map_settings(rs.map, lon=x, lat=y)
        check_decorate("test_panel_overlays:_second_only", s, rs, projection=projection,
                       x=x, y=y, panels=1)
        with pytest.raises(NcreelError) as err:
            check_decorate("test_panel_overlays:_second_only", s, rs,
                           projection=projection, x=x, y=y, panels=2)
    assert str(err.value) == ("config key 'decorate': 'test_panel_overlays:_second_only' "
                              "raised KeyError: 1")


def test_overlays_of_a_file_with_another_time_axis_are_matched_by_label(tmp_path):
    from test_panels import _write

    main = _write(tmp_path / "main.nc", start=2, n=4)
    other = _write(tmp_path / "other.nc", start=0, n=8, offset=10.0)  # steps 0..7, +10
    layout, labels = _plan(main, [{}, {"input": other, "contours": {"variable": "tas",
                                                                    "levels": [13.5]}}])
    limits = panel_statistics(layout, len(labels))
    assert limits[1]["overlays"]["contour_levels"] == [13.5]
    with PanelReader(layout) as reader:
        got = reader.read_overlays(1, 3)
    # Movie steps 1, 2 are the main file's days 3, 4: the other file's steps 3, 4.
    assert got[0] == []
    np.testing.assert_array_equal(got[1][0][0][:, 0, 0], [13.0, 14.0])
