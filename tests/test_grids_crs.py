"""Grids in projection x/y with a CF grid mapping, and grids without usable coordinates.

Rotated pole (CORDEX), Lambert conformal (WRF, x/y in km) and polar stereographic files
are written small; table latitude/longitude and cell corners are checked against the
rotated-pole formula and against pyproj given PROJ strings / EPSG codes (not the CF
attributes ncreel reads), and frames by reading each cell's colour at its centre through
the map projection.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import shapely
from grid_files import (
    unrotate,
    write_lambert,
    write_latlon2d_no_attributes,
    write_polar_stereographic,
    write_projected_no_mapping,
    write_rotated_pole,
)
from ncreel.cells import CellContext, CellGeometry, ShardRows, cells_settings, field_model
from ncreel.config.settings import CellsSettings, RenderSettings, SeriesSelection
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.region.selection import open_selection
from ncreel.render.segment import make_renderer
from test_layouts import colour, pixel


def render_settings(projection="PlateCarree", params=None, width=96, height=64):
    return RenderSettings.from_params({
        "width": width, "height": height, "dpi": 20, "cmap": "viridis",
        "map": {"coastlines": False, "borders": False, "projection": projection,
                "projection_params": dict(params or {})}})


def assert_cells_drawn_in_place(series, truth_field, lats, lons, *, settings, blit, t=1):
    """Each cell centre (true lat/lon, through the map projection) shows that cell's colour."""
    vmin, vmax = float(truth_field.min()), float(truth_field.max())
    r = make_renderer(series, settings, vmin=vmin, vmax=vmax, blit=blit)
    rgba = r.draw(series.read(t, t + 1)[0], "").copy()
    assert r.projection is not None
    for iy in range(lats.shape[0]):
        for ix in range(lats.shape[1]):
            got = pixel(r, rgba, lons[iy, ix], lats[iy, ix])
            want = colour(truth_field[t, iy, ix], vmin, vmax)
            assert np.abs(got - want).max() <= 4, (iy, ix, got, want)
    r.close()


def polygon_points(geometry: CellGeometry, n: int) -> np.ndarray:
    """(n, 5, 2) lon/lat of the EWKT rings."""
    out = []
    for poly in geometry.polygons(np.arange(n)):
        ring = poly[poly.index("(((") + 3:-3].split(",")
        out.append([tuple(map(float, p.split())) for p in ring])
    return np.array(out)


# rotated pole -----------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [{}, {"north_first": True, "bounds": True},
                                {"extended": True}])
def test_rotated_pole_lat_lon_corners_and_rows_are_geographic(tmp_path, kw):
    path, truth = write_rotated_pole(tmp_path / "eur11.nc", **kw)
    with open_series(str(path), "tas") as s:
        assert (s.y_dim, s.x_dim, s.lat_name, s.lon_name) == ("rlat", "rlon", None, None)
        assert s.mapping.kind == "rotated_latitude_longitude"
        np.testing.assert_array_equal(s.read(0, 2), truth["field"])
        lat, lon = s.cell_coordinates()
        np.testing.assert_allclose(lat, truth["lat"], atol=1e-9)
        np.testing.assert_allclose(lon, truth["lon"], atol=1e-9)
        # Europe, not West Africa: the domain's centre cell is near 50 N, 10-18 E.
        assert 45 < lat[3, 4] < 56 and 5 < lon[3, 4] < 20
        clon, clat = s.cell_corners()
        step = truth["rlat"][1] - truth["rlat"][0]
        rl = np.r_[truth["rlon"] - step / 2, truth["rlon"][-1] + step / 2]
        rb = np.r_[truth["rlat"] - step / 2, truth["rlat"][-1] + step / 2]
        elon, elat = unrotate(*np.meshgrid(rl, rb))
        np.testing.assert_allclose(clon, elon, atol=1e-9)
        np.testing.assert_allclose(clat, elat, atol=1e-9)
        # geom: the four projected corners of each cell, in index order, ring closed
        pts = polygon_points(CellGeometry.from_series(s), s.ny * s.nx)
        iy, ix = np.divmod(np.arange(s.ny * s.nx), s.nx)
        for k, (dy, dx) in enumerate(((0, 0), (0, 1), (1, 1), (1, 0), (0, 0))):
            np.testing.assert_allclose(pts[:, k, 0], elon[iy + dy, ix + dx], atol=1e-9)
            np.testing.assert_allclose(pts[:, k, 1], elat[iy + dy, ix + dx], atol=1e-9)
        # neighbours share their corners bit for bit (no gaps in a PostGIS union)
        pts = pts.reshape(s.ny, s.nx, 5, 2)
        np.testing.assert_array_equal(pts[:, :-1, 1], pts[:, 1:, 0])
        np.testing.assert_array_equal(pts[:-1, :, 3], pts[1:, :, 0])
        # table rows: geographic lat/lon of each cell
        ctx = CellContext(time=s.time_axis(), cell_mean=np.zeros((s.ny, s.nx)), lat=lat,
                          lon=lon)
        rows = field_model(s.read(0, 1), 0, ctx)
        cell = np.asarray(rows["cell_id"])
        np.testing.assert_allclose(np.asarray(rows["lat"]), truth["lat"].reshape(-1)[cell])
        np.testing.assert_allclose(np.asarray(rows["lon"]), truth["lon"].reshape(-1)[cell])
        np.testing.assert_array_equal(np.asarray(rows["value"]),
                                      truth["field"][0].reshape(-1)[cell])


