"""Regions: a lon/lat box or a named country cuts the series, its frames and its table."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from layouts import write_curvilinear, write_rectilinear
from ncreel.cells import CellGeometry, ShardRows, cells_settings
from ncreel.config.settings import CellsSettings, SeriesSelection
from ncreel.core.errors import NcreelError
from ncreel.jobs.stats import write_statistics
from ncreel.region.naturalearth import country_box
from ncreel.region.restrict import RegionSeries, _runs
from ncreel.region.selection import open_selection, table_series
from ncreel.region.spec import region_from_config
from ncreel.render.frame import frame_difference
from ncreel.render.maps import region_features
from ncreel.render.segment import make_renderer
from test_layouts import RENDER, assert_map_right

LAT = np.arange(-85.0, 90.0, 10.0)  # 18 rows
LON_360 = np.arange(5.0, 360.0, 10.0)  # 36 columns, 0...360
LON_180 = np.arange(-175.0, 180.0, 10.0)  # 36 columns, -180...180
BOX = {"lon": [160, -160], "lat": [-10, 10]}  # across the antimeridian


def selection(path, region, variable="tas"):
    reg = region_from_config(region)
    return SeriesSelection(paths=[str(path)], variable=variable, time_dim=None, select={},
                           lat=None, lon=None, time=None,
                           region=None if reg is None else reg.to_params())


def truth_box(truth, lat, lon, lat_keep, lon_keep):
    """The truth field at the given latitudes and longitudes (any convention), in order."""
    rows = [int(np.flatnonzero(lat == v)[0]) for v in lat_keep]
    cols = [int(np.flatnonzero(np.isclose(np.mod(lon - v, 360.0), 0))[0]) for v in lon_keep]
    return truth[:, rows][:, :, cols]


@pytest.mark.parametrize("lon", [LON_360, LON_180, LON_180[::-1]],
                         ids=["0-360", "pm180", "pm180-descending"])
def test_antimeridian_box_reads_only_its_cells_in_continuous_order(tmp_path, lon):
    path, t = write_rectilinear(tmp_path / "g.nc", lat=LAT[::-1], lon=lon)
    with open_selection(selection(path, BOX)) as s:
        assert isinstance(s, RegionSeries)
        assert s.shape == (3, 2, 4)
        lat, lon_c = s.cell_coordinates(continuous=True)
        np.testing.assert_array_equal(lat[:, 0], [-5, 5])
        np.testing.assert_array_equal(lon_c[0], [165, 175, 185, 195])
        want = truth_box(t["field"], t["lat"], t["lon"], [-5, 5], [165, 175, 185, 195])
        np.testing.assert_array_equal(s.read(0, 3), want)
        np.testing.assert_array_equal(s.read(1, 2), want[1:2])
        # Slabs, not an index array (which netCDF reads a column at a time).
        assert len(_runs(s.y_file)) == 1
        assert len(_runs(s.x_file)) == (1 if lon is LON_360 else 2)
        # Every cell centre of the frame shows that cell's colour, on a map centred on 180.
        lats, lons = np.meshgrid([-5.0, 5.0], [165.0, 175.0, 185.0, 195.0], indexing="ij")
        assert_map_right(s, want, lats, lons, t=1)
        r = make_renderer(s, RENDER, vmin=float(want.min()), vmax=float(want.max()))
        assert abs(r.projection.central_longitude) == 180.0  # the map centres on 180
        r.close()


def test_fast_path_shows_only_the_region_and_matches_a_full_redraw(tmp_path):
    path, t = write_rectilinear(tmp_path / "g.nc", lat=LAT, lon=LON_180)
    with open_selection(selection(path, {"lon": [-40, 40], "lat": [-30, 50]})) as s:
        field = s.read(2, 3)[0]
        vmin, vmax = float(field.min()), float(field.max())
        fast = make_renderer(s, RENDER, vmin=vmin, vmax=vmax)
        full = make_renderer(s, RENDER, vmin=vmin, vmax=vmax, blit=False)
        a = fast.draw(field, "x").copy()
        b = full.draw(field, "x").copy()
        d = frame_difference(a, b, area=fast.map_area(), tolerance=fast.level_step())
        assert d["share_beyond"] == 0, d
        assert frame_difference(a, b, area=fast.interior())["max_difference"] == 0
        # The map's cells are the region's 8 x 8 cells, each on screen.
        assert s.shape[1:] == (8, 8)
        index = fast.cell_index()
        shown = np.unique(index[index >= 0])
        np.testing.assert_array_equal(shown, np.arange(64))
        fast.close()
        full.close()


@pytest.mark.parametrize("box", [
    {"lon": [0.3, 0.6], "lat": [40.3, 40.6]},
    {"lon": [359.7, 0.4], "lat": [-40.6, -40.3]},  # across 0 on a 0...360 file
])
def test_float32_centres_on_the_box_edges_are_in_the_box(tmp_path, box):
    # A 0.1 degree grid stored as float32 (as many files are): float32(0.3) is below 0.3,
    # and the cells on the box's west and south edges were left out ("edges included").
    lat = np.round(np.arange(-45.0, 45.05, 0.1), 1).astype(np.float32)
    lon = np.round(np.arange(0.0, 360.0, 0.1), 1).astype(np.float32)
    path = tmp_path / "f32.nc"
    xr.Dataset({"tas": (("time", "lat", "lon"), np.zeros((1, lat.size, lon.size), np.float32))},
               coords={"time": ("time", [0.0], {"units": "days since 2000-01-01"}),
                       "lat": ("lat", lat, {"units": "degrees_north"}),
                       "lon": ("lon", lon, {"units": "degrees_east"})}).to_netcdf(path)
    with open_selection(selection(path, box)) as s:
        lat_c, lon_c = s.cell_coordinates(continuous=True)
        assert s.shape[1:] == (4, {0.3: 4, 359.7: 8}[box["lon"][0]])
        np.testing.assert_allclose(lat_c[[0, -1], 0], box["lat"], atol=1e-4)
        np.testing.assert_allclose(np.mod(lon_c[0, [0, -1]], 360), box["lon"], atol=1e-4)


def test_named_country_box_and_outline():
    west, east, south, north, name = country_box("fiji")
    assert name == "Fiji" and west > east  # across the antimeridian
    assert 170 < west < 178 and -180 < east < -175 and -23 < south < north < -11
    w, e, s, n, _ = country_box("France")  # metropolitan France, not French Guiana
    assert -6 < w < -4 and 9 < e < 11 and 40 < s < 42 and 51 < n < 52
    # The 48 contiguous states, as the docstring says: not Alaska (north of 51, west of
    # -130) nor Hawaii (south of 23); Japan with Okinawa's islands (a chain of them).
    w, e, s, n, _ = country_box("United States of America")
    assert -128 < w < -124 and -67 < e < -63 and 22 < s < 25 and 49 < n < 51
    w, e, s, n, _ = country_box("Japan")
    assert 122 < w < 124 and s < 25
    region = region_from_config({"name": "France", "table": "global"})
    assert region.table == "global" and region.name == "France"
    (outline,) = region_features(region)
    pts = np.concatenate(outline.lines)
    assert pts[:, 0].min() < -4 and pts[:, 1].max() > 51
    assert region_features(region_from_config(BOX)) == []


def test_country_outline_is_drawn_once_on_the_map(tmp_path):
    lat = np.arange(-24.75, -9.0, 0.5)
    lon = np.arange(170.25, 190.0, 0.5)  # 0...360 file around Fiji
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon)
    west, east, south, north, _ = country_box("Fiji")
    same_box = {"lon": [west, east], "lat": [south, north]}
    frames = []
    for region in ("Fiji", same_box):
        with open_selection(selection(path, region)) as s:
            field = np.zeros(s.shape[1:])
            r = make_renderer(s, RENDER, vmin=-1, vmax=1)  # coastlines off
            frames.append(r.draw(field, "").copy())
            area = r.map_area()
            r.close()
    fiji, box = (f[..., :3].astype(int).sum(axis=-1) for f in frames)
    changed = fiji != box
    # Only the outline differs: dark pixels over the field, inside the map.
    assert changed.sum() >= 10 and (changed & ~area).sum() == 0
    assert (fiji[changed] < box[changed]).all()


@pytest.mark.parametrize("region, message", [
    ({"lon": [10, 20], "lat": [60, 80]}, "holds no cell centre"),
    ({"lon": [10, 20], "lat": [20, 10]}, "south < north"),
    ({"lon": [10, 10], "lat": [0, 10]}, "two different longitudes"),
    ({"lon": [10], "lat": [0, 10]}, "region.lon': must be two numbers"),
    ({"lon": [0, 10], "lat": [0, 10], "tabel": "global"}, "region.tabel': unknown key"),
    ({"lon": [0, 10], "lat": [0, 10], "table": "all"}, "region.table': must be region or"),
    ("Frence", "no country named 'Frence' (did you mean France"),
    ({"name": "France", "lon": [0, 1]}, "give one of name, file or lon/lat"),
])
def test_bad_region_is_one_line(tmp_path, region, message):
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=[0.0, 10.0, 20.0, 30.0, 40.0])
    with pytest.raises(NcreelError) as err:
        open_selection(selection(path, region))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_curvilinear_grid_with_a_box_is_refused_before_any_job(tmp_path):
    path, _ = write_curvilinear(tmp_path / "c.nc")
    with pytest.raises(NcreelError, match="not supported for curvilinear grids .* give the "
                       "region as a polygon file"):
        open_selection(selection(path, {"lon": [-180, 180], "lat": [-90, 90]}))


@pytest.mark.parametrize("table", ["region", "global"])
def test_table_rows_follow_the_setting(tmp_path, table):
    path, t = write_rectilinear(tmp_path / "g.nc", lat=LAT, lon=LON_360)
    sel = selection(path, {**BOX, "table": table})
    with open_selection(sel) as shown, table_series(sel, shown) as tab:
        assert shown.shape == (3, 2, 4)
        stats = write_statistics(tab, tmp_path / "stats.json", tmp_path / "mean.npy",
                                 limits_series=None if tab is shown else shown)
        region = truth_box(t["field"], t["lat"], t["lon"], [-5, 5], [165, 175, 185, 195])
        # Colour limits from the region's values either way.
        assert stats["min"] == region.min() and stats["max"] == region.max()
        mean = np.load(tmp_path / "mean.npy")
        rows = ShardRows.for_series(tab, cell_mean=mean,
                                    cells=CellsSettings.from_params(
                                        cells_settings({"geometry": "text"})))
        out = tmp_path / "rows.copy"
        with open(out, "w") as fh:
            n = rows.write(fh, 0, tab.read(0, tab.n_time))
    if table == "region":
        assert mean.shape == (2, 4) and n == 3 * 8
        np.testing.assert_allclose(mean, region.mean(axis=0))
        names = [c[0] for c in rows.columns]
        k = names.index("lon")
        lons = {round(float(line.split("\t")[k]), 3) for line in out.read_text().splitlines()}
        assert len(lons) == 4 and lons <= {165.0, 175.0, -175.0, -165.0, 185.0, 195.0}
    else:
        assert mean.shape == (18, 36) and n == 3 * 18 * 36
        np.testing.assert_allclose(mean, t["field"].mean(axis=0))


def test_spec_reopens_the_region(tmp_path):
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=LAT, lon=LON_180)
    with open_selection(selection(path, BOX)) as s:
        spec = s.spec()
    again = SeriesSelection.from_params(spec)
    with open_selection(again) as s2:
        assert s2.shape == (3, 2, 4) and s2.region.west == 160
    # Specs without a region (older params) still read.
    spec.pop("region")
    with open_selection(SeriesSelection.from_params(spec)) as whole:
        assert whole.shape == (3, 18, 36)


@pytest.mark.parametrize("lon", [LON_360, LON_180], ids=["0-360", "pm180"])
def test_other_variables_are_read_on_the_region(tmp_path, lon):
    # Overlays and cell models read other variables of the files: the region's cells too.
    path = tmp_path / "two.nc"
    a = np.random.default_rng(0).random((2, LAT.size, lon.size))
    xr.Dataset({"a": (("time", "lat", "lon"), a), "b": (("time", "lat", "lon"), 2 * a),
                "c": (("lat", "lon"), 3 * a[0])},
               coords={"time": [0, 1], "lat": LAT, "lon": lon}).to_netcdf(path)
    with open_selection(selection(path, BOX, "a")) as s:
        np.testing.assert_array_equal(s.read_variable("b", 0, 2), 2 * s.read(0, 2))
        np.testing.assert_array_equal(s.read_variable("b", 1, 2), 2 * s.read(1, 2))
        np.testing.assert_allclose(s.read_variable("c", 0, 2), 3 * s.read(0, 1)[0])
        with pytest.raises(NcreelError, match="no variable 'd'"):
            s.read_variable("d", 0, 1)


@pytest.mark.parametrize("extra", [
    {}, {"region": None, "contours": None, "vectors": None}, {"region": "Fiji"},
    {"region": {"lon": [170, -170], "lat": [-20, -10]}},
    {"region": {"file": "fields.geojson", "table": "region"}},
    {"contours": {"variable": "psl"}, "vectors": {"u": "uas", "v": "vas"}}])
def test_snakemake_validates_configs_with_and_without_region_and_overlays(extra):
    # Snakemake sets the schema's nested defaults even where the value is null (and
    # fails): region, contours and vectors must validate unset, null and set.
    from ncreel.config.configcheck import schema_path
    from snakemake.utils import validate

    config = {"input": "a.nc", "variable": "tas", "run": "r", **extra}
    validate(config, str(schema_path()))
    assert config["region"] == extra.get("region")


def test_mesh_and_projected_grids_are_refused_before_any_job(tmp_path):
    from grid_files import write_rotated_pole
    from meshes import voronoi_mesh, write_ugrid

    mesh_path = tmp_path / "mesh.nc"
    write_ugrid(mesh_path, voronoi_mesh(60))
    with pytest.raises(NcreelError, match="not supported for unstructured meshes given a box"):
        open_selection(selection(mesh_path, BOX, "sst"))
    rotated, _ = write_rotated_pole(tmp_path / "rot.nc", n_time=2)
    with pytest.raises(NcreelError, match="not supported for projected grids"):
        open_selection(selection(rotated, {"lon": [0, 20], "lat": [40, 60]}))


@pytest.mark.parametrize("central, want", [(0.0, 180.0), (10.0, 180.0), (180.0, 180.0)])
def test_explicit_central_longitude_cutting_the_region_centres_the_map_on_it(
        tmp_path, caplog, central, want):
    # With central_longitude 0 the map's edge (180) ran through a region across 180: the
    # region was drawn in two pieces at the map's edges and contours joined across it.
    import dataclasses
    import logging

    path, _ = write_rectilinear(tmp_path / "g.nc", lat=LAT, lon=LON_360)
    render = dataclasses.replace(RENDER, map=dataclasses.replace(
        RENDER.map, projection_params={"central_longitude": central}))
    with open_selection(selection(path, BOX)) as s, caplog.at_level(logging.WARNING):
        r = make_renderer(s, render, vmin=0.0, vmax=1.0)
        assert abs(r.projection.central_longitude) == want
        # One piece: the map is only as wide as the region (8 degrees of 40 would be
        # 1/9 of a world-wide strip).
        x0, x1 = r.ax.get_xlim()
        assert abs(x1 - x0) < 60
        r.close()
    cut = central != 180.0
    assert ("puts the map's edge" in caplog.text) == cut


def test_explicit_central_longitude_off_the_region_is_kept(tmp_path):
    import dataclasses

    path, _ = write_rectilinear(tmp_path / "g.nc", lat=LAT, lon=LON_180)
    render = dataclasses.replace(RENDER, map=dataclasses.replace(
        RENDER.map, projection_params={"central_longitude": 10.0}))
    with open_selection(selection(path, {"lon": [-40, 40], "lat": [-30, 50]})) as s:
        r = make_renderer(s, render, vmin=0.0, vmax=1.0)
        assert r.projection.central_longitude == 10.0
        r.close()


@pytest.mark.parametrize("bounds", [False, True], ids=["midpoints", "cf-bounds"])
def test_one_cell_region_has_that_cells_bounds(tmp_path, bounds):
    # A region holding one cell centre: its extent (map and table polygon) was +-0.5
    # degree round the centre, extrapolated from the cut; it must be the cell's bounds.
    path = tmp_path / "g.nc"
    lat, lon = LAT, LON_360
    coords = {"lat": ("lat", lat, {"units": "degrees_north"}),
              "lon": ("lon", lon, {"units": "degrees_east"})}
    data = {"tas": (("time", "lat", "lon"), np.random.default_rng(1).random((2, 18, 36)))}
    if bounds:  # uneven bounds, so midpoints would be wrong: 6 degrees south, 4 north
        coords["lat"][2]["bounds"] = "lat_bnds"
        data["lat_bnds"] = (("lat", "nv"), np.column_stack([lat - 6.0, lat + 4.0]))
    xr.Dataset(data, coords={"time": ("time", [0.0, 1.0], {"units": "days since 2000-01-01"}),
                             **coords}).to_netcdf(path)
    south, north = (-1.0, 9.0) if bounds else (0.0, 10.0)
    with open_selection(selection(path, {"lon": [12, 18], "lat": [2, 8]})) as s:
        assert s.shape[1:] == (1, 1)
        text = CellGeometry.from_series(s).polygons(np.array([0]))[0]
        assert text == (f"SRID=4326;MULTIPOLYGON(((10.0 {south},20.0 {south},20.0 {north},"
                        f"10.0 {north},10.0 {south})))")
        r = make_renderer(s, RENDER, vmin=0.0, vmax=1.0)
        x0, x1 = sorted(r.ax.get_xlim())
        y0, y1 = sorted(r.ax.get_ylim())
        # PlateCarree centred on the cell (15): x is longitude - 15.
        np.testing.assert_allclose([x0, x1, y0, y1], [-5, 5, south, north], atol=1e-6)
        r.close()
