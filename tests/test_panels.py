"""Panel layouts (``ncreel.render.panelplan``, ``ncreel.render.panels``): fast path vs full redraw,
time matching by label, per-panel limits, and bad layouts stopped with one line."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from layouts import LAT_ATTRS, LON_ATTRS, time_coord
from ncreel.config.settings import RenderSettings, SeriesSelection
from ncreel.core.errors import NcreelError
from ncreel.jobs.stats import panel_statistics
from ncreel.region.selection import open_selection
from ncreel.render.frame import frame_difference
from ncreel.render.maps import map_features, map_projection, map_scale
from ncreel.render.panelplan import PanelReader, plan_panels
from ncreel.render.panels import Panel, PanelRenderer, grid_size
from ncreel.render.segment import PanelFrames, time_labels
from ncreel.sample import sample_path

MAP = {"coastlines": None, "borders": False, "projection": "PlateCarree",
       "projection_params": {}}


def _exact(fast, full, frames):
    """Fast path vs full redraw over `frames` (lists of fields, one per panel)."""
    inner, area, step = fast.interior(), fast.map_area(), fast.level_step()
    worst = {"share_differing": 0.0, "max_difference": 0}
    for i, fields in enumerate(frames):
        a = fast.draw(fields, f"2000-01-{i + 1:02d}").copy()
        b = full.draw(fields, f"2000-01-{i + 1:02d}").copy()
        # Every map pixel within one colour level; away from cell edges (where only the
        # re-blended coastline and spine pixels differ) at most one 8-bit level.
        assert frame_difference(a, b, area=area, tolerance=step)["share_beyond"] == 0
        assert frame_difference(a, b, area=inner)["max_difference"] <= 1
        # Titles, colour bars, the time label: the same background in both paths.
        assert frame_difference(a, b, area=~area)["max_difference"] <= 2
        d = frame_difference(a, b, area=area)
        worst = {k: max(worst[k], d[k]) for k in worst}
    return worst


def test_2x2_layout_matches_a_full_redraw():
    ny, nx = 37, 49
    lon, lat = np.linspace(-140, -40, nx), np.linspace(10, 70, ny)
    proj = map_projection("PlateCarree", {"central_longitude": -90.0})
    feats = map_features(coastlines=True, borders=False, scale=map_scale(lon, lat))
    panels = [Panel(shape=(ny, nx), x=lon, y=lat, cmap=c, vmin=-2, vmax=2, title=f"p{i}",
                    units="K", projection=proj, features=feats)
              for i, c in enumerate(["viridis", "magma", "cividis", "RdBu_r"])]
    # A panel without a map (grid indices) in the layout too.
    panels[2] = Panel(shape=(20, 30), cmap="cividis", vmin=-2, vmax=2, title="indices")
    kw = {"width": 640, "height": 360, "dpi": 80, "time_labels": ["2000-01-01"]}
    fast, full = PanelRenderer(panels, **kw), PanelRenderer(panels, blit=False, **kw)
    assert (fast.rows, fast.columns) == (2, 2)
    rng = np.random.default_rng(1)
    frames = []
    for _ in range(3):
        fields = [rng.normal(size=p.shape) for p in panels]
        fields[0][3:6, 3:8] = np.nan  # transparent in both paths
        frames.append(fields)
    worst = _exact(fast, full, frames)
    # Measured: 0.2 % of map pixels (coastline pixels re-blended) differ, by one level.
    assert worst["share_differing"] <= 0.01 and worst["max_difference"] <= 1
    # Every panel is on screen with its own cells.
    for p, pixels in zip(panels, fast._pixels, strict=True):
        shown = pixels.colours.size - 1  # a colour per cell on screen, then transparent
        assert 0.9 * np.prod(p.shape) < shown <= np.prod(p.shape)
    # Each panel shows its own field: a changed field changes only its panel's box.
    a = fast.draw(frames[0], "x").copy()
    changed = [f.copy() for f in frames[0]]
    changed[3] = -changed[3]
    b = fast.draw(changed, "x").copy()
    diff = (a != b).any(-1)
    box = fast._box[3]
    assert diff[box].any()
    outside = diff.copy()
    outside[box] = False
    assert not outside.any()
    fast.close()
    full.close()


def _scenarios(columns=None):
    a, e = str(sample_path("A1B_north_america.nc")), str(sample_path("E1_north_america.nc"))
    sel = SeriesSelection(paths=(a,), variable="air_temperature", time_dim=None, select={},
                          lat=None, lon=None, time=None)
    cfg = {"input": a, "variable": "air_temperature", "select": {}, "sel": {}, "cmap": "viridis",
           "vmin": None, "vmax": None}
    panels = [{"name": "A1B"}, {"name": "E1", "input": e},
              {"difference_of": ["A1B", 1]}]
    with open_selection(sel) as s:
        labels = time_labels(s)
        layout = plan_panels(panels, config=cfg, selection=sel, movie_labels=labels,
                             movie_paths=s.paths, width=480, height=200, columns=columns)
    return layout, labels


def test_difference_panel_of_two_scenarios_matches_a_full_redraw():
    layout, labels = _scenarios(columns=3)
    assert [p["difference_of"] for p in layout["panels"]] == [None, None, [0, 1]]
    assert layout["panels"][2]["title"] == "A1B \u2212 E1"
    limits = panel_statistics(layout, len(labels))
    # Symmetric about zero: white is no difference.
    assert limits[2]["vmin"] == -limits[2]["vmax"] > -20
    render = RenderSettings.from_params({"width": 480, "height": 200, "dpi": 50,
                                         "cmap": "viridis", "map": MAP, "panels": layout})
    with PanelFrames(layout, render, limits, labels) as fast, \
            PanelFrames(layout, render, limits, labels, blit=False) as full:
        frames = [args[0] for _, args in fast.frames(0, 240, 2**20) if _ in (0, 120, 239)]
        np.testing.assert_allclose(frames[1][2], frames[1][0] - frames[1][1], rtol=1e-6)
        # Two different scenarios (the same in 1860, their common start).
        assert not np.allclose(frames[2][0], frames[2][1])
        worst = _exact(fast.renderer, full.renderer, frames)
    assert worst["max_difference"] <= 1


def _write(path, *, start, n, ny=4, nx=5, offset=0.0, name="tas", lat=None,
           units="days since 2000-01-01", data_units="K"):
    lat = np.linspace(-30, 30, ny) if lat is None else lat
    data = (offset + np.arange(start, start + n)[:, None, None]
            + np.zeros((n, ny, nx))).astype(np.float32)
    xr.Dataset({name: (("time", "lat", "lon"), data, {"units": data_units})},
               coords={"time": time_coord(n, start=start, units=units),
                       "lat": ("lat", lat, LAT_ATTRS),
                       "lon": ("lon", np.linspace(0, 80, nx), LON_ATTRS)}
               ).to_netcdf(path)
    return str(path)


def _plan(tmp_path, main, panels, *, width=480, height=270, columns=None, **top):
    sel = SeriesSelection(paths=(main,), variable="tas", time_dim=None, select={}, lat=None,
                          lon=None, time=None)
    cfg = {"input": main, "variable": "tas", "select": {}, "sel": {}, "cmap": "viridis",
           "vmin": None, "vmax": None, **top}
    with open_selection(sel) as s:
        labels = time_labels(s)
        return plan_panels(panels, config=cfg, selection=sel, movie_labels=labels,
                           movie_paths=s.paths, width=width, height=height,
                           columns=columns), labels


def test_files_with_different_time_axes_are_matched_by_label(tmp_path):
    main = _write(tmp_path / "main.nc", start=3, n=4)  # 2000-01-04 .. 01-07
    other = _write(tmp_path / "other.nc", start=0, n=10, offset=1000.0)  # 01-01 .. 01-10
    layout, labels = _plan(tmp_path, main, [{}, {"input": other}, {"difference_of": [1, 0]}])
    assert layout["panels"][1]["steps"] == [[0, 3, 4]]
    with PanelReader(layout) as reader:
        blocks = list(reader.iter_blocks(0, 4, max_bytes=1))  # one step per block
        assert len(blocks) == 4
        got = np.array([[b[k][0, 0, 0] for k in range(3)] for _, b in blocks])
    # The same dates in both panels: main's step t is other's step t + 3.
    np.testing.assert_array_equal(got[:, 0], [3, 4, 5, 6])
    np.testing.assert_array_equal(got[:, 1], [1003, 1004, 1005, 1006])
    np.testing.assert_array_equal(got[:, 2], [1000] * 4)


def test_a_step_missing_in_one_panel_is_one_line_naming_the_files(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=5)
    short = _write(tmp_path / "short.nc", start=0, n=3)
    with pytest.raises(NcreelError) as err:
        _plan(tmp_path, main, [{}, {"input": short}])
    text = str(err.value)
    assert "\n" not in text and "panels[1]" in text
    assert "short.nc" in text and "main.nc" in text and "2 of the 5 steps" in text


@pytest.mark.parametrize(("panels", "expect"), [
    ([{}, {"variable": "nope"}], ["panels[1]", "nope"]),
    ([{}, {"difference_of": [0, 5]}], ["panels[1].difference_of", "out of range", "0..1"]),
    ([{}, {"difference_of": [0, "B"]}], ["no panel is named 'B'"]),
    ([{}, {"difference_of": [0, 1]}], ["this panel"]),
    ([{"name": "a"}, {"name": "a"}], ["panels[1].name", "also the name"]),
    ([{}, {"difference_of": [0, 0], "variable": "tas"}], ["panels[1].variable", "remove"]),
])
def test_bad_layouts_stop_with_one_line(tmp_path, panels, expect):
    main = _write(tmp_path / "main.nc", start=0, n=2)
    with pytest.raises(NcreelError) as err:
        _plan(tmp_path, main, panels)
    text = str(err.value)
    assert "\n" not in text
    for part in expect:
        assert part in text, text


def test_difference_of_mismatched_grids_is_refused(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=2)
    other = _write(tmp_path / "other.nc", start=0, n=2, ny=6)
    shifted = _write(tmp_path / "shifted.nc", start=0, n=2, lat=np.linspace(-20, 40, 4))
    for path, grid in ((other, "6 x 5"), (shifted, "4 x 5")):
        with pytest.raises(NcreelError) as err:
            _plan(tmp_path, main, [{}, {"input": path}, {"difference_of": [0, 1]}])
        assert "not on the same grid" in str(err.value) and grid in str(err.value)


def test_difference_in_different_units_is_refused(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=2)
    celsius = _write(tmp_path / "c.nc", start=0, n=2, data_units="degC")
    with pytest.raises(NcreelError) as err:
        _plan(tmp_path, main, [{}, {"input": celsius}, {"difference_of": [0, 1]}])
    assert "different units ('K', 'degC'); a difference" in str(err.value)
    assert "\n" not in str(err.value)


def test_difference_in_two_spellings_of_one_unit_is_drawn(tmp_path):
    # CF units are UDUNITS strings: 'kelvin' is 'K' (refused as different before).
    main = _write(tmp_path / "main.nc", start=0, n=2)
    spelled = _write(tmp_path / "k.nc", start=0, n=2, data_units="kelvin")
    plan, _ = _plan(tmp_path, main, [{}, {"input": spelled}, {"difference_of": [0, 1]}])
    assert plan["panels"][2]["difference_of"] == [0, 1]
    assert plan["panels"][2]["units"] == "K"


def test_difference_in_units_ncreel_cannot_read_says_they_were_compared_as_text(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=2)
    odd = _write(tmp_path / "odd.nc", start=0, n=2, data_units="Kelvins please")
    with pytest.raises(NcreelError) as err:
        _plan(tmp_path, main, [{}, {"input": odd}, {"difference_of": [0, 1]}])
    assert "different units ('K', 'Kelvins please') (compared as text" in str(err.value)


@pytest.mark.parametrize("a, b, same", [
    ("K", "kelvin", True), ("K", "degK", True), ("m s-1", "m/s", True),
    ("kg m-2 s-1", "kg/m2/s", True), ("1", "dimensionless", True), ("degC", "C", True),
    ("K", "degC", False), ("hPa", "Pa", False), ("mm day-1", "kg m-2 s-1", False),
    ("K", "not a unit", None), ("  K", "K ", True),
])
def test_same_units_reads_udunits_spellings(a, b, same):
    from ncreel.input.units import same_units

    assert same_units(a, b) is same


def test_more_panels_than_fit_are_refused(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=2)
    with pytest.raises(NcreelError, match="do not fit a 160 x 96 frame"):
        _plan(tmp_path, main, [{}] * 9, width=160, height=96)  # 3 x 3 of 53 x 32 pixels
    assert _plan(tmp_path, main, [{}] * 4, width=160, height=96)[0]["columns"] is None
    assert grid_size(4) == (2, 2) and grid_size(3) == (2, 2) and grid_size(2) == (1, 2)
    assert grid_size(5, 5) == (1, 5) and grid_size(2, 9) == (1, 2)


def test_configured_panel_limits_and_difference_limits(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=3)
    other = _write(tmp_path / "other.nc", start=0, n=3, offset=2.0)
    layout, labels = _plan(tmp_path, main, [{"vmin": -1, "vmax": 9}, {"input": other},
                                            {"difference_of": [0, 1]}])
    limits = panel_statistics(layout, len(labels))
    assert (limits[0]["vmin"], limits[0]["vmax"]) == (-1.0, 9.0)
    # other - main is 2 everywhere: symmetric -2..2 (percentiles of a constant -2 field).
    assert (limits[2]["vmin"], limits[2]["vmax"]) == (-2.0, 2.0)
    assert limits[2]["min"] == limits[2]["max"] == -2.0
    # Top-level limits are every data panel's default; a difference keeps its own.
    layout, labels = _plan(tmp_path, main, [{}, {"input": other, "vmax": 20},
                                            {"difference_of": [0, 1]}], vmin=0.0, vmax=5.0)
    limits = panel_statistics(layout, len(labels))
    assert [(x["vmin"], x["vmax"]) for x in limits] == [(0.0, 5.0), (0.0, 20.0), (-2.0, 2.0)]


def test_a_mesh_panel_is_refused_naming_the_panel(tmp_path):
    from meshes import write_healpix

    main = _write(tmp_path / "main.nc", start=0, n=3, units="days since 2020-01-01")
    write_healpix(tmp_path / "hp.nc", 1)
    with pytest.raises(NcreelError) as err:
        _plan(tmp_path, main, [{}, {"input": str(tmp_path / "hp.nc")}])
    assert "panels[1]" in str(err.value) and "unstructured mesh" in str(err.value)
    assert "\n" not in str(err.value)


def test_panel_keys_are_settings_with_suggestions():
    from ncreel.cli import settings_detail
    from ncreel.config.configcheck import schema_error_message, unknown_key_message

    assert "Two other panels" in settings_detail("panels[].difference_of")
    assert "'panels[].name'" in unknown_key_message("nmae", "panels.0")
    import jsonschema
    from ncreel.config.configcheck import load_schema

    errors = list(jsonschema.Draft202012Validator(load_schema()).iter_errors(
        {"input": "a.nc", "variable": "v", "run": "r", "panels": [{"difference_of": [0]}]}))
    text = schema_error_message(errors[0])
    assert "panels.0.difference_of" in text and "ncreel settings panels[].difference_of" in text


def test_a_shard_job_stops_when_a_panel_file_was_replaced(tmp_path):
    from ncreel.cells import cells_settings
    from ncreel.config.settings import CellsSettings, EncodeSettings
    from ncreel.input.identity import input_identities
    from ncreel.jobs.shard import run_shard
    from ncreel.run.shardplan import Shard

    main = _write(tmp_path / "main.nc", start=0, n=3)
    other = _write(tmp_path / "other.nc", start=0, n=3, offset=5.0)
    layout, labels = _plan(tmp_path, main, [{}, {"input": other}])
    stats = {"vmin": 0.0, "vmax": 1.0, "inputs": input_identities([main, other]),
             "panels": panel_statistics(layout, len(labels))}
    (tmp_path / "stats.json").write_text(__import__("json").dumps(stats))
    np.save(tmp_path / "cell_mean.npy", np.zeros((4, 5)))
    _write(tmp_path / "other.nc", start=0, n=4, offset=5.0)  # replaced: one more step
    sel = SeriesSelection(paths=(main,), variable="tas", time_dim=None, select={}, lat=None,
                          lon=None, time=None)
    cells = CellsSettings.from_params(cells_settings(
        {"model": "field", "geometry": "none", "compression": "none",
         "compression_level": None, "params": {}}))
    render = RenderSettings.from_params({"width": 320, "height": 96, "dpi": 30,
                                         "cmap": "viridis", "map": MAP, "panels": layout})
    with pytest.raises(NcreelError, match="other.nc"):
        run_shard(sel, Shard(0, 0, 3), stats_json=tmp_path / "stats.json",
                  cell_mean_npy=tmp_path / "cell_mean.npy", frames_dir=tmp_path / "frames",
                  rows_path=tmp_path / "rows.copy", render=render,
                  segment=tmp_path / "seg.mp4", cells=cells,
                  encode=EncodeSettings(fps=10, crf=18, preset="ultrafast"))
    assert not (tmp_path / "seg.mp4").exists()


def test_wide_panels_leave_no_band_above_the_header():
    # Three wide maps side by side are limited by the frame's width; the height left over
    # was put above the header and panel titles (80 of 400 pixels); it goes below the
    # colour bars now, and the header stays at the top of the frame.
    ny, nx = 37, 49
    lon, lat = np.linspace(-130, -50, nx), np.linspace(15, 60, ny)
    proj = map_projection("PlateCarree", {})
    panels = [Panel(shape=(ny, nx), x=lon, y=lat, vmin=-1, vmax=1, title=f"p{i}", units="K",
                    projection=proj) for i in range(3)]
    r = PanelRenderer(panels, width=640, height=200, dpi=50, columns=3,
                      time_labels=["2099"], caption="a caption")
    rgba = r.draw([np.zeros((ny, nx))] * 3, "2099")
    ink = np.flatnonzero((rgba[..., :3] < 200).any(axis=(1, 2)))
    assert ink[0] <= 8, ink[0]  # the time label at the top (was 18 pixels down)
    # The maps sit just below the header: their titles within a few pixels of it.
    renderer = r.canvas.get_renderer()
    label_bottom = r.height - r.label.get_window_extent(renderer).y0
    title_top = r.height - max(ax.get_tightbbox(renderer).y1 for ax in r.axes)
    assert 0 <= title_top - label_bottom <= 10, (label_bottom, title_top)
    # The caption stays on the frame's last lines.
    assert ink[-1] >= r.height - 6
    r.close()


def test_the_background_rectangles_cover_the_frame_but_the_maps_once():
    from ncreel.render.frame import outside_boxes

    w, h = 50, 30
    boxes = [(slice(2, 12), slice(3, 20)), (slice(2, 12), slice(25, 49)),
             (slice(15, 30), slice(0, 10)), (slice(18, 25), slice(30, 50))]
    count = np.zeros((h, w), int)
    for rows, cols in outside_boxes((w, h), boxes):
        count[rows, cols] += 1
    inside = np.zeros((h, w), bool)
    for rows, cols in boxes:
        inside[rows, cols] = True
    assert (count[inside] == 0).all() and (count[~inside] == 1).all()
    assert outside_boxes((w, h), [(slice(0, h), slice(0, w))]) == []


@pytest.mark.parametrize("n, size, want", [
    (2, (1920, 1080), (1, 2)), (3, (1920, 1080), (2, 2)), (4, (1920, 1080), (2, 2)),
    (6, (1920, 1080), (2, 3)), (3, (1280, 360), (1, 3)), (4, (1280, 360), (1, 4)),
    (2, (1080, 1080), (2, 1)), (5, None, (2, 3)),
])
def test_default_grid_gives_the_maps_the_most_room(n, size, want):
    # Three panels on a 1280 x 360 frame were a 2 x 2 grid of small maps and a blank slot.
    from ncreel.render.panels import grid_size

    assert grid_size(n, None, size) == want
    assert grid_size(n, 2, size) == (-(-n // 2), 2)  # columns asked for are kept