def test_rotated_pole_with_auxiliary_lat_lon_keeps_the_files_values(tmp_path):
    path, truth = write_rotated_pole(tmp_path / "aux.nc", aux_latlon=True, north_first=True)
    with open_series(str(path), "tas") as s:
        assert (s.lat_name, s.lon_name, s.x_name, s.y_name) == ("lat", "lon", "rlon", "rlat")
        lat, lon = s.cell_coordinates()
        np.testing.assert_array_equal(lat, truth["lat"])  # the file's values, as stored
        np.testing.assert_array_equal(lon, truth["lon"])
        np.testing.assert_array_equal(s.read(0, 2), truth["field"])
        assert s.cell_corners() is not None  # cell polygons still come from the mapping
        assert_cells_drawn_in_place(s, truth["field"], lat, lon, settings=render_settings(),
                                    blit=False)


@pytest.mark.parametrize("blit", [False, True])
@pytest.mark.parametrize("projection, params", [
    ("PlateCarree", {}),
    ("LambertConformal", {"central_longitude": 10.0, "central_latitude": 50.0}),
    ("RotatedPole", {"pole_longitude": -162.0, "pole_latitude": 39.25}),
])
def test_rotated_pole_frame_cells_in_place(tmp_path, projection, params, blit):
    path, truth = write_rotated_pole(tmp_path / "r.nc")
    with open_series(str(path), "tas") as s:
        assert_cells_drawn_in_place(s, truth["field"], truth["lat"], truth["lon"],
                                    settings=render_settings(projection, params,
                                                             width=160, height=120),
                                    blit=blit)


def test_spec_reopens_the_same_grid(tmp_path):
    path, truth = write_rotated_pole(tmp_path / "r.nc", north_first=True)
    with open_series(str(path), "tas") as s:
        spec, lat, corners = s.spec(), s.cell_coordinates()[0], s.cell_corners()
    with open_selection(SeriesSelection.from_params(spec)) as again:
        assert again.mapping == s.mapping and (again.x_name, again.y_name) == ("rlon", "rlat")
        np.testing.assert_array_equal(again.cell_coordinates()[0], lat)
        np.testing.assert_array_equal(again.cell_corners()[0], corners[0])
        np.testing.assert_array_equal(again.read(0, 2), truth["field"])


def test_unreadable_grid_mapping_is_one_line(tmp_path):
    path, _ = write_rotated_pole(tmp_path / "bad.nc", mapping={
        "grid_mapping_name": "rotated_latitude_longitude"})  # no pole
    with pytest.raises(NcreelError) as err:
        open_series(str(path), "tas")
    msg = str(err.value)
    assert "\n" not in msg and str(path) in msg and "variable 'tas'" in msg
    assert "grid_mapping 'rotated_pole'" in msg


# projected x/y --------------------------------------------------------------------------

def test_lambert_conformal_in_km(tmp_path):
    path, truth = write_lambert(tmp_path / "wrf.nc")
    with open_series(str(path), "T2") as s:
        assert s.mapping.kind == "lambert_conformal_conic" and s.mapping.x_scale == 1000.0
        lat, lon = s.cell_coordinates()
        np.testing.assert_allclose(lat, truth["lat"], atol=1e-9)
        np.testing.assert_allclose(lon, truth["lon"], atol=1e-9)
        clon, clat = s.cell_corners()
        np.testing.assert_allclose(clon, truth["corner_lon"], atol=1e-9)
        np.testing.assert_allclose(clat, truth["corner_lat"], atol=1e-9)
        for projection, params in (("PlateCarree", {}),
                                   ("LambertConformal", {"central_longitude": -98.0})):
            assert_cells_drawn_in_place(s, truth["field"], lat, lon, blit=True,
                                        settings=render_settings(projection, params,
                                                                 width=160, height=120))


