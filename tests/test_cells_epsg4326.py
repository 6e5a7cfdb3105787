"""``lon`` and ``geom`` in EPSG:4326's -180…180 for every grid kind: cells moved by whole
turns, split at the antimeridian into valid MultiPolygons, neighbours sharing corners."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import shapely
from grid_files import write_polar_stereographic, write_rotated_pole
from layouts import write_curvilinear, write_rectilinear
from meshes import write_healpix
from ncreel.cells import CellGeometry, ShardRows, cells_settings
from ncreel.cells.geometry import fold_corners, fold_longitude, repair_invalid
from ncreel.config.settings import CellsSettings
from ncreel.input.source import open_series


def _open_rows(path, variable="tas"):
    s = open_series(str(path), variable)
    rows = ShardRows.for_series(s, cell_mean=np.zeros((s.ny, s.nx)),
                                cells=CellsSettings.from_params(
                                    cells_settings({"geometry": "text"})))
    return s, rows


def _geoms(rows, n):
    return shapely.from_wkt([t.split(";", 1)[1] for t in rows.geometry.polygons(np.arange(n))])


def _check_epsg4326(geoms):
    """Every polygon valid, a MultiPolygon, within -180…180 / -90…90."""
    assert shapely.is_valid(geoms).all(), [shapely.is_valid_reason(g) for g in geoms]
    assert {g.geom_type for g in geoms} == {"MultiPolygon"}
    b = shapely.bounds(geoms)
    assert b[:, 0].min() >= -180 and b[:, 2].max() <= 180
    assert b[:, 1].min() >= -90 and b[:, 3].max() <= 90


def test_fold_longitude_moves_by_whole_turns_and_keeps_short_decimals():
    got = fold_longitude(np.array([224.06, 359.9, 180.0, -180.0, 179.99, 0.0, -540.25,
                                   np.nan]))
    assert got[:6].tolist() == [-135.94, -0.1, -180.0, -180.0, 179.99, 0.0]
    assert got[6] == 179.75 and np.isnan(got[7])
    # Unmoved values are returned bit for bit.
    x = np.array([1 / 3, -179.123456789012345])
    assert fold_longitude(x).tobytes() == x.tobytes()
    # Corners follow their cell's centre: a corner at 180 of a cell centred on 179 stays.
    c = fold_corners(np.array([[178.0, 180.0], [180.0, 182.0]]), np.array([179.0, 181.0]))
    assert c.tolist() == [[178.0, 180.0], [-180.0, -178.0]]


@pytest.mark.parametrize("stored", ["0_360", "pm180"])
def test_global_rectilinear_grid_is_in_pm180_and_splits_the_antimeridian_column(tmp_path,
                                                                              stored):
    lon = np.arange(0.0, 360.0, 30.0)  # the column centred on 180 spans 165…195
    if stored == "pm180":
        lon = fold_longitude(lon)
    lat = np.arange(-75.0, 90.0, 30.0)  # edges -90…90
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon, n_time=1)
    s, rows = _open_rows(path)
    with s:
        n = s.ny * s.nx
        out = rows.rows(0, s.read(0, 1))
        _, raw = s.cell_coordinates()
        geoms = _geoms(rows, n)
    cell = np.asarray(out["cell_id"])
    np.testing.assert_array_equal(np.asarray(out["lon_raw"]), raw.reshape(-1)[cell])
    np.testing.assert_array_equal(np.asarray(out["lon"]), fold_longitude(raw.reshape(-1)[cell]))
    assert np.asarray(out["lon"]).min() >= -180 and np.asarray(out["lon"]).max() < 180
    _check_epsg4326(geoms)
    parts = np.array([len(g.geoms) for g in geoms])
    assert (parts == 2).sum() == len(lat) and (parts <= 2).all()  # the 180 column only
    for g in geoms[parts == 2]:
        b = [p.bounds for p in g.geoms]
        assert sorted((x0, x1) for x0, _, x1, _ in b) == [(-180, -165), (165, 180)]
    # The cells tile the globe: no gaps, no overlaps (planar degrees squared).
    assert sum(g.area for g in geoms) == pytest.approx(360 * 180)
    assert shapely.union_all(geoms).area == pytest.approx(360 * 180)
    # Each cell holds its centre (the -180 centre is on the edge of both parts).
    lat_c = np.asarray(out["lat"])
    lon_c = np.asarray(out["lon"])
    assert all(g.covers(shapely.Point(x, y)) for g, x, y in
               zip(geoms[cell], lon_c, lat_c, strict=True))


def test_0_360_and_pm180_files_give_the_same_polygons(tmp_path):
    lat = np.array([-1.25, 1.25])
    lon = 0.9375 + 1.875 * np.arange(192)  # T62-like spacing: not exact in decimal
    a, _ = write_rectilinear(tmp_path / "a.nc", lat=lat, lon=lon, n_time=1)
    b, _ = write_rectilinear(tmp_path / "b.nc", lat=lat, lon=np.round(lon - 360 * (lon >= 180),
                                                                      10), n_time=1)
    got = {}
    for key, path in (("a", a), ("b", b)):
        s, rows = _open_rows(path)
        with s:
            out = rows.rows(0, s.read(0, 1))
            text = rows.geometry.polygons(np.asarray(out["cell_id"])).to_list()
            got[key] = dict(zip(np.asarray(out["lon"]).round(9).tolist(), text, strict=True))
    assert got["a"].keys() == got["b"].keys()
    for k in got["a"]:
        ga, gb = (shapely.from_wkt(got[x][k].split(";", 1)[1]) for x in "ab")
        assert ga.equals_exact(gb, 1e-9)


def _ring_points(text: str) -> list[str]:
    """Corner texts ``"x y"`` of a one-part polygon."""
    return text[text.index("(((") + 3:-3].split(",")


def test_neighbours_share_bit_identical_corners(tmp_path):
    lon = 0.9375 + 1.875 * np.arange(192)
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=np.array([-1.25, 1.25, 3.75]), lon=lon,
                                n_time=1)
    s, rows = _open_rows(path)
    with s:
        nx, n = s.nx, s.ny * s.nx
        text = rows.geometry.polygons(np.arange(n)).to_list()
    for c in range(n):
        ix = c % nx
        if ix == nx - 1:
            continue
        here, east = _ring_points(text[c]), _ring_points(text[c + 1])
        # lower-right and upper-right of a cell are the lower-left and upper-left of the
        # next; at the antimeridian the same points are written 180 and -180.
        if here[1].startswith("180.0 ") and east[0].startswith("-180.0 "):
            east = [p[1:] if p.startswith("-180.0 ") else p for p in east]
        assert (here[1], here[2]) == (east[0], east[3]), (c, here, east)
        if c + nx < n:
            north = _ring_points(text[c + nx])
            assert (here[3], here[2]) == (north[0], north[1])
    # Moved corners keep short decimals (no binary tails such as -135.94000000000003).
    x = [p.split()[0] for t in text for p in _ring_points(t)]
    assert max(len(v.split(".")[1]) for v in x) <= 10


@pytest.mark.parametrize("kind", ["curvilinear", "rotated_pole", "polar_stereographic"])
def test_curvilinear_and_projected_cells_are_valid_and_split_at_the_antimeridian(tmp_path,
                                                                               kind):
    if kind == "curvilinear":
        path, _ = write_curvilinear(tmp_path / "c.nc", ny=4, nx=8, lon0=150.0, dlon=10.0)
        var = "tas"
    elif kind == "rotated_pole":  # pole longitude 0: the domain is centred on 180
        path, _ = write_rotated_pole(tmp_path / "r.nc", mapping={
            "grid_mapping_name": "rotated_latitude_longitude",
            "grid_north_pole_latitude": 39.25, "grid_north_pole_longitude": 0.0})
        var = "tas"
    else:
        path, _ = write_polar_stereographic(tmp_path / "p.nc")
        var = "sic"
    s, rows = _open_rows(path, var)
    with s:
        n = s.ny * s.nx
        out = rows.rows(0, s.read(0, 1))
        geoms = _geoms(rows, n)
    _check_epsg4326(geoms)
    lon_c, lat_c = np.asarray(out["lon"]), np.asarray(out["lat"])
    assert lon_c.min() >= -180 and lon_c.max() < 180
    cell = np.asarray(out["cell_id"])
    # Each cell holds its centre; some cells are split into parts meeting at +-180.
    assert all(g.buffer(1e-9).covers(shapely.Point(x, y)) for g, x, y in
               zip(geoms[cell], lon_c, lat_c, strict=True))
    split = [g for g in geoms if len(g.geoms) > 1]
    if kind != "polar_stereographic":
        assert split
    # Neighbours not split share their corners bit for bit (same digits in the text).
    with s:
        text = rows.geometry.polygons(np.arange(n)).to_list()
    shared = 0
    for c in range(n - 1):
        if (c + 1) % s.nx and ")),((" not in text[c] + text[c + 1] and \
                text[c] != text[c + 1]:
            here, east = _ring_points(text[c]), _ring_points(text[c + 1])
            if len(here) == len(east) == 5 and abs(float(here[1].split()[0])) < 180:
                assert (here[1], here[2]) == (east[0], east[3]), (c, here, east)
                shared += 1
    assert shared >= n // 3
    for g in split:
        b = shapely.bounds(np.array(g.geoms))
        assert -180 in b[:, 0] and 180 in b[:, 2]


def test_a_self_intersecting_cell_is_repaired_into_its_areas():
    text = np.array(["SRID=4326;MULTIPOLYGON(((0 0,2 2,2 0,0 2,0 0)))",
                     "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 1,0 0)))", None], dtype=object)
    assert repair_invalid(text) == 1
    g = shapely.from_wkt(text[0].split(";", 1)[1])
    assert g.is_valid and g.geom_type == "MultiPolygon" and len(g.geoms) == 2
    assert g.area == pytest.approx(2.0)
    assert text[1] == "SRID=4326;MULTIPOLYGON(((0 0,1 0,1 1,0 1,0 0)))" and text[2] is None


def test_cell_geometry_of_a_curvilinear_fold_is_valid():
    # A 2-D grid folded over itself in one place (corners out of order there).
    lat, lon = np.meshgrid(np.arange(4.0), np.arange(5.0), indexing="ij")
    lon[1, 2], lon[2, 2] = 8.0, -4.0
    g = CellGeometry.from_dataset(type("NoVars", (), {"variables": {}})(), y_dim="y",
                                  x_dim="x", lat=lat, lon=lon)
    assert sorted(g.split) == [1, 3, 8, 11, 16, 18]  # the self-intersecting quads, repaired
    geoms = shapely.from_wkt([t.split(";", 1)[1] for t in g.polygons(np.arange(20))])
    _check_epsg4326(geoms)


def test_healpix_faces_on_the_poles_and_the_antimeridian_are_valid(tmp_path):
    # HEALPix has faces with a corner on a pole that is also on +-180: split there, they
    # must not keep a part of zero area (a line), which is not a valid polygon.
    write_healpix(tmp_path / "hp.nc", 4, nt=1)
    s, rows = _open_rows(tmp_path / "hp.nc")
    with s:
        geoms = _geoms(rows, s.nx)
    _check_epsg4326(geoms)
    assert sum(len(g.geoms) > 1 for g in geoms) >= 8
    assert sum(g.area for g in geoms) == pytest.approx(360 * 180)  # they tile the globe


ATLANTIC = (Path(__import__("iris_sample_data").__file__).parent / "sample_data"
            / "atlantic_profiles.nc")


def test_a_box_stored_across_the_0_360_seam_reads_west_to_east_in_one_piece():
    # iris' atlantic_profiles.nc stores lon 0.5, 325.5 ... 355.5: a 40 x 10 degree box.
    # Before, its first cell's polygon spanned 325 degrees (edges between 0.5 and 325.5)
    # and the map was a world-wide strip with the box in it.
    import xarray as xr
    from ncreel.render.maps import central_longitude

    with open_series(str(ATLANTIC), "theta", time_dim="depth") as s:
        lat, lon = s.cell_coordinates()
        assert lon[0].tolist() == [325.5, 330.5, 335.5, 340.5, 345.5, 350.5, 355.5, 0.5]
        cont = s.cell_coordinates(continuous=True)[1][0]
        assert cont.tolist() == [325.5, 330.5, 335.5, 340.5, 345.5, 350.5, 355.5, 360.5]
        assert central_longitude(cont) == pytest.approx(-17.0)
        # Each column holds the data of the longitude it is said to have.
        field = s.read(0, 1)[0]
        with xr.open_dataset(ATLANTIC) as ds:
            want = ds["theta"].isel(depth=0).sel(lon=lon[0]).values
        np.testing.assert_array_equal(np.isnan(field), np.isnan(want))
        np.testing.assert_array_equal(field[np.isfinite(field)], want[np.isfinite(want)])
        polygons = CellGeometry.from_series(s).polygons(np.arange(8))
    bounds = [shapely.from_wkt(t.split(";", 1)[1]).bounds for t in polygons]
    assert [b[2] - b[0] for b in bounds] == [5.0] * 8
    assert (bounds[0][0], bounds[-1][2]) == (-37.0, 3.0)
