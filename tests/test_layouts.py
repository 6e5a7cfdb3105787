"""The file layouts real users have: right maps, times and rows on small generated files."""

from __future__ import annotations

import subprocess

import matplotlib
import netCDF4
import numpy as np
import pytest
import shapely
import xarray as xr
from layouts import (
    write_ambiguous_lat,
    write_curvilinear,
    write_group,
    write_rectilinear,
    write_string_times,
    write_wrf,
)
from ncreel.cells import CellContext, CellGeometry, ShardRows, cells_settings, field_model
from ncreel.config.settings import CellsSettings, RenderSettings
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.pg.copytext import open_copy_writer
from ncreel.pg.sql import load_script
from ncreel.render.maps import map_xy
from ncreel.render.segment import make_renderer, time_labels

# Coastlines off: these tests read cell colours at cell centres, which a line may cover.
RENDER = RenderSettings.from_params({
    "width": 96, "height": 64, "dpi": 20, "cmap": "viridis",
    "map": {"coastlines": False, "borders": False, "projection": "PlateCarree",
            "projection_params": {}}})


def pixel(renderer, rgba, lon, lat):
    """RGB of the frame at (lon, lat) (degrees; projected first on a map)."""
    ax = renderer.ax
    if renderer.projection is not None:
        lon, lat = map_xy(renderer.projection, lon, lat)
    x, y = ax.transData.transform((lon, lat))
    # A cell centred on the map's edge (lon -180) shows its inner half: read 2 px inside.
    box = ax.get_window_extent()
    x, y = min(max(x, box.x0 + 2), box.x1 - 3), min(max(y, box.y0 + 2), box.y1 - 3)
    return rgba[int(renderer.height - y), int(x), :3].astype(int)


def colour(value, vmin, vmax):
    rgb = matplotlib.colormaps["viridis"]((value - vmin) / (vmax - vmin))[:3]
    return (np.array(rgb) * 255).round().astype(int)


def assert_map_right(series, truth_field, lats, lons, t=0):
    """Every cell centre of frame `t` shows that cell's colour (orientation, no smear)."""
    vmin, vmax = float(np.nanmin(truth_field)), float(np.nanmax(truth_field))
    r = make_renderer(series, RENDER, vmin=vmin, vmax=vmax, blit=False)
    rgba = r.draw(series.read(t, t + 1)[0], "").copy()  # no time label over the cells
    for iy in range(lats.shape[0]):
        for ix in range(lats.shape[1]):
            got = pixel(r, rgba, lons[iy, ix], lats[iy, ix])
            want = colour(truth_field[t, iy, ix], vmin, vmax)
            assert np.abs(got - want).max() <= 4, (iy, ix, got, want)
    r.close()


def widths(geometry: CellGeometry, n: int) -> np.ndarray:
    """Longitude width of each cell's polygon, degrees: the sum over the parts of a cell
    split at the antimeridian."""
    out = []
    for poly in geometry.polygons(np.arange(n)):
        g = shapely.from_wkt(poly.split(";", 1)[1])
        assert g.is_valid and g.geom_type == "MultiPolygon", poly
        out.append(sum(p.bounds[2] - p.bounds[0] for p in g.geoms))
    return np.array(out)


# 1. dimension order by CF attributes --------------------------------------------------