def test_polar_stereographic_across_the_pole(tmp_path):
    path, truth = write_polar_stereographic(tmp_path / "nsidc.nc")
    with open_series(str(path), "sic") as s:
        lat, lon = s.cell_coordinates()
        np.testing.assert_allclose(lat, truth["lat"], atol=1e-9)
        np.testing.assert_allclose(lon, truth["lon"], atol=1e-9)
        assert_cells_drawn_in_place(s, truth["field"], lat, lon, blit=True,
                                    settings=render_settings("NorthPolarStereo", {
                                        "central_longitude": -45.0}, width=160, height=120))
        rows = ShardRows.for_series(s, cell_mean=np.zeros((s.ny, s.nx)),
                                    cells=CellsSettings.from_params(
                                        cells_settings({"geometry": "text"})))
        geoms = shapely.from_wkt([t.split(";", 1)[1] for t in
                                  rows.geometry.polygons(np.arange(s.ny * s.nx))])
        assert shapely.is_valid(geoms).all()
        bounds = shapely.bounds(geoms)
        assert np.isfinite(bounds).all() and bounds[:, 1].min() > 30
        assert bounds[:, [0, 2]].min() >= -180 and bounds[:, [0, 2]].max() <= 180
        # The pole is inside the grid: the cells round it reach it, closed along the
        # antimeridian, and together they hold it.
        pole = shapely.Point(0.0, 90.0)
        assert 1 <= (bounds[:, 3] == 90).sum() <= 4
        assert shapely.intersects(geoms, pole.buffer(1e-9)).any()


def test_projected_without_mapping_drawn_in_x_y_with_one_note(tmp_path, caplog):
    path, truth = write_projected_no_mapping(tmp_path / "p.nc")
    with caplog.at_level(logging.WARNING, logger="ncreel"), open_series(str(path), "v") as s:
        notes = [r.getMessage() for r in caplog.records]
        assert len(notes) == 1 and "neither a CF grid_mapping nor latitude/longitude" in \
            notes[0] and "lat/lon NULL" in notes[0]
        assert s.cell_coordinates() == (None, None) and not s.has_lat_lon
        r = make_renderer(s, render_settings(), vmin=0.0, vmax=200.0)
        assert r.projection is None
        np.testing.assert_array_equal(r._x, truth["x"])
        r.close()
        rows = field_model(s.read(0, 1), 0, CellContext(
            time=s.time_axis(), cell_mean=np.zeros((3, 4)), lat=None, lon=None))
        assert np.isnan(np.asarray(rows["lat"])).all()


# 2-D coordinates without attributes ---------------------------------------------------

def test_lat2d_lon2d_without_attributes_are_found_and_said(tmp_path, caplog):
    path, truth = write_latlon2d_no_attributes(tmp_path / "a.nc")
    with caplog.at_level(logging.WARNING, logger="ncreel"), open_series(str(path), "v") as s:
        assert (s.lat_name, s.lon_name) == ("lat2d", "lon2d")
        notes = " ".join(r.getMessage() for r in caplog.records)
        assert "'lat2d' taken as the latitude" in notes and "set lat=NAME" in notes
        lat, lon = s.cell_coordinates()
        np.testing.assert_array_equal(lat, truth["lat"])
        assert_cells_drawn_in_place(s, truth["field"], lat, lon, settings=render_settings(),
                                    blit=True)


# real files (iris-sample-data) ----------------------------------------------------------

def _with_time(name: str, variable: str, dest, n: int = 2):
    """A real sample's 2-D field as `n` time steps (the field plus 0, 1, ...)."""
    import xarray as xr
    from ncreel.sample import sample_path

    with xr.open_dataset(sample_path(name), decode_times=False) as ds:
        ds = ds.drop_vars([v for v in ("time", "forecast_period", "forecast_reference_time")
                           if v in ds.variables]).load()
    da = xr.concat([ds[variable] + k for k in range(n)], "time")
    ds[variable] = da.assign_attrs(ds[variable].attrs).transpose("time", ...)
    ds["time"] = ("time", np.arange(n) * 6.0, {"units": "hours since 2000-01-01",
                                               "standard_name": "time"})
    ds.to_netcdf(dest)
    return dest, ds


