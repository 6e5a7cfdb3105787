"""Map frames: projections, shipped coastlines drawn where they belong, no download."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from ncreel.config.settings import MapSettings, RenderSettings
from ncreel.region.naturalearth import border_lines, coastline_lines
from ncreel.render.frame import FrameRenderer, frame_difference
from ncreel.render.maps import PlainPlateCarree, map_features, map_projection, map_scale, map_xy
from ncreel.render.segment import map_settings

NY, NX = 36, 72
LAT = np.linspace(87.5, -87.5, NY)
LON = np.arange(NX) * 5.0 - 177.5


def _map_renderer(projection="PlateCarree", *, blit=True, coastlines=True, borders=False,
                  size=(320, 180, 60)):
    w, h, dpi = size
    return FrameRenderer(shape=(NY, NX), width=w, height=h, dpi=dpi, cmap="viridis",
                         vmin=-2.0, vmax=2.0, x=LON, y=LAT, blit=blit,
                         projection=map_projection(projection),
                         features=map_features(coastlines=coastlines, borders=borders))


def _pixel(r, lon, lat):
    px, py = map_xy(r.projection, lon, lat)
    col, row = r.ax.transData.transform((px, py))
    return int(r.height - row), int(col)


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
def test_coastline_is_drawn_at_a_known_coastal_pixel(projection):
    # Cap Vert (Dakar), the westernmost point of Africa: a vertex of the shipped 1:110m
    # land ring. A uniform field, so only a coastline can darken a pixel there.
    coast = np.vstack(coastline_lines("110m"))
    lon, lat = coast[np.argmin(np.hypot(coast[:, 0] + 17.5, coast[:, 1] - 14.7))]
    assert abs(lon + 17.5) < 1 and abs(lat - 14.7) < 1
    field = np.full((NY, NX), 2.0, np.float32)  # viridis top: yellow (253, 231, 37)
    with_coast = _map_renderer(projection).draw(field, "").copy()
    without = _map_renderer(projection, coastlines=False).draw(field, "").copy()
    row, col = _pixel(_map_renderer(projection, coastlines=False), lon, lat)
    near = (slice(row - 1, row + 2), slice(col - 1, col + 2))
    assert (with_coast[near][..., :3].astype(int).sum(-1) < 400).any()  # black line nearby
    assert (without[near][..., :3] == (253, 231, 37)).all()
    # Open ocean (mid South Atlantic) shows the field's colour, untouched.
    row, col = _pixel(_map_renderer(projection, coastlines=False), -25.0, -30.0)
    assert (with_coast[row, col, :3] == (253, 231, 37)).all()


@pytest.mark.parametrize(("projection", "borders", "share"), [("PlateCarree", False, 0.01),
                                                              ("Robinson", True, 0.06)])
def test_map_index_frames_match_full_pcolormesh_draw(projection, borders, share):
    fast = _map_renderer(projection, borders=borders)
    full = _map_renderer(projection, borders=borders, blit=False)
    data = np.random.default_rng(0).normal(size=(NY, NX)).astype(np.float32)
    data[3:6, 10:20] = np.nan
    a, b = fast.draw(data, "x").copy(), full.draw(data, "x").copy()
    d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
    # Coastlines are re-blended exactly as Agg blends them (measured 0.013 % of the map
    # differ, by one level). Where borders cross coastlines, and on Robinson's
    # anti-aliased outline, two layers meet and are interpolated: at 320 x 180 that is
    # 5.3 % of this small map (0.013 % of a 1920 x 1080 one). Two black coastline
    # segments in one pixel blend like one line of their combined coverage, up to Agg's
    # rounding: re-blended as that line, such a pixel is 2 levels off (measured: 1 pixel).
    assert d["share_differing"] <= share
    if projection == "PlateCarree":
        assert d["max_difference"] <= 2
    # Beyond one colour level only on cell edges and the map's anti-aliased boundary.
    inner = fast.interior()
    assert frame_difference(a, b, area=inner, tolerance=fast.level_step())["share_beyond"] == 0


def test_shipped_geometry_and_scale():
    assert map_scale(LON, LAT) == "110m"
    assert map_scale(np.array([5.0, 30.0]), np.array([40.0, 60.0])) == "50m"
    for lines in (coastline_lines("110m"), coastline_lines("50m"), border_lines()):
        assert len(lines) > 50
        for line in lines:  # no line jumps across the map at the antimeridian
            assert np.abs(np.diff(line[:, 0])).max() <= 180
    assert len(np.vstack(coastline_lines("50m"))) > 3 * len(np.vstack(coastline_lines("110m")))


def test_map_settings_defaults_and_errors():
    default = MapSettings(coastlines=None, borders=False, projection="PlateCarree",
                          projection_params={})
    proj, features = map_settings(default, lon=LON, lat=LAT)
    assert isinstance(proj, PlainPlateCarree) and len(features) == 1
    proj, features = map_settings(MapSettings(projection="Robinson", coastlines=False,
                                              borders=True, projection_params=
                                              {"central_longitude": 180}), lon=LON, lat=LAT)
    assert type(proj).__name__ == "Robinson" and len(features) == 1
    assert map_settings(replace(default, coastlines=True)) == (None, [])  # grid indices
    with pytest.raises(ValueError, match="Robinsn"):
        map_projection("Robinsn")
    with pytest.raises(ValueError, match="projection_params"):
        map_projection("Robinson", {"central_latitude": 3})


def test_regional_map_is_centred_on_its_grid():
    """A grid across 180 degrees is drawn in one piece; a global grid stays centred on 0."""
    from ncreel.render.maps import central_longitude

    lon_pacific = np.array([[150.0, 160.0, 170.0, 180.0, 190.0], [152.0, 162.0, 172.0, 182.0,
                                                                  192.0]])
    assert central_longitude(lon_pacific) == pytest.approx(171.0)
    assert central_longitude(np.arange(0.0, 360.0, 0.25)) is None
    assert central_longitude(np.array([225.0, 315.0])) == pytest.approx(-90.0)


def test_plain_platecarree_draws_cartopys_map_without_importing_it():
    """PlateCarree on plain axes is cartopy's PlateCarree map; the worker never loads cartopy."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import cartopy.crs as ccrs

    kw = {"shape": (NY, NX // 4), "width": 320, "height": 180, "dpi": 60, "cmap": "viridis",
          "vmin": -2.0, "vmax": 2.0, "x": LON[:NX // 4], "y": LAT,
          "features": map_features(coastlines=True, borders=True)}
    data = np.random.default_rng(1).normal(size=kw["shape"]).astype(np.float32)
    # A regional grid west of the antimeridian, centred on itself (-140 degrees).
    plain = FrameRenderer(projection=map_projection("PlateCarree", {"central_longitude": -140}),
                          **kw).draw(data, "x").copy()
    geo = FrameRenderer(projection=ccrs.PlateCarree(central_longitude=-140),
                        **kw).draw(data, "x").copy()
    # Coastline and border pixels rasterised a little differently: 0.19-0.22 % of the
    # frame, measured, as the map's place in the frame moves.
    assert frame_difference(plain, geo)["share_differing"] <= 0.003
    code = ("import sys, numpy as np; from ncreel.render.segment import map_settings; "
            "from ncreel.render.frame import FrameRenderer; "
            "from ncreel.config.settings import MapSettings; "
            "p, f = map_settings(MapSettings(coastlines=None, borders=False, "
            "projection='PlateCarree', projection_params={}), lon=np.arange(-120.0, -60.0, 5.0), "
            "lat=np.arange(20.0, 60.0, 5.0)); "
            "FrameRenderer(shape=(8, 12), width=64, height=48, dpi=20, cmap='viridis', "
            "vmin=0, vmax=1, x=np.arange(-120.0, -60.0, 5.0), y=np.arange(20.0, 60.0, 5.0), "
            "projection=p, features=f).draw(np.zeros((8, 12)), 'x'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('cartopy', 'pyproj', 'shapely')))")
    workflow = str(Path(__file__).resolve().parents[1] / "workflow")  # this tree's ncreel
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": workflow})
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("attrs", [{"units": "degrees_east"},
                                   {"long_name": "Longitude", "units": "degrees_east"}])
def test_grid_with_lat_lon_by_units_gets_a_map(tmp_path, attrs):
    """Latitude/longitude found by CF units (no long_name, or a capitalised one): a map."""
    import xarray as xr
    from ncreel.input.source import open_series
    from ncreel.render.segment import make_renderer

    lat_attrs = {"units": "degrees_north", **({"long_name": "Latitude"}
                                             if "long_name" in attrs else {})}
    path = tmp_path / "g.nc"
    xr.Dataset({"tas": (("time", "lat", "lon"), np.zeros((1, NY, NX), np.float32),
                        {"units": "K"})},
               coords={"time": ("time", [0.0], {"units": "days since 2000-01-01"}),
                       "lat": ("lat", LAT, lat_attrs), "lon": ("lon", LON, attrs)}
               ).to_netcdf(path)
    with open_series(str(path), "tas") as s:
        render = RenderSettings(width=64, height=48, dpi=20, cmap="viridis",
                                map=MapSettings(coastlines=None, borders=False,
                                                projection="PlateCarree",
                                                projection_params={}))
        r = make_renderer(s, render, vmin=0.0, vmax=1.0)
    assert isinstance(r.projection, PlainPlateCarree)
    r.close()


@pytest.mark.parametrize("name", ["Robinson", "Mollweide", "PlateCarree"])
def test_the_map_edge_column_is_drawn_whatever_the_central_longitude(name):
    # A column edge exactly on the map's edge meridian (central_longitude + 180) could be
    # projected to the opposite side; the whole column was then hidden as a cell spanning
    # the map: a white band one cell wide at the right (or left) edge of the map.
    from ncreel.render.frame import geo_mesh

    lon, lat = np.arange(0.5, 360.0, 1.0), np.arange(-89.5, 90.0, 1.0)
    areas = {}
    for centre in (0, 150, -100, 10, 180):
        projection = map_projection(name, {"central_longitude": centre})
        assert geo_mesh(projection, lon, lat)[3].sum() == 0, centre
        r = FrameRenderer(shape=(lat.size, lon.size), width=480, height=270, dpi=50,
                          cmap="viridis", vmin=0, vmax=1, x=lon, y=lat, projection=projection)
        areas[centre] = int(r.map_area().sum())
        r.close()
    assert len(set(areas.values())) == 1, areas


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
def test_frames_with_and_without_missing_cells_agree_around_them(projection):
    # A frame whose cells are all opaque writes the map's box once (the background only
    # around it and where no cell lies); one with a missing cell blends the whole
    # background in. The two ways give the same pixels everywhere but on that cell.
    fast = _map_renderer(projection, coastlines=True)
    data = np.random.default_rng(1).normal(size=(NY, NX))
    a = fast.draw(data, "x").copy()
    empty = ~fast.map_area()
    gap = data.copy()
    gap[NY // 2, NX // 3] = np.nan
    b = fast.draw(gap, "x").copy()
    index = fast.cell_index()
    cell = index == (NY // 2) * NX + NX // 3
    assert cell.sum() > 4 and (a[cell] != b[cell]).any()
    assert (a[~cell] == b[~cell]).all()
    # Where no cell lies in the map's box (a Robinson map's corners), the background.
    inbox = np.zeros_like(empty)
    inbox[fast._box] = True
    empty &= inbox
    assert empty.sum() > (100 if projection == "Robinson" else -1)
    assert (a[empty] == fast._background[empty]).all()
    # Both ways equal a full redraw as before (see the test above): here, the missing
    # cell shows the background.
    assert (b[cell] == fast._background[cell]).all()
