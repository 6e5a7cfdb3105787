"""Map frames: projections, shipped coastlines drawn where they belong, no download."""

from __future__ import annotations

import numpy as np
import pytest
from ncreel.render.frame import FrameRenderer, frame_difference
from ncreel.render.maps import (
    border_lines,
    coastline_lines,
    map_features,
    map_projection,
    map_scale,
)
from ncreel.render.shard import map_settings

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
    import cartopy.crs as ccrs

    px, py = r.ax.projection.transform_point(lon, lat, ccrs.PlateCarree())
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


def test_robinson_index_frames_match_full_pcolormesh_draw():
    fast, full = _map_renderer("Robinson", borders=True), _map_renderer("Robinson",
                                                                         borders=True, blit=False)
    data = np.random.default_rng(0).normal(size=(NY, NX)).astype(np.float32)
    data[3:6, 10:20] = np.nan
    a, b = fast.draw(data, "x").copy(), full.draw(data, "x").copy()
    d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
    # Lines above the field round by one or two 8-bit levels (Agg blends in 8 bits); at
    # 320 x 180 they cover a large share of this small map.
    assert d["share_differing"] <= 0.2
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
    proj, features = map_settings({}, lon=LON, lat=LAT)
    assert type(proj).__name__ == "PlateCarree" and len(features) == 1
    proj, features = map_settings({"projection": "Robinson", "coastlines": False,
                                   "borders": True, "projection_params":
                                   {"central_longitude": 180}}, lon=LON, lat=LAT)
    assert type(proj).__name__ == "Robinson" and len(features) == 1
    assert map_settings({"coastlines": True}) == (None, [])  # plain grid indices
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