def test_real_rotated_pole_sample(tmp_path):
    """The Met Office UK model's rotated grid (pole 177.5 E 37.5 N, grid longitudes > 360)."""
    path, ds = _with_time("rotated_pole.nc", "air_pressure_at_sea_level", tmp_path / "r.nc")
    with open_series(str(path), "air_pressure_at_sea_level") as s:
        assert s.mapping.kind == "rotated_latitude_longitude" and s.lat_name is None
        lat, lon = s.cell_coordinates()
        rlon = ds["grid_longitude"].values.astype(np.float64)
        rlat = ds["grid_latitude"].values.astype(np.float64)
        want_lon, want_lat = unrotate(*np.meshgrid(rlon, rlat), 177.5, 37.5)
        np.testing.assert_allclose(lat, want_lat, atol=1e-9)
        np.testing.assert_allclose(lon, want_lon, atol=1e-9)
        # The North Atlantic west of Ireland, not the rotated frame's equator.
        assert 50 < lat[11, 18] < 57 and -20 < lon[11, 18] < -10
        np.testing.assert_array_equal(s.read(1, 2)[0],
                                      ds["air_pressure_at_sea_level"].values[1])


def test_real_stereographic_sample_mapping_agrees_with_its_lat_lon(tmp_path):
    """EUMETSAT's stereographic image: its own 2-D lat/lon, corners from its mapping."""
    path, ds = _with_time("toa_brightness_stereographic.nc", "data", tmp_path / "s.nc")
    with open_series(str(path), "data") as s:
        assert (s.lat_name, s.x_name, s.mapping.kind) == ("lat", "x", "stereographic")
        lat, lon = s.cell_coordinates()
        x, y = s.grid_xy()
        mlon, mlat = s.mapping.to_lonlat(*np.meshgrid(x, y))
        np.testing.assert_allclose(mlat, lat, atol=2e-3)  # the file's lat/lon are float32
        np.testing.assert_allclose(mlon, lon, atol=2e-3)
        clon, clat = s.cell_corners()
        assert clon.shape == (s.ny + 1, s.nx + 1) and np.isfinite(clat).all()


def test_unreadable_mapping_with_the_files_lat_lon_is_a_note(tmp_path, caplog):
    path, truth = write_rotated_pole(tmp_path / "bad.nc", aux_latlon=True, mapping={
        "grid_mapping_name": "rotated_latitude_longitude"})
    with caplog.at_level(logging.WARNING, logger="ncreel"), open_series(str(path), "tas") as s:
        assert s.mapping is None and s.lat_name == "lat"
        np.testing.assert_array_equal(s.cell_coordinates()[0], truth["lat"])
        notes = [r.getMessage() for r in caplog.records]
        assert len(notes) == 1 and "cannot be read by pyproj" in notes[0]


# the other CF grid mappings ---------------------------------------------------------------