@pytest.mark.parametrize("how", ["standard_name", "units", "axis", "_CoordinateAxisType"])
def test_dimension_order_from_cf_attributes(tmp_path, how):
    attrs = {"standard_name": ({"standard_name": "latitude"}, {"standard_name": "longitude"}),
             "units": ({"units": "degrees_north"}, {"units": "degrees_east"}),
             "axis": ({"axis": "Y"}, {"axis": "X"}),
             "_CoordinateAxisType": ({"_CoordinateAxisType": "Lat"},
                                     {"_CoordinateAxisType": "Lon"})}[how]
    # Names that say nothing, stored (time, lon, lat): only the attributes decide.
    path, truth = write_rectilinear(tmp_path / "t.nc", order=("time", "lon", "lat"),
                                    names=("b", "a"), lat_attrs=attrs[0], lon_attrs=attrs[1])
    with open_series(str(path), "tas") as s:
        assert (s.y_dim, s.x_dim) == ("b", "a")
        np.testing.assert_array_equal(s.read(0, 3), truth["field"])
        lat, lon = s.cell_coordinates()
        if how == "axis":  # projected x/y: no lat/lon, drawn in the file's x/y values
            assert lat is None
            return
        np.testing.assert_array_equal(lat[:, 0], truth["lat"])
        np.testing.assert_array_equal(lon[0], truth["lon"])
        lons, lats = np.meshgrid(truth["lon"], truth["lat"])
        assert_map_right(s, truth["field"], lats, lons, t=1)
        # field rows: lat/lon filled, cell_id = lat index * nx + lon index
        ctx = CellContext(time=s.time_axis(), cell_mean=np.zeros((3, 4)), lat=lat, lon=lon)
        rows = field_model(s.read(0, 1), 0, ctx)
        cell = np.asarray(rows["cell_id"])
        np.testing.assert_array_equal(np.asarray(rows["lat"]), truth["lat"][cell // 4])
        np.testing.assert_array_equal(np.asarray(rows["lon"]), truth["lon"][cell % 4])


def test_latitude_stored_north_first_is_drawn_north_up(tmp_path):
    path, truth = write_rectilinear(tmp_path / "n.nc", lat=[30.0, 20.0, 10.0])
    with open_series(str(path), "tas") as s:
        np.testing.assert_array_equal(s.cell_coordinates()[0][:, 0], [10.0, 20.0, 30.0])
        np.testing.assert_array_equal(s.read(0, 3), truth["field"])


def test_ambiguous_latitude_names_candidates_and_lat_key_decides(tmp_path):
    truth = write_ambiguous_lat(tmp_path / "b.nc")
    with open_series(str(tmp_path / "b.nc"), "tas", lat="lat2") as s:
        np.testing.assert_array_equal(s.cell_coordinates()[0][:, 0], truth["lat"] + 0.5)
    with pytest.raises(NcreelError, match="config key 'lon': .* no variable 'nope'"):
        open_series(str(tmp_path / "b.nc"), "tas", lon="nope")
    with pytest.raises(NcreelError, match="ambiguous latitude coordinate, candidates lat, "
                                          "lat2; set lat=NAME"):
        open_series(str(tmp_path / "b.nc"), "tas")
    with pytest.raises(NcreelError, match=r"config key 'time': 'tas' has dims \(time, lat, "):
        open_series(str(tmp_path / "b.nc"), "tas", time="tas", lat="lat")


# 2. longitudes not monotonic ------------------------------------------------------------

def test_wrapped_1d_longitudes_are_sorted_and_polygons_narrow(tmp_path):
    lon = np.r_[np.arange(0.0, 180.0, 30.0), np.arange(-180.0, 0.0, 30.0)]
    path, truth = write_rectilinear(tmp_path / "w.nc", lon=lon, lat=[-30.0, 0.0, 30.0])
    with open_series(str(path), "tas") as s:
        lat, lon_out = s.cell_coordinates()
        np.testing.assert_array_equal(lon_out[0], np.arange(-180.0, 180.0, 30.0))
        np.testing.assert_array_equal(s.read(0, 3), truth["field"])
        lons, lats = np.meshgrid(truth["lon"], truth["lat"])
        assert_map_right(s, truth["field"], lats, lons)
        w = widths(CellGeometry.from_series(s), s.ny * s.nx)
        np.testing.assert_allclose(w, 30.0)


def test_0_360_bounds_crossing_the_prime_meridian_stay_one_cell_wide(tmp_path):
    path, _ = write_rectilinear(tmp_path / "p.nc", lon=np.arange(0.0, 360.0, 90.0))
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    ds["lon_bnds"] = (("lon", "nv"), np.stack([ds.lon.values - 45, ds.lon.values + 45], 1))
    ds["lon"].attrs["bounds"] = "lon_bnds"
    ds.to_netcdf(tmp_path / "q.nc")
    with open_series(str(tmp_path / "q.nc"), "tas") as s:
        np.testing.assert_allclose(widths(CellGeometry.from_series(s), s.ny * s.nx), 90.0)


def test_curvilinear_grid_across_the_dateline(tmp_path):
    path, truth = write_curvilinear(tmp_path / "c.nc")
    with open_series(str(path), "tas") as s:
        assert (s.y_dim, s.x_dim) == ("y", "x")
        lat, lon = s.cell_coordinates()
        np.testing.assert_array_equal(lon, truth["lon"])  # the column keeps stored values
        _, cont = s.cell_coordinates(continuous=True)
        assert np.all(np.diff(cont, axis=1) > 0) and np.abs(np.diff(cont, axis=0)).max() < 10
        assert_map_right(s, truth["field"], lat, cont, t=1)
        w = widths(CellGeometry.from_series(s), s.ny * s.nx)
        assert w.max() <= 12.0 + 1e-9, w  # 10 degrees apart plus the rows' 2 degree shear


def test_curvilinear_stored_lon_lat_transposed(tmp_path):
    path, truth = write_curvilinear(tmp_path / "c.nc")
    with xr.open_dataset(path, decode_times=False) as ds:
        ds.load().transpose("time", "x", "y").to_netcdf(tmp_path / "t.nc")
    with open_series(str(tmp_path / "t.nc"), "tas") as s:
        assert (s.y_dim, s.x_dim) == ("y", "x")
        np.testing.assert_array_equal(s.read(0, 2), truth["field"])


# 3. WRF -------------------------------------------------------------------------------

@pytest.mark.parametrize("xtime", [True, False])
def test_wrf_times_xlat_xlong(tmp_path, xtime):
    path, truth = write_wrf(tmp_path / "wrfout_d01.nc", xtime=xtime)
    with open_series(str(path), "T2") as s:
        assert (s.time_dim, s.y_dim, s.x_dim) == ("Time", "south_north", "west_east")
        assert s.time_name == ("XTIME" if xtime else "Times")
        t = s.time_axis()
        assert t.labels == truth["labels"] and t.note == ""
        assert t.postgres_type == "timestamp without time zone"
        lat, lon = s.cell_coordinates()
        np.testing.assert_allclose(lat, truth["lat"], rtol=1e-6)
        np.testing.assert_allclose(lon, truth["lon"], rtol=1e-6)
        assert time_labels(s)[2] == "2007-10-01 06:00"  # 3-hourly: to the minute
        assert_map_right(s, truth["field"], lat, lon, t=2)


def test_wrf_moving_grid_is_refused(tmp_path):
    path, _ = write_wrf(tmp_path / "wrfout.nc", moving=True)
    with pytest.raises(NcreelError, match="'XLAT' changes along 'Time'"):
        open_series(str(path), "T2")


# 4. / 5. times as strings, char arrays, one missing step -------------------------------

def test_iso_string_and_char_array_times(tmp_path):
    texts = ["2007-10-01T00:00:00Z", "2007-10-01T06:00:00Z", "2007-10-02 00:00"]
    for chars in (False, True):
        path = write_string_times(tmp_path / f"s{chars}.nc", texts, chars=chars)
        with open_series(str(path), "v") as s:
            t = s.time_axis()
            assert t.labels == ["2007-10-01T00:00:00", "2007-10-01T06:00:00",
                                "2007-10-02T00:00:00"]
            assert t.decoded and t.note == ""


def test_unreadable_string_time_falls_back_to_null(tmp_path):
    path = write_string_times(tmp_path / "bad.nc", ["2007-10-01", "soon", "2007-02-30"])
    with open_series(str(path), "v") as s:
        t = s.time_axis()
        assert t.labels == ["2007-10-01T00:00:00", None, None]
        assert "2 of 3 'time' strings are not ISO 8601" in t.note
        assert time_labels(s)[1] == "time step 1"


def test_one_missing_time_step_only_that_step_is_null(tmp_path):
    path, _ = write_rectilinear(tmp_path / "f.nc", n_time=4, time_fill=-9999.0,
                                time_values=[0.0, np.nan, 2.0, 3.0])
    with netCDF4.Dataset(path) as nc:  # stored as a real file has it
        nc.set_auto_mask(False)
        assert nc["time"][1] == -9999.0 and nc["time"]._FillValue == -9999.0
    with open_series(str(path), "tas") as s:
        t = s.time_axis()
        assert t.labels == ["2000-01-01T00:00:00", None, "2000-01-03T00:00:00",
                            "2000-01-04T00:00:00"]
        assert "1 of 4 'time' values are missing" in t.note
        assert t.postgres_type == "timestamp without time zone"


# 6. several files in time order -------------------------------------------------------

def test_files_are_joined_in_time_order_not_name_order(tmp_path):
    for k, start in ((1, 0), (2, 3), (10, 6)):
        write_rectilinear(tmp_path / f"part_{k}.nc", start=start)
    with open_series(str(tmp_path / "part_*.nc"), "tas") as s:
        assert [p.rsplit("/", 1)[1] for p in s.paths] == ["part_1.nc", "part_2.nc",
                                                           "part_10.nc"]
        labels = s.time_axis().labels
        assert labels == sorted(labels) and len(labels) == 9
        assert s.spec()["paths"] == list(s.paths)


# 7. literal text ------------------------------------------------------------------------

def test_text_from_the_file_is_drawn_literally(tmp_path):
    path, truth = write_rectilinear(tmp_path / "m.nc", long_name="Ba$$in index $x^2$")
    with open_series(str(path), "tas") as s:
        r = make_renderer(s, RENDER, vmin=0.0, vmax=300.0)
        r.draw(s.read(0, 1)[0], "$T$ = 1")
        assert r.title.get_text() == "Ba$$in index $x^2$ [K]"  # drawn: mathtext would raise
        assert r.label.get_text() == "$T$ = 1"
        r.close()


# 8. NetCDF-4 groups -------------------------------------------------------------------

def test_variable_in_a_group(tmp_path):
    path = write_group(tmp_path / "g.nc")
    with open_series(str(path), "forecast/tas") as s:
        assert s.shape == (3, 3, 4) and s.spec()["variable"] == "forecast/tas"
        assert s.time_axis().labels[0] == "2000-01-01T00:00:00"
    with pytest.raises(NcreelError, match=r"no variable 'tas' .*groups: forecast"):
        open_series(str(path), "tas")
    with pytest.raises(NcreelError, match=r"no group 'hindcast' \(groups: forecast\)"):
        open_series(str(path), "hindcast/tas")


# 9. every label loads into PostgreSQL --------------------------------------------------

CALENDARS = [  # (calendar, units, PostgreSQL type)
    ("360_day", "days since 2000-02-01", "text"),
    ("noleap", "days since 1999-12-31", "text"),
    ("julian", "days since 1900-01-01", "text"),
    ("standard", "days since 1500-01-01", "text"),  # Julian dates
    ("standard", "days since 12000-01-01", "text"),  # five-digit year
    ("proleptic_gregorian", "days since 0001-01-01", "timestamp without time zone"),
    ("proleptic_gregorian", "days since 9999-12-30", "text"),  # runs into year 10000
    ("gregorian", "hours since 2000-01-01", "timestamp without time zone"),
]


def test_every_calendar_and_year_range_loads(tmp_path, pg_server, pg_conn):
    for k, (calendar, units, pg_type) in enumerate(CALENDARS):
        path, _ = write_rectilinear(tmp_path / f"c{k}.nc", calendar=calendar, units=units)
        with open_series(str(path), "tas") as s:
            rows = ShardRows.for_series(s, cell_mean=np.zeros((s.ny, s.nx)),
                                        cells=CellsSettings.from_params(
                                            cells_settings({"geometry": "text"})))
            assert dict(rows.columns)["time"] == pg_type, (calendar, units)
            labels = s.time_axis().labels
            with open_copy_writer(tmp_path / f"c{k}.copy", "none") as fh:
                rows.write(fh, 0, s.read(0, s.n_time))
        table = f"t_cal{k}"
        (tmp_path / f"c{k}.sql").write_text(load_script(table, rows.columns, f"c{k}.copy",
                                                        run="r"))
        subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", pg_server["host"],
                        "-U", "postgres", "-d", "postgres", "-f", f"c{k}.sql"],
                       cwd=tmp_path, check=True, capture_output=True)
        got = [r[0] for r in pg_conn.execute(
            f"SELECT DISTINCT to_json(time)#>>'{{}}' FROM {table} ORDER BY 1")]
        assert len(got) == 3
        if pg_type == "text":
            assert got == sorted(labels)
        else:
            assert got == labels
