"""Overlays: contour lines and vectors drawn per frame, exact against a full redraw."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from ncreel.config.settings import RenderSettings, SeriesSelection
from ncreel.core.errors import NcreelError
from ncreel.region.selection import open_selection
from ncreel.render.frame import FrameRenderer, frame_difference
from ncreel.render.maps import PlainPlateCarree
from ncreel.render.overlays import (
    ContourOverlay,
    check_overlays,
    make_overlays,
    overlay_limits,
    read_overlay_fields,
)
from ncreel.render.segment import make_renderer

LON = np.arange(2.5, 360.0, 5.0)  # 72 columns, 0...360
LAT = np.arange(-87.5, 90.0, 5.0)  # 36 rows
CONTOURS = {"variable": "psl", "levels": 6, "colour": "black", "linewidth": 0.8}
VECTORS = {"u": "uas", "v": "vas", "density": 12, "colour": "white"}


def write_weather(path, n_time=4):
    """tas, psl, uas, vas on a global 0...360 grid; psl moves east with time."""
    t = np.arange(n_time)[:, None, None]
    lon, lat = np.meshgrid(LON, LAT)
    tas = 280 + 20 * np.cos(np.radians(lat)) + 0 * t
    psl = 1000 + 15 * np.sin(np.radians(lon - 10 * t)) * np.cos(np.radians(lat))
    uas = 10 * np.cos(np.radians(3 * lat)) + 0 * t
    vas = 5 * np.sin(np.radians(2 * lon - 20 * t)) * np.cos(np.radians(lat))
    dims = ("time", "lat", "lon")
    xr.Dataset({"tas": (dims, tas, {"units": "K"}), "psl": (dims, psl, {"units": "hPa"}),
                "uas": (dims, uas), "vas": (dims, vas),
                "orog": (("lat", "lon"), np.zeros(lon.shape)),
                "other": (("time", "y", "x"), np.zeros((n_time, 3, 4)))},
               coords={"time": ("time", np.arange(n_time), {"units": "days since 2000-01-01"}),
                       "lat": ("lat", LAT, {"units": "degrees_north"}),
                       "lon": ("lon", LON, {"units": "degrees_east"})}).to_netcdf(path)
    return path


def render(contours=None, vectors=None, **kw):
    return RenderSettings.from_params({
        "width": 240, "height": 150, "dpi": 50, "cmap": "viridis",
        "map": {"coastlines": True, "borders": False, "projection": "PlateCarree",
                "projection_params": {}},
        "contours": contours, "vectors": vectors, **kw})


def open_weather(tmp_path):
    path = write_weather(tmp_path / "w.nc")
    return open_selection(SeriesSelection(paths=[str(path)], variable="tas", time_dim=None,
                                          select={}, lat=None, lon=None, time=None))


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
@pytest.mark.parametrize("coastlines", [False, True])
def test_fast_path_with_overlays_matches_a_full_redraw(tmp_path, projection, coastlines):
    with open_weather(tmp_path) as s:
        limits = overlay_limits(s, CONTOURS, VECTORS)
        look = {"map": {"coastlines": coastlines, "borders": False, "projection": projection,
                        "projection_params": {}}}
        rs, plain = render(CONTOURS, VECTORS, **look), render(**look)
        fast = make_renderer(s, rs, vmin=280, vmax=300, overlay_limits=limits)
        full = make_renderer(s, rs, vmin=280, vmax=300, overlay_limits=limits, blit=False)
        bare = make_renderer(s, plain, vmin=280, vmax=300)
        bare_full = make_renderer(s, plain, vmin=280, vmax=300, blit=False)
        extra = read_overlay_fields(s, CONTOURS, VECTORS, 2, 3)
        fields = [tuple(a[0] for a in group) for group in extra]
        field = s.read(2, 3)[0]
        a = fast.draw(field, "x", fields).copy()
        b = full.draw(field, "x", fields).copy()
        c = bare.draw(field, "x").copy()
        inner = frame_difference(a, b, area=fast.interior())
        # The antialiased overlay lines are drawn by the same Agg artists onto the same
        # colours: inside the cells the fast path is exact, and where coastlines lie it is
        # as close as the frame without overlays (the coastlines' blend, within 1 of 255).
        base = frame_difference(c, bare_full.draw(field, "x"), area=bare.interior())
        assert inner["max_difference"] <= base["max_difference"] <= (1 if coastlines else 0)
        assert inner["share_differing"] <= base["share_differing"]
        # Over the whole map (cell edges, the map's boundary) beyond one colour level: as
        # many pixels as without overlays, plus lines crossing the curved boundary of a
        # Robinson map (0.09 % measured here).
        d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
        d0 = frame_difference(c, bare_full.draw(field, "x"), area=bare.map_area(),
                              tolerance=bare.level_step())
        assert d["share_beyond"] <= d0["share_beyond"] + 0.002, (d, d0)
        # ... and the overlays are there: many map pixels differ from the bare frame.
        drawn = frame_difference(a, c, area=fast.map_area())
        assert drawn["share_differing"] > 0.05, drawn
        # The next frame moves the lines (psl moves east).
        extra = read_overlay_fields(s, CONTOURS, VECTORS, 3, 4)
        a2 = fast.draw(s.read(3, 4)[0], "x", [tuple(x[0] for x in g) for g in extra])
        assert frame_difference(a, a2, area=fast.map_area())["share_differing"] > 0.01
        for r in (fast, full, bare, bare_full):
            r.close()


def test_contour_lines_lie_on_their_levels():
    # z = longitude: each level's line is the meridian at that longitude, on a map
    # centred on 180 (so x = lon - 180).
    lon, lat = np.arange(100.5, 260.0, 1.0), np.arange(-30.5, 31.0, 1.0)
    ov = ContourOverlay([150.0, 200.0])
    fig_r = FrameRenderer(shape=(lat.size, lon.size), width=200, height=120, dpi=50,
                          cmap="viridis", vmin=0, vmax=1, x=lon, y=lat,
                          projection=PlainPlateCarree(180.0), overlays=[ov])
    z = np.broadcast_to(lon, (lat.size, lon.size))
    lines = ov.lines(z)
    xs = sorted({round(float(np.median(line[:, 0])), 3) for line in lines})
    assert xs == [-30.0, 20.0]
    for line in lines:
        assert np.ptp(line[:, 0]) < 1e-9 and np.ptp(line[:, 1]) > 50
    fig_r.close()


def test_levels_and_scale_are_fixed_from_the_whole_series(tmp_path):
    with open_weather(tmp_path) as s:
        limits = overlay_limits(s, CONTOURS, VECTORS)
        psl = s.read_variable("psl", 0, s.n_time)
        u, v = s.read_variable("uas", 0, s.n_time), s.read_variable("vas", 0, s.n_time)
        levels = limits["contour_levels"]
        assert 4 <= len(levels) <= 8 and psl.min() <= min(levels) and max(levels) <= psl.max()
        assert limits["vector_speed"] == pytest.approx(np.hypot(u, v).max())
        assert overlay_limits(s, {**CONTOURS, "levels": [990, 1010]}, None) == {
            "contour_levels": [990.0, 1010.0]}
        # The overlays built from them keep them.
        c, vec = make_overlays(CONTOURS, VECTORS, limits)
        assert c.levels == levels and vec.speed == limits["vector_speed"]
        # A variable without time is drawn in every frame.
        (orog,) = read_overlay_fields(s, {**CONTOURS, "variable": "orog"}, None, 0, 3)
        assert orog[0].shape == (3, 36, 72)

def test_infinite_cells_leave_levels_and_scale_to_the_finite_values(tmp_path):
    # One +inf cell gave no contour level at all, and an infinite vector_speed that the
    # arrows replaced by 1 (arrows ten times too long, drawn over each other).
    path = write_weather(tmp_path / "w.nc")
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    finite = overlay_limits_of(path, CONTOURS, VECTORS)
    ds["psl"][:, 0, 0] = np.inf
    ds["vas"][1, 3, 5] = -np.inf
    ds.to_netcdf(tmp_path / "inf.nc")
    limits = overlay_limits_of(tmp_path / "inf.nc", CONTOURS, VECTORS)
    assert limits == finite and np.isfinite(limits["vector_speed"])
    assert len(limits["contour_levels"]) >= 4


def overlay_limits_of(path, contours, vectors):
    with open_selection(SeriesSelection(paths=[str(path)], variable="tas", time_dim=None,
                                        select={}, lat=None, lon=None, time=None)) as s:
        return overlay_limits(s, contours, vectors)



@pytest.mark.parametrize("contours, vectors, message", [
    ({**CONTOURS, "variable": "slp"}, None, "config 'contours.variable': input"),
    (None, {**VECTORS, "v": "vaz"}, "no variable 'vaz'"),
    ({**CONTOURS, "variable": "other"}, None, "has dims (time, y, x)"),
    (None, {**VECTORS, "colour": "whyte"}, "config 'vectors.colour': 'whyte' is not a"),
])
def test_bad_overlays_stop_before_any_job(tmp_path, contours, vectors, message):
    with open_weather(tmp_path) as s:
        with pytest.raises(NcreelError) as err:
            check_overlays(s, contours, vectors)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_u_without_v_is_a_schema_error():
    import jsonschema
    from ncreel.config.configcheck import load_schema, schema_error_message

    config = {"input": "a.nc", "variable": "tas", "run": "r", "vectors": {"u": "uas"}}
    errs = list(jsonschema.Draft202012Validator(load_schema()).iter_errors(config))
    assert len(errs) == 1
    message = schema_error_message(errs[0])
    assert "vectors.v" in message and "\n" not in message


@pytest.mark.parametrize("levels, variable, said", [
    ([2000.0, 3000.0], "psl", "no frame of 'psl' crosses any of the levels [2000, 3000] "
     "(its values over the run are 985.029..1014.97): no contour line is drawn in any frame"),
    ([1000.0, 3000.0], "psl", "no frame of 'psl' crosses the levels [3000] (its values "
     "over the run are 985.029..1014.97): those lines are never drawn"),
    (6, "blank", "'blank' (it has no finite value in any frame): no contour line is drawn"),
    (6, "orog", "no frame of 'orog' crosses any of the levels [0] (its values over the run "
     "are 0..0)"),
    ([1000.0, 1010.0], "psl", None),
])
def test_contour_levels_no_frame_crosses_are_said_once(tmp_path, caplog, levels, variable,
                                                       said):
    import logging

    path = write_weather(tmp_path / "w.nc")
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds["blank"] = ds["psl"] * np.nan
    ds.to_netcdf(tmp_path / "b.nc")
    contours = {**CONTOURS, "variable": variable, "levels": levels}
    with caplog.at_level(logging.WARNING, "ncreel.render.overlays"):
        limits = overlay_limits_of(tmp_path / "b.nc", contours, None)
    lines = [r.getMessage() for r in caplog.records if r.name == "ncreel.render.overlays"]
    if said is None:
        assert lines == [] and limits["contour_levels"] == levels
    else:
        assert len(lines) == 1 and said in lines[0], lines


def test_an_empty_contour_level_list_is_a_schema_error():
    import jsonschema
    from ncreel.config.configcheck import load_schema, schema_error_message

    config = {"input": "a.nc", "variable": "tas", "run": "r",
              "contours": {"variable": "psl", "levels": []}}
    errs = list(jsonschema.Draft202012Validator(load_schema()).iter_errors(config))
    assert len(errs) == 1
    message = schema_error_message(errs[0])
    assert "contours.levels" in message and "\n" not in message, message


def test_vector_arrows_are_subsampled_to_the_density(tmp_path):
    with open_weather(tmp_path) as s:
        (vec,) = make_overlays(None, VECTORS, {"vector_speed": 10.0})
        r = make_renderer(s, render(vectors=VECTORS), vmin=280, vmax=300,
                          overlay_limits={"vector_speed": 10.0})
        assert r.overlays[0].n_arrows == 12 * 6  # every 6th of 72 x 36 cells
        r.close()


def test_overlay_bench_smoke_prints_every_key():
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench" / "overlay_bench.py"
    proc = subprocess.run([sys.executable, str(bench), "--smoke"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    keys = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    for key in ("render_fps_plain", "render_fps_contours", "render_fps_vectors",
                "matplotlib_fps_contours", "matplotlib_fps_vectors",
                "contours_speedup_vs_matplotlib", "vectors_speedup_vs_matplotlib",
                "render_cpu_ms_contours", "render_cpu_ms_vectors",
                "matplotlib_cpu_ms_contours", "contours_speedup_vs_matplotlib_cpu",
                "vectors_speedup_vs_matplotlib_cpu", "matplotlib_one_draw_cpu_ms_contours",
                "contours_speedup_vs_one_draw_cpu", "vectors_speedup_vs_one_draw_cpu"):
        assert float(keys[key]) > 0, key
    assert int(keys["vector_arrows"]) > 0
    # The baseline is FuncAnimation.save itself: the draw_idle after the frame function
    # and grab_frame's savefig each draw the whole figure.
    assert float(keys["matplotlib_draws_per_frame"]) == 2.0
    assert keys["render_threads"] == "1"


@pytest.mark.parametrize("setting, stats, want", [
    (None, {"vmin": 1, "vmax": 2, "min": 0, "max": 3}, "both"),
    ("auto", {"vmin": 1, "vmax": 2, "min": 1, "max": 3}, "max"),
    ("auto", {"vmin": 1, "vmax": 2, "min": 0, "max": 2}, "min"),
    ("auto", {"vmin": 1, "vmax": 2, "min": 1, "max": 2}, "neither"),
    ("auto", {"vmin": 0, "vmax": 1}, "neither"),  # no data: limits 0..1
    ("neither", {"vmin": 1, "vmax": 2, "min": 0, "max": 3}, "neither"),
])
def test_colorbar_extend_from_the_data(setting, stats, want):
    from ncreel.render.segment import colorbar_extend

    assert colorbar_extend(setting, stats) == want


def test_colorbar_arrows_are_drawn_once_and_leave_the_map_alone(tmp_path):
    with open_weather(tmp_path) as s:
        field = s.read(0, 1)[0]
        frames = {}
        rs = render(map={"coastlines": False, "borders": False, "projection": "PlateCarree",
                         "projection_params": {}})
        for extend in ("neither", "both"):
            fast = make_renderer(s, rs, vmin=285, vmax=295, extend=extend)
            full = make_renderer(s, rs, vmin=285, vmax=295, extend=extend, blit=False)
            a, b = fast.draw(field, "x").copy(), full.draw(field, "x").copy()
            assert frame_difference(a, b, area=fast.interior())["max_difference"] == 0
            assert frame_difference(a, b, area=~fast.map_area())["max_difference"] <= 2
            frames[extend] = a
            area = fast.map_area()
            assert len(fast.colorbar._extend_patches) == (2 if extend == "both" else 0)
            fast.close()
            full.close()
    plain, arrows = frames["neither"], frames["both"]
    assert (plain[area] == arrows[area]).all()
    assert (plain[~area] != arrows[~area]).any(axis=-1).sum() > 20


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
@pytest.mark.parametrize("region", [None, {"lon": [-110.3, -80], "lat": [25, 50]}])
def test_gridlines_are_labelled_and_composited_like_coastlines(tmp_path, projection, region):
    from ncreel.render.maps import degree_label

    assert [degree_label(v, "lon") for v in (0, 30, -120, 180, 200)] == [
        "0°", "30°E", "120°W", "180°", "160°W"]
    assert [degree_label(v, "lat") for v in (0, 45, -15)] == ["0°", "45°N", "15°S"]
    from ncreel.region.spec import region_from_config

    reg = region_from_config(region)
    path = write_weather(tmp_path / "w.nc")
    with open_selection(SeriesSelection(
            paths=[str(path)], variable="tas", time_dim=None, select={}, lat=None, lon=None,
            time=None, region=None if reg is None else reg.to_params())) as s:
        look = {"coastlines": False, "borders": False, "projection": projection,
                "projection_params": {}}
        field = s.read(0, 1)[0]
        frames = {}
        for grid in (False, True):
            rs = render(map={**look, "gridlines": grid})
            assert ("gridlines" in rs.to_params()["map"]) == grid
            fast = make_renderer(s, rs, vmin=285, vmax=295)
            full = make_renderer(s, rs, vmin=285, vmax=295, blit=False)
            a, b = fast.draw(field, "x").copy(), full.draw(field, "x").copy()
            # Gridlines are blended onto each frame as coastlines are: within 1 of 255.
            assert frame_difference(a, b, area=fast.interior())["max_difference"] <= 1
            frames[grid] = (a, fast.interior())
            if grid:
                ax = fast.ax
                if projection == "PlateCarree":  # the axes' own tick labels
                    texts = [t.get_text() for t in (*ax.get_xticklabels(),
                                                    *ax.get_yticklabels())]
                else:  # cartopy's gridliner, labelled at draw time
                    (gl,) = [a for a in ax.artists if hasattr(a, "label_artists")]
                    texts = [t.get_text() for t in gl.label_artists]
                assert any(t.endswith("N") for t in texts) and any(
                    t.endswith(("E", "W")) for t in texts), texts
                # Round degrees (whole or half), whatever the map's centre.
                assert all(float(t.rstrip("NSEW°").replace("°", "")) % 0.5 == 0
                           for t in texts if t), texts
            fast.close()
            full.close()
    (plain, area), (gridded, _) = frames[False], frames[True]
    assert (plain[area] != gridded[area]).any(axis=-1).sum() > 50  # lines on the map


@pytest.mark.parametrize("box, size", [({"lon": [170, -170], "lat": [-30, 30]}, (480, 270)),
                                       ({"lon": [10, 14], "lat": [-60, 60]}, (480, 270)),
                                       (None, (160, 96)), (None, (960, 540))])
def test_gridline_labels_do_not_overlap(tmp_path, box, size):
    # A tall, narrow region got five longitude labels on a 65 pixel wide map, printed
    # over each other ("170°E175°E180°175°W170°W"); a 160 x 96 frame, three latitude
    # labels in 40 pixels.
    from ncreel.region.spec import region_from_config

    reg = region_from_config(box)
    path = write_weather(tmp_path / "w.nc")
    with open_selection(SeriesSelection(
            paths=[str(path)], variable="tas", time_dim=None, select={}, lat=None, lon=None,
            time=None, region=None if reg is None else reg.to_params())) as s:
        rs = render(map={"coastlines": False, "borders": False, "projection": "PlateCarree",
                         "projection_params": {}, "gridlines": True}, width=size[0],
                    height=size[1], dpi=100)
        r = make_renderer(s, rs, vmin=285, vmax=295)
        r.draw(s.read(0, 1)[0], "x")
        renderer = r.fig.canvas.get_renderer()
        area = r.ax.get_window_extent(renderer)
        for labels, side in ((r.ax.get_xticklabels(), "x"), (r.ax.get_yticklabels(), "y")):
            lo, hi = getattr(area, f"interval{side}")
            spans = sorted(tuple(getattr(b, f"interval{side}")) for b in (
                t.get_window_extent(renderer) for t in labels if t.get_text())
                if lo - 1 <= sum(getattr(b, f"interval{side}")) / 2 <= hi + 1)
            assert len(spans) >= (3 if size[0] >= 960 else 1)
            assert all(a[1] < b[0] for a, b in zip(spans[:-1], spans[1:], strict=True)), (
                side, spans)
        r.close()


@pytest.mark.parametrize("size", [(480, 270), (160, 96)])
def test_caption_sits_below_the_map_in_one_line(tmp_path, size):
    caption = ("HadCM3 A1B scenario, air temperature at 1.5 m; iris-sample-data, UK Open "
               "Government Licence $x$")
    with open_weather(tmp_path) as s:
        rs = render(caption=caption, width=size[0], height=size[1])
        assert rs.to_params()["caption"] == caption
        fast = make_renderer(s, rs, vmin=285, vmax=295)
        full = make_renderer(s, rs, vmin=285, vmax=295, blit=False)
        field = s.read(0, 1)[0]
        a, b = fast.draw(field, "x").copy(), full.draw(field, "x").copy()
        assert frame_difference(a, b, area=~fast.map_area())["max_difference"] <= 2
        renderer = fast.canvas.get_renderer()
        (text,) = [t for t in fast.fig.texts if t.get_text().startswith("HadCM3")]
        box = text.get_window_extent(renderer)
        shown = text.get_text()
        assert "\n" not in shown  # one line: the whole caption (no mathtext) or cut
        assert shown == caption or (shown.endswith("\u2026") and size[0] < 200), shown
        assert box.x0 >= 0 and box.x1 <= size[0] and box.y0 >= 0
        # Below the map and the colour bar (display y grows upwards).
        for ax in fast.fig.axes:
            assert ax.get_window_extent(renderer).y0 >= box.y1 - 1
        fast.close()
        full.close()


def test_overlays_on_a_mesh_are_refused_before_any_job(tmp_path):
    from meshes import voronoi_mesh, write_ugrid

    path = tmp_path / "mesh.nc"
    write_ugrid(path, voronoi_mesh(60))
    with open_selection(SeriesSelection(paths=[str(path)], variable="sst", time_dim=None,
                                        select={}, lat=None, lon=None, time=None)) as s:
        with pytest.raises(NcreelError, match="not supported yet on unstructured meshes"):
            check_overlays(s, {**CONTOURS, "variable": "sst"}, None)


@pytest.mark.parametrize("kind, message", [
    ("rotated", "overlays are not supported yet on grids in projection x/y with a CF grid "
     "mapping"),
    ("lambert", "overlays are not supported yet on grids in projection x/y with a CF grid "
     "mapping"),
    ("projected", "overlays need a grid with latitude/longitude cell centres"),
])
@pytest.mark.parametrize("key", ["contours", "vectors"])
def test_overlays_on_projected_grids_stop_before_any_job(tmp_path, kind, message, key):
    import grid_files
    import yaml
    from conftest import ROOT
    from ncreel.jobs.runconfig import load_config
    from snakemake.utils import validate

    write = {"rotated": grid_files.write_rotated_pole, "lambert": grid_files.write_lambert,
             "projected": grid_files.write_projected_no_mapping}[kind]
    path = write(tmp_path / f"{kind}.nc")[0]
    with xr.open_dataset(path) as ds:
        variable = next(n for n in ds.data_vars if ds[n].ndim == 3)
    overlay = ({"variable": variable} if key == "contours"
               else {"u": variable, "v": variable})
    config = {**yaml.safe_load((ROOT / "config" / "config.yaml").read_text()),
              "input": str(path), "variable": variable, key: overlay}
    with pytest.raises(NcreelError) as err:
        load_config(config, validate=validate)
    assert f"config '{key}': {message}" in str(err.value) and "\n" not in str(err.value)


def test_overlays_on_a_curvilinear_grid_across_the_dateline_follow_the_field(tmp_path):
    # 2-D latitude/longitude are supported: the lines lie on the grid's cells where the
    # map shows them (not wrapped to the map's other side).
    from layouts import write_curvilinear

    path, truth = write_curvilinear(tmp_path / "c.nc", ny=12, nx=16, dlon=2.0, lon0=170.0)
    contours = {**CONTOURS, "variable": "tas", "levels": 4}
    with open_selection(SeriesSelection(paths=[str(path)], variable="tas", time_dim=None,
                                        select={}, lat=None, lon=None, time=None)) as s:
        check_overlays(s, contours, None)
        limits = overlay_limits(s, contours, None)
        fast = make_renderer(s, render(contours), vmin=0, vmax=1, overlay_limits=limits)
        field = s.read(0, 1)[0]
        fast.draw(field, "x", [(field,)])
        x, y = fast.overlays[0].artist.get_data()
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x)
    assert ok.sum() > 20
    # Map x is longitude minus the map's centre (the grid's), so the lines span the grid.
    lon = truth["lon_cont"] - np.mean([truth["lon_cont"].min(), truth["lon_cont"].max()])
    assert lon.min() - 1 <= x[ok].min() and x[ok].max() <= lon.max() + 1
    assert truth["lat"].min() - 1 <= y[ok].min() and y[ok].max() <= truth["lat"].max() + 1


def test_contour_lines_reach_the_grid_edge_and_skip_no_level():
    # The traced grid is every k-th cell and always the last one: a line in the last
    # k - 1 columns was missing (it stopped short of the map's edge).
    import contourpy

    lon, lat = 100.5 + 0.5 * np.arange(303), np.arange(-30.5, 31.0, 1.0)
    z = np.broadcast_to(lon, (lat.size, lon.size)).copy()
    edge = (lon[-2] + lon[-1]) / 2  # between the last two columns
    ov = ContourOverlay([120.0, edge, 500.0])  # 500: above every value
    r = FrameRenderer(shape=(lat.size, lon.size), width=200, height=120, dpi=50,
                      cmap="viridis", vmin=0, vmax=1, x=lon, y=lat,
                      projection=PlainPlateCarree(180.0), overlays=[ov])
    assert ov._k >= 2 and (lon.size - 1) % ov._k != 0  # the last column is not a k-th one
    xs = sorted(round(float(np.median(line[:, 0])), 6) for line in ov.lines(z))
    assert xs == [round(120.0 - 180.0, 6), round(edge - 180.0, 6)]
    # With a missing cell (masked) and without, the lines are contourpy's on the traced
    # cells, at all levels (a level outside the frame's values only costs a pass).
    z[5, 7] = np.nan
    sub = np.ix_(ov._rows, ov._take)
    gen = contourpy.contour_generator(ov._lon, ov._lat, np.ma.masked_invalid(z[sub]),
                                      line_type=contourpy.LineType.Separate)
    want = sorted((line - [180.0, 0.0]).round(9).tobytes()
                  for level in ov.levels for line in gen.lines(level))
    got = sorted(line.round(9).tobytes() for line in ov.lines(z))
    assert got == want and len(got) >= 2
    r.close()


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
def test_overlays_of_a_0_360_grid_equal_those_of_the_same_grid_from_180w(projection):
    # A 0...360 grid is reordered to the map's columns: only the traced / arrow cells are
    # gathered each frame, and the lines and arrows are those of the grid given in order.
    from ncreel.render.maps import map_projection

    lon360 = np.arange(2.5, 360.0, 5.0)
    order = np.argsort(np.where(lon360 > 180, lon360 - 360, lon360))
    lon, lat = np.meshgrid(lon360, LAT)
    psl = 1000 + 15 * np.sin(np.radians(2 * lon)) * np.cos(np.radians(lat))
    u, v = 10 * np.cos(np.radians(3 * lat)), 5 * np.sin(np.radians(lon))
    drawn = []
    for x, cols in ((lon360, slice(None)), (np.where(lon360 > 180, lon360 - 360, lon360)[
            order], order)):
        c, vec = ContourOverlay([995.0, 1005.0]), make_overlays(
            None, VECTORS, {"vector_speed": 12.0})[0]
        r = FrameRenderer(shape=psl.shape, width=240, height=150, dpi=50, cmap="viridis",
                          vmin=0, vmax=1, x=x, y=LAT, overlays=[c, vec],
                          projection=map_projection(projection, {}))
        r.draw(psl[:, cols], "x", [(psl[:, cols],), (u[:, cols], v[:, cols])])
        drawn.append((c.vertices(psl[:, cols]), vec.artist.get_path().vertices.copy()))
        r.close()
    (c0, a0), (c1, a1) = drawn
    assert len(c0) > 20 and len(a0) > 20
    np.testing.assert_allclose(c0, c1, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a0, a1, rtol=0, atol=1e-9)


def test_line_blend_table_is_aggs_formula(monkeypatch):
    # Black lines (coastlines) at every coverage a, drawn on black and white as Agg blends
    # them, re-blended onto every colour c exactly as Agg would there; and for any lines
    # (crossing ones interpolate), the tabulated blend equals the integer arithmetic
    # (used past the table's bound).
    import ncreel.render.frame as frame_mod
    from ncreel.render.frame import AggOverlay

    a = np.arange(256)[:, None]

    def agg(c, a, line):
        return (c * 255 * (256 - a) + line * 256 * a) // (65280 + a)

    rng = np.random.default_rng(1)
    f0 = np.vstack([np.broadcast_to(agg(0, a, 0), (256, 3)), rng.integers(0, 256, (400, 3))])
    f1 = np.vstack([np.broadcast_to(agg(255, a, 0), (256, 3)), rng.integers(0, 256, (400, 3))])
    rgba = np.zeros((len(f0), 256, 4), np.uint8)
    rgba[..., :3] = np.arange(256, dtype=np.uint8)[None, :, None]
    rgba[..., 3] = 200
    c = rgba.reshape(-1, 4)
    idx = np.repeat(np.arange(len(f0)), 256)
    sub = AggOverlay(f0[idx], f1[idx])
    assert sub._lut is not None
    got = sub.blend(c)
    assert (got[:, 3] == 200).all()
    black = got[:256 * 256, 0].astype(int).reshape(256, 256)
    assert (black == agg(np.arange(256)[None, :], a, 0)).all()
    monkeypatch.setattr(frame_mod, "MAX_BLEND_TABLE", 100)  # more blends: the arithmetic
    plain = AggOverlay(f0[idx], f1[idx])
    assert plain._lut is None
    assert np.array_equal(plain.blend(c), got)


def test_contours_traced_on_every_kth_cell_lie_on_those_traced_on_every_cell():
    # The traced grid is coarsened to CONTOUR_PIXELS_PER_CELL frame pixels per traced cell:
    # on a smooth field the lines drawn stay within a tenth of a pixel of the lines traced
    # on every cell (0.09 here, every 8th cell traced; docs/movies.md gives the figures at
    # 1920 x 1080).
    import contourpy
    import shapely

    lon, lat = np.arange(-59.875, 60.0, 0.25), np.arange(-29.875, 30.0, 0.25)
    lon2, lat2 = np.meshgrid(lon, lat)
    z = 20 * np.sin(np.radians(3 * lon2)) * np.cos(np.radians(4 * lat2))
    levels = [-15.0, -5.0, 5.0, 15.0]
    ov = ContourOverlay(levels)
    r = FrameRenderer(shape=z.shape, width=240, height=130, dpi=50, cmap="viridis",
                      vmin=-20, vmax=20, x=lon, y=lat, projection=PlainPlateCarree(0.0),
                      overlays=[ov])
    assert ov._k == 8
    px_per_degree = r.ax.bbox.width / np.ptp(r.ax.get_xlim())
    full = contourpy.contour_generator(lon2, lat2, z, line_type=contourpy.LineType.Separate)
    ref = shapely.MultiLineString([line for v in levels for line in full.lines(v)])
    got = ov.lines(z)
    assert len(got) >= 8
    d = shapely.distance(shapely.points(np.concatenate(got)), ref) * px_per_degree
    assert d.max() < 0.1, d.max()
    r.close()