WGS84 = {"semi_major_axis": 6378137.0, "inverse_flattening": 298.257223563}
AIRY = {"semi_major_axis": 6377563.396, "semi_minor_axis": 6356256.909}
GRS80 = {"semi_major_axis": 6378137.0, "inverse_flattening": 298.257222101}
#: (CF attributes, x/y units, x centres, y centres, truth's PROJ CRS, its geographic CRS)
MAPPINGS = {
    "mercator": ({"grid_mapping_name": "mercator", "longitude_of_projection_origin": 10.0,
                  "standard_parallel": 20.0, **WGS84}, "km",
                 np.linspace(-2000, 2000, 6), np.linspace(500, 4000, 5),
                 "+proj=merc +lon_0=10 +lat_ts=20 +ellps=WGS84", "+proj=longlat +ellps=WGS84"),
    "albers": ({"grid_mapping_name": "albers_conical_equal_area",
                "standard_parallel": [29.5, 45.5], "longitude_of_central_meridian": -96.0,
                "latitude_of_projection_origin": 23.0, **WGS84}, "m",
               np.linspace(-2e6, 2e6, 6), np.linspace(3e5, 3e6, 5),
               "+proj=aea +lat_1=29.5 +lat_2=45.5 +lat_0=23 +lon_0=-96 +ellps=WGS84",
               "+proj=longlat +ellps=WGS84"),
    "osgb_transverse_mercator": (
        {"grid_mapping_name": "transverse_mercator", "scale_factor_at_central_meridian":
         0.9996012717, "longitude_of_central_meridian": -2.0,
         "latitude_of_projection_origin": 49.0, "false_easting": 400000.0,
         "false_northing": -100000.0, **AIRY}, "m",
        np.linspace(50000, 650000, 6), np.linspace(20000, 1200000, 7),
        "+proj=tmerc +lat_0=49 +lon_0=-2 +k=0.9996012717 +x_0=400000 +y_0=-100000 "
        "+a=6377563.396 +b=6356256.909", "+proj=longlat +a=6377563.396 +b=6356256.909"),
    "laea_europe": ({"grid_mapping_name": "lambert_azimuthal_equal_area",
                     "longitude_of_projection_origin": 10.0,
                     "latitude_of_projection_origin": 52.0, "false_easting": 4321000.0,
                     "false_northing": 3210000.0, **GRS80}, "km",
                    np.linspace(2700, 6300, 6), np.linspace(1500, 5200, 5),
                    "+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80",
                    "+proj=longlat +ellps=GRS80"),
    "goes_geostationary": ({"grid_mapping_name": "geostationary",
                            "perspective_point_height": 35786023.0,
                            "longitude_of_projection_origin": -75.0, "sweep_angle_axis": "x",
                            "semi_major_axis": 6378137.0, "semi_minor_axis": 6356752.31414},
                           "rad", np.linspace(-0.06, 0.06, 6), np.linspace(-0.02, 0.08, 5),
                           "+proj=geos +h=35786023 +lon_0=-75 +sweep=x +a=6378137 "
                           "+b=6356752.31414", "+proj=longlat +a=6378137 +b=6356752.31414"),
}


def _write_mapped(path, attrs, units, x, y, angular=False):
    import xarray as xr
    from layouts import field, time_coord

    kind = "projection_{}_angular_coordinate" if angular else "projection_{}_coordinate"
    truth = field(2, len(y), len(x))
    xr.Dataset({"v": (("time", "y", "x"), truth, {"units": "K", "grid_mapping": "crs"}),
                "crs": ((), np.int32(0), attrs)},
               coords={"time": time_coord(2),
                       "y": ("y", y, {"standard_name": kind.format("y"), "units": units}),
                       "x": ("x", x, {"standard_name": kind.format("x"), "units": units})}
               ).to_netcdf(path)
    return truth


@pytest.mark.parametrize("name", sorted(MAPPINGS))
def test_cf_grid_mappings_against_proj_strings(tmp_path, name):
    from pyproj import Transformer

    attrs, units, x, y, proj, geographic = MAPPINGS[name]
    truth = _write_mapped(tmp_path / "m.nc", attrs, units, x, y, angular=units == "rad")
    scale = {"km": 1000.0, "m": 1.0, "rad": attrs.get("perspective_point_height", 1.0)}[units]
    want_lon, want_lat = Transformer.from_crs(proj, geographic, always_xy=True).transform(
        *np.meshgrid(x * scale, y * scale))
    with open_series(str(tmp_path / "m.nc"), "v") as s:
        assert s.mapping.kind == attrs["grid_mapping_name"]
        lat, lon = s.cell_coordinates()
        np.testing.assert_allclose(lat, want_lat, atol=1e-7)
        np.testing.assert_allclose(lon, want_lon, atol=1e-7)
        assert_cells_drawn_in_place(s, truth, lat, lon, blit=True,
                                    settings=render_settings(width=160, height=120))


def test_cells_beyond_the_geostationary_disk_have_no_polygon(tmp_path):
    attrs, units, *_ = MAPPINGS["goes_geostationary"]
    x = np.linspace(-0.16, 0.16, 9)  # the disk's edge is at about 0.151 rad
    _write_mapped(tmp_path / "g.nc", attrs, units, x, np.array([-0.01, 0.0, 0.01]),
                  angular=True)
    with open_series(str(tmp_path / "g.nc"), "v") as s:
        lat, _ = s.cell_coordinates()
        assert np.isnan(lat[:, 0]).all() and np.isfinite(lat[:, 1:-1]).all()
        polys = CellGeometry.from_series(s).polygons(np.arange(s.ny * s.nx))
        nulls = np.array(polys.is_null()).reshape(s.ny, s.nx)
        assert nulls[:, 0].all() and nulls[:, -1].all() and not nulls[:, 2:-2].any()
        r = make_renderer(s, render_settings(), vmin=0.0, vmax=200.0)  # hidden, no error
        r.draw(s.read(0, 1)[0], "")
        r.close()


def test_unwrap_rows_keeps_values_after_a_missing_longitude():
    from ncreel.input.gridmap import unwrap_rows

    lon = np.array([[170.0, np.nan, -170.0, -160.0],
                    [-172.0, 178.0, -172.0, -162.0]])
    np.testing.assert_array_equal(unwrap_rows(lon), [[170.0, np.nan, 190.0, 200.0],
                                                     [188.0, 178.0, 188.0, 198.0]])


def test_a_dropped_grid_mapping_attribute_takes_the_only_mapping_and_says_so(tmp_path, caplog):
    import xarray as xr

    path, truth = write_lambert(tmp_path / "wrf.nc")
    with xr.open_dataset(path, decode_times=False) as ds:
        ds = ds.load()
    del ds["T2"].attrs["grid_mapping"]
    ds.to_netcdf(tmp_path / "dropped.nc")
    with caplog.at_level(logging.WARNING, logger="ncreel"), \
            open_series(str(tmp_path / "dropped.nc"), "T2") as s:
        notes = [r.getMessage() for r in caplog.records]
        assert len(notes) == 1 and "names no grid_mapping; the file's only grid mapping " \
            "variable 'Lambert_Conformal' (lambert_conformal_conic) is taken" in notes[0]
        np.testing.assert_allclose(s.cell_coordinates()[0], truth["lat"], atol=1e-9)


# one geometry per run --------------------------------------------------------------------

def test_a_grid_mapping_contradicting_the_files_lat_lon_is_one_line_before_any_job(tmp_path):
    # The mapping's pole at (0, 0) beside lat/lon of the true pole: the table's lat/lon
    # came from the 2-D arrays, its polygons and the frames from the mapping (every
    # centre outside its own polygon).
    from ncreel.jobs.preflight import inspect
    from ncreel.jobs.runconfig import load_config
    from snakemake.utils import validate
    from test_runconfig import user_config

    path, truth = write_rotated_pole(tmp_path / "bad.nc", aux_latlon=True, north_first=True,
                                     mapping={"grid_mapping_name": "rotated_latitude_longitude",
                                              "grid_north_pole_latitude": 0.0,
                                              "grid_north_pole_longitude": 0.0})
    with open_series(str(path), "tas") as s:
        x, y = s.grid_xy()
        lon_m, lat_m = s.mapping.to_lonlat(*np.meshgrid(x, y))
    # The worst cell by hand: the largest great-circle distance between the two centres,
    # in cells (the mapping's centres are 5.5 degrees apart on its rotated sphere).
    lat_f, lon_f = truth["lat"], truth["lon"]
    cos = (np.sin(np.radians(lat_m)) * np.sin(np.radians(lat_f)) + np.cos(np.radians(lat_m))
           * np.cos(np.radians(lat_f)) * np.cos(np.radians(lon_m - lon_f)))
    apart = np.degrees(np.arccos(np.clip(cos, -1, 1)))
    j, i = np.unravel_index(np.argmax(apart), apart.shape)
    want = (f"cell (rlat={5 - j}, rlon={i}) is at lat {lat_m[j, i]:.4f}, lon "
            f"{lon_m[j, i]:.4f} by the mapping and at lat {lat_f[j, i]:.4f}, lon "
            f"{lon_f[j, i]:.4f} by 'lat'/'lon'")
    for call in (lambda: load_config(user_config(input=str(path), variable="tas", run="g"),
                                      validate=validate),
                 lambda: inspect(str(path), "tas")):
        with pytest.raises(NcreelError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and want in msg, msg
        assert "grid mapping 'rotated_pole' (rotated_latitude_longitude) and the file's " \
            "'lat'/'lon' place the cells differently" in msg
    # Agreeing ones pass: ncreel's own, and EUMETSAT's float32 lat/lon beside its mapping.
    good, _ = write_rotated_pole(tmp_path / "good.nc", aux_latlon=True)
    stereo, _ = _with_time("toa_brightness_stereographic.nc", "data", tmp_path / "s.nc")
    for p, v in ((good, "tas"), (stereo, "data")):
        with open_series(str(p), v) as s:
            s.check_one_geometry()
