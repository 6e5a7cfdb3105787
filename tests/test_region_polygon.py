"""Polygon regions: files read, cells kept, covered fraction and edge distance checked by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely
from layouts import write_rectilinear
from ncreel.cells import ShardRows, cells_settings
from ncreel.config.settings import CellsSettings, SeriesSelection
from ncreel.core.errors import NcreelError
from ncreel.region.polygon import cover_cells, edge_distance, read_polygon_file
from ncreel.region.selection import open_selection
from ncreel.region.spec import polygon_box, region_from_config
from scipy.integrate import quad

# WGS 84 (NIMA TR8350.2): semi-major axis and first eccentricity squared.
A, E2 = 6378137.0, 0.00669437999014


def meridian_arc(lat_deg: float) -> float:
    """Equator-to-latitude meridian arc on WGS 84, metres: integral of M = a(1-e2)/W^3."""
    def m(phi):
        return A * (1 - E2) / (1 - E2 * np.sin(phi) ** 2) ** 1.5
    return quad(m, 0.0, np.radians(lat_deg), epsabs=1e-6)[0]


def authalic_q(lat_deg: float) -> float:
    """Snyder (1987) eq. 3-12: q, proportional to the ellipsoid's area from the equator."""
    e = np.sqrt(E2)
    s = np.sin(np.radians(lat_deg))
    return (1 - E2) * (s / (1 - E2 * s * s) - np.log((1 - e * s) / (1 + e * s)) / (2 * e))


def geojson(path, *rings, geometry="Polygon"):
    coords = [[list(map(list, r))] for r in rings]
    geom = ({"type": "Polygon", "coordinates": coords[0]} if geometry == "Polygon" else
            {"type": "MultiPolygon", "coordinates": coords})
    path.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {}, "geometry": geom}]}))
    return path


def box_ring(w, s, e, n):
    return [(w, s), (e, s), (e, n), (w, n), (w, s)]


def test_distance_to_the_edge_is_the_meridian_arc():
    region = shapely.box(-20.0, 0.0, 20.0, 30.0)
    # Nearest edge of (0, 10) is the equator below it: the meridian arc 0..10 degrees
    # (1 105 854.8 m); (0, -1) is outside, 1 degree south of the edge: negative.
    d = edge_distance(region, np.array([0.0, 0.0, 0.0005]), np.array([10.0, -1.0, -0.018]))
    assert d[0] == pytest.approx(meridian_arc(10.0), abs=1.0)
    assert d[0] == pytest.approx(1_105_854.8, abs=1.0)
    assert d[1] == pytest.approx(-meridian_arc(1.0), abs=1.0)
    # 2 km from the edge, between two boundary points: within 1 m (as documented).
    assert d[2] == pytest.approx(-meridian_arc(0.018), abs=1.0)


def test_covered_fraction_by_hand():
    cells = np.array([shapely.box(0.0, 0.0, 10.0, 60.0)] * 2 + [shapely.box(30, 0, 40, 10)],
                     dtype=object)
    lon, lat = np.array([5.0, 5.0, 35.0]), np.array([30.0, 30.0, 5.0])
    # Half the longitudes: half the area (x is linear in longitude in an equal-area
    # cylindrical map).
    keep, f, _ = cover_cells(shapely.box(0.0, 0.0, 5.0, 60.0), cells[:1], lon[:1], lat[:1])
    assert keep.tolist() == [0] and f[0] == pytest.approx(0.5, abs=1e-12)
    # Latitudes 0..30 of a cell 0..60: q(30) / q(60) on the ellipsoid (0.5774 on a sphere
    # would be sin 30 / sin 60).
    keep, f, d = cover_cells(shapely.box(-5.0, -1.0, 15.0, 30.0), cells, lon, lat)
    assert keep.tolist() == [0, 1]  # the third cell is off the region: no row
    np.testing.assert_allclose(f, authalic_q(30.0) / authalic_q(60.0), rtol=1e-9)
    # Centre (5, 30) lies on the region's north edge.
    np.testing.assert_allclose(d, 0.0, atol=1e-6)
    # A cell inside: exactly 1.
    keep, f, _ = cover_cells(shapely.box(-1, -1, 50, 70), cells, lon, lat)
    assert keep.tolist() == [0, 1, 2] and (f == 1.0).all()


def test_geojson_region_keeps_intersecting_cells_with_their_columns(tmp_path):
    lat, lon = np.arange(-85.0, 90.0, 10.0), np.arange(5.0, 360.0, 10.0)  # 0...360
    path, t = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon)
    # A triangle: of the 3 x 3 cells its bounds reach, it intersects 7 (not the 2 in the
    # north-east, beyond its hypotenuse).
    tri = geojson(tmp_path / "tri.geojson", [(12, 3), (38, 3), (12, 27), (12, 3)])
    region = region_from_config({"file": str(tri)})
    assert (region.west, region.east, region.south, region.north) == (12, 38, 3, 27)
    sel = SeriesSelection(paths=[str(path)], variable="tas", time_dim=None, select={},
                          lat=None, lon=None, time=None, region=region.to_params())
    with open_selection(sel) as s:
        assert s.shape[1:] == (3, 3)
        rows = ShardRows.for_series(s, cell_mean=np.zeros((3, 3)), cells=CellsSettings.from_params(
            cells_settings({"geometry": "text"})))
        out = rows.rows(0, s.read(0, 2))
    names = [c[0] for c in rows.columns]
    assert names[-3:] == ["covered_fraction", "edge_distance_m", "geom"]
    cells = sorted({(float(a), float(b)) for a, b in zip(out["lon"], out["lat"], strict=True)})
    want = [(c, r) for r in (5.0, 15.0, 25.0) for c in (15.0, 25.0, 35.0)
            if shapely.intersects(shapely.box(c - 5, r - 5, c + 5, r + 5),
                                  shapely.Polygon([(12, 3), (38, 3), (12, 27)]))]
    assert cells == sorted(want) and len(want) == 7
    assert len(out["cell_id"]) == 2 * 7
    f = np.asarray(out["covered_fraction"])
    assert ((f > 0) & (f <= 1)).all()
    # Cell (15, 5): lon 10..20, lat 0..10 minus what lies west of 12, south of 3, above
    # the hypotenuse: between 0.4 and 0.6 of it.
    k = np.flatnonzero((np.asarray(out["lon"]) == 15) & (np.asarray(out["lat"]) == 5))[0]
    assert 0.4 < f[k] < 0.6


def test_antimeridian_polygon_gives_a_box_across_it(tmp_path):
    mp = geojson(tmp_path / "fiji.geojson", box_ring(175, -20, 180, -15),
                 box_ring(-180, -20, -178, -15), geometry="MultiPolygon")
    poly = read_polygon_file(mp)
    assert polygon_box(poly) == (175.0, -178.0, -20.0, -15.0)
    # A centre next to the seam inside measures to the true edges, not to 180.
    d = edge_distance(poly, np.array([179.9]), np.array([-17.5]))
    assert d[0] > 200_000
    # The outline drawn has no edge along the seam.
    from ncreel.render.maps import region_features

    (outline,) = region_features(region_from_config({"file": str(mp)}))
    for line in outline.lines:
        seam = np.abs(line[:, 0]) == 180.0
        assert not (seam[:-1] & seam[1:]).any()
    assert sum(len(line) for line in outline.lines) >= 8


def _write_shapefile(path, ring, prj: str | None):
    import shapefile

    with shapefile.Writer(str(path), shapeType=shapefile.POLYGON) as w:
        w.field("name", "C")
        w.poly([ring])
        w.record("a")
    if prj is not None:
        path.with_suffix(".prj").write_text(prj)


def test_shapefile_is_reprojected_from_its_prj(tmp_path):
    from pyproj import CRS, Transformer

    tr = Transformer.from_crs("EPSG:4326", "EPSG:3857", always_xy=True)
    lonlat = [(10.0, 40.0), (10.0, 50.0), (20.0, 50.0), (20.0, 40.0), (10.0, 40.0)]  # clockwise
    ring = [tr.transform(x, y) for x, y in lonlat]
    _write_shapefile(tmp_path / "merc.shp", ring, CRS.from_epsg(3857).to_wkt("WKT1_ESRI"))
    poly = read_polygon_file(tmp_path / "merc.shp")
    np.testing.assert_allclose(poly.bounds, (10, 40, 20, 50), atol=1e-6)
    _write_shapefile(tmp_path / "plain.shp", lonlat, None)  # no .prj: WGS 84 read
    np.testing.assert_allclose(read_polygon_file(tmp_path / "plain.shp").bounds, (10, 40, 20, 50))


@pytest.mark.parametrize("case, message", [
    ("missing", "no such file"),
    ("points", "holds no polygons (found Point)"),
    ("bowtie", "is not valid (Self-intersection"),
    ("badprj", "unknown coordinate reference system"),
    ("projected_no_prj", "are not WGS 84 longitude/latitude"),
    ("suffix", "not a polygon file"),
    ("notjson", "cannot be read as GeoJSON"),
])
def test_bad_polygon_file_is_one_line_naming_it(tmp_path, case, message):
    path = tmp_path / {"badprj": "x.shp", "projected_no_prj": "x.shp",
                       "suffix": "x.kml"}.get(case, "x.geojson")
    if case == "points":
        path.write_text(json.dumps({"type": "Point", "coordinates": [1, 2]}))
    elif case == "bowtie":
        geojson(path, [(0, 0), (10, 10), (10, 0), (0, 10), (0, 0)])
    elif case == "badprj":
        _write_shapefile(path, [(0, 0), (0, 1), (1, 1), (0, 0)], "PROJCS[nonsense")
    elif case == "projected_no_prj":
        _write_shapefile(path, [(0, 0), (0, 5e5), (5e5, 5e5), (0, 0)], None)
    elif case in ("suffix", "notjson"):
        path.write_text("<kml/>")
    with pytest.raises(NcreelError) as err:
        region_from_config({"file": str(path)})
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text


def test_polygon_off_the_grid_is_one_line_before_any_job(tmp_path):
    lat, lon = np.arange(-85.0, 90.0, 10.0), np.arange(5.0, 360.0, 10.0)
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat[:5], lon=lon)  # -85..-45
    gj = geojson(tmp_path / "north.geojson", box_ring(0, 60, 10, 70))
    region = region_from_config({"file": str(gj)})
    sel = SeriesSelection(paths=[str(path)], variable="tas", time_dim=None, select={},
                          lat=None, lon=None, time=None, region=region.to_params())
    with pytest.raises(NcreelError, match="north.geojson") as err:
        open_selection(sel)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("kind", ["curvilinear", "rotated-pole"])
def test_curvilinear_and_projected_grids_get_the_polygon_table(tmp_path, kind):
    # No 1-D latitude/longitude: the cut is the index rectangle round the cells that
    # intersect the polygon; the table's cells and polygons are exactly those of the whole
    # grid that intersect it.
    from grid_files import write_rotated_pole
    from layouts import write_curvilinear
    from ncreel.cells import CellGeometry
    from ncreel.input.source import open_series

    if kind == "curvilinear":
        path, _ = write_curvilinear(tmp_path / "c.nc", ny=12, nx=14, lon0=150.0, dlon=3.0)
        ring = box_ring(165, -2, 175, 12)
    else:
        path, _ = write_rotated_pole(tmp_path / "r.nc", ny=20, nx=24, step=1.0)
        with open_series(str(path), "tas") as whole:
            lat, lon = whole.cell_coordinates()
        c_lon, c_lat = float(np.median(lon)), float(np.median(lat))
        ring = box_ring(c_lon - 3, c_lat - 2, c_lon + 4, c_lat + 3)
    gj = geojson(tmp_path / "p.geojson", ring)
    region = region_from_config({"file": str(gj)})
    with open_series(str(path), "tas") as whole:
        n = whole.ny * whole.nx
        text = np.asarray(CellGeometry.from_series(whole).polygons(np.arange(n)).to_list())
    geoms = shapely.from_wkt([t.split(";", 1)[1] for t in text])
    want = sorted(text[shapely.intersects(geoms, shapely.Polygon(ring))])
    assert 4 <= len(want) < n // 2
    sel = SeriesSelection(paths=[str(path)], variable="tas", time_dim=None, select={},
                          lat=None, lon=None, time=None, region=region.to_params())
    with open_selection(sel) as s:
        assert s.ny * s.nx < n  # only the region's slab is read
        cells = CellsSettings.from_params(cells_settings({"geometry": "text"}))
        rows = ShardRows.for_series(s, cell_mean=np.zeros(s.shape[1:]), cells=cells)
        out = rows.rows(0, s.read(0, 1))
        got = sorted(rows.geometry.polygons(np.asarray(out["cell_id"])).to_list())
    assert got == want


def test_an_edited_polygon_file_changes_the_jobs_parameters(tmp_path):
    # Jobs rerun when their parameters change: the region's carry the file's digest.
    gj = geojson(tmp_path / "r.geojson", [(0, 0), (10, 0), (5, 10), (0, 0)])
    first = region_from_config({"file": str(gj)}).to_params()
    assert region_from_config({"file": str(gj)}).to_params() == first
    geojson(gj, [(0, 0), (10, 0), (6, 10), (0, 0)])  # same bounds, another triangle
    # Read again in this process (no stale cached polygon of the same path).
    second = region_from_config({"file": str(gj)}).to_params()
    assert second["west"] == first["west"] and second["east"] == first["east"]
    assert second != first


@pytest.mark.parametrize("lon", [np.arange(5.0, 360.0, 10.0), np.arange(-175.0, 180.0, 10.0)],
                         ids=["0-360", "pm180"])
def test_polygon_across_the_files_seam_keeps_its_cells_in_order(tmp_path, lon):
    # A polygon across longitude 0: on a 0...360 file its columns are at both ends.
    lat = np.arange(-85.0, 90.0, 10.0)
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon)
    ring = [(-12, 3), (14, 3), (-12, 27), (-12, 3)]
    region = region_from_config({"file": str(geojson(tmp_path / "r.geojson", ring))})
    sel = SeriesSelection(paths=[str(path)], variable="tas", time_dim=None, select={},
                          lat=None, lon=None, time=None, region=region.to_params())
    with open_selection(sel) as s:
        _, lon_c = s.cell_coordinates(continuous=True)
        assert np.all(np.diff(lon_c[0]) == 10.0) and s.shape[1:] == (3, 4)
        keep, _, _ = s.covered_cells()
        lat_k, lon_k = (a.reshape(-1)[keep] for a in s.cell_coordinates())
    got = sorted(zip(((lon_k + 180) % 360 - 180).tolist(), lat_k.tolist(), strict=True))
    want = sorted((x, y) for y in lat for x in np.arange(-175.0, 180, 10)
                  if shapely.intersects(shapely.box(x - 5, y - 5, x + 5, y + 5),
                                        shapely.Polygon(ring)))
    assert got == want and len(want) == 9


def test_mesh_table_keeps_the_faces_that_intersect_the_polygon(tmp_path):
    from meshes import voronoi_mesh, write_ugrid
    from ncreel.cells.geometry import MeshGeometry
    from ncreel.input.source import open_series

    path = tmp_path / "mesh.nc"
    write_ugrid(path, voronoi_mesh(200))
    ring = box_ring(-40, -20, 50, 40)
    region = region_from_config({"file": str(geojson(tmp_path / "p.geojson", ring))})
    with open_series(str(path), "sst") as whole:
        n = whole.nx
        text = np.asarray(MeshGeometry(whole.mesh).polygons(np.arange(n)).to_list())
    want = sorted(text[shapely.intersects(
        shapely.from_wkt([t.split(";", 1)[1] for t in text]), shapely.Polygon(ring))])
    assert 5 <= len(want) < n // 2
    sel = SeriesSelection(paths=[str(path)], variable="sst", time_dim=None, select={},
                          lat=None, lon=None, time=None, region=region.to_params())
    with open_selection(sel) as s:
        assert s.nx == n  # the whole mesh is drawn
        cells = CellsSettings.from_params(cells_settings({"geometry": "text"}))
        rows = ShardRows.for_series(s, cell_mean=np.zeros(s.shape[1:]), cells=cells)
        out = rows.rows(0, s.read(0, 1))
        got = sorted(rows.geometry.polygons(np.asarray(out["cell_id"])).to_list())
        assert [c[0] for c in rows.columns][-3:] == ["covered_fraction", "edge_distance_m",
                                                     "geom"]
        # The movie: the whole mesh, with the region's outline drawn.
        from ncreel.render.segment import make_renderer
        from test_layouts import RENDER

        r = make_renderer(s, RENDER, vmin=0.0, vmax=1.0)
        assert r.shape == (1, n)
        r.close()
    assert got == want


def _source_rings(name):
    # A country's polygons as the shipped file holds them: lists of (n, 2) lon/lat rings,
    # unsplit (a ring may step across 180 or circle a pole).
    from ncreel.region.naturalearth import _country_arcs, _country_geometries

    arcs, g = _country_arcs(), _country_geometries()[name]
    polygons = g["arcs"] if g["type"] == "MultiPolygon" else [g["arcs"]]
    return [[np.concatenate([arcs[i] if i >= 0 else arcs[~i][::-1] for i in ids])
             for ids in polygon] for polygon in polygons]


def test_every_natural_earth_country_has_its_own_area_and_no_edge_round_the_globe():
    # Fiji's, Russia's and Antarctica's outlines once had rings that stepped across 180
    # read as running 360 degrees the other way: Fiji was 162 075 km2, Russia 11 % too
    # big, Antarctica 10 % too small (its coast circles the south pole).
    from ncreel.region.naturalearth import _country_geometries, country_polygon
    from ncreel.region.polygon import cea_area
    from pyproj import Geod

    geod = Geod(ellps="WGS84")
    for name in _country_geometries():
        poly = country_polygon(name)
        assert poly.geom_type in ("Polygon", "MultiPolygon") and poly.is_valid, name
        assert -180 <= poly.bounds[0] and poly.bounds[2] <= 180, name
        for ring in shapely.get_rings(shapely.get_parts(poly)):
            x, y = shapely.get_coordinates(ring).T
            cut = (np.abs(x) == 180) | (np.abs(y) == 90)  # the seam or a pole
            wide = (np.abs(np.diff(x)) > 180) & ~(cut[:-1] & cut[1:])
            assert not wide.any(), name
        # The country's own area: its unsplit rings on the ellipsoid (geodesic edges,
        # pyproj.Geod handles a step across 180 and a ring round a pole); a polygon is
        # its largest ring less the others (holes; Antarctica's ring at the pole).
        own = 0.0
        for rings in _source_rings(name):
            a = sorted(abs(geod.polygon_area_perimeter(r[:, 0], r[:, 1])[0]) for r in rings)
            own += a[-1] - sum(a[:-1])
        assert cea_area(np.array([poly]))[0] == pytest.approx(own, rel=1e-3), name


def test_fiji_table_on_a_quarter_degree_grid_by_hand(tmp_path):
    # Fiji lies within 170...190 east: in 0...360 longitudes its rings need no split, so
    # the cells it touches, their covered fractions and edge distances are computed here
    # without the antimeridian. The table once kept 110 cells (76 touch Fiji), with 41
    # fractions off by more than 0.02 and ocean cells at -9 405 m.
    from pyproj import Geod

    fiji = shapely.union_all([shapely.Polygon(np.column_stack([r[:, 0] % 360, r[:, 1]]))
                              for rings in _source_rings("Fiji") for r in rings])
    lat, lon = np.arange(-22.875, -11.9, 0.25), np.arange(170.125, 190.0, 0.25)
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon, n_time=1)
    sel = SeriesSelection(paths=[str(path)], variable="tas", time_dim=None, select={},
                          lat=None, lon=None, time=None,
                          region=region_from_config("Fiji").to_params())
    with open_selection(sel) as s:
        rows = ShardRows.for_series(s, cell_mean=np.zeros(s.shape[1:]), cells=CellsSettings
                                    .from_params(cells_settings({"geometry": "none"})))
        out = rows.rows(0, s.read(0, 1))
    x, y = np.asarray(out["lon_raw"]), np.asarray(out["lat"])
    cx, cy = (a.ravel() for a in np.meshgrid(lon, lat))
    boxes = shapely.box(cx - 0.125, cy - 0.125, cx + 0.125, cy + 0.125)
    touch = shapely.intersects(boxes, fiji)
    assert touch.sum() == 76
    assert sorted(zip(x, y, strict=True)) == sorted(zip(cx[touch], cy[touch], strict=True))

    # Covered fraction: areas in the equal-area cylindrical map of the ellipsoid (x in
    # radians of longitude, y Snyder's q), edges densified to 0.005 degrees.
    def area(g):
        g = shapely.segmentize(g, 0.005)
        return shapely.area(shapely.transform(g, lambda p: np.column_stack(
            [np.radians(p[:, 0]), authalic_q(p[:, 1])])))

    cells = shapely.box(x - 0.125, y - 0.125, x + 0.125, y + 0.125)
    want = area(shapely.intersection(cells, fiji)) / area(cells)
    np.testing.assert_allclose(out["covered_fraction"], want, atol=1e-5)
    seam = np.abs(x - 180.0) < 0.2
    assert seam.sum() >= 4 and (want[seam] > 0).all()
    # Edge distance: to the nearest point of Fiji's coast every 0.001 degree, geodesic.
    coast = shapely.get_coordinates(shapely.segmentize(fiji.boundary, 0.001))
    _, _, dist = Geod(ellps="WGS84").inv(
        np.repeat(x, len(coast)), np.repeat(y, len(coast)),
        np.tile(coast[:, 0], len(x)), np.tile(coast[:, 1], len(x)))
    near = np.asarray(dist).reshape(len(x), len(coast)).min(axis=1)
    sign = np.where(shapely.intersects_xy(fiji, x, y), 1.0, -1.0)
    np.testing.assert_allclose(out["edge_distance_m"], sign * near, atol=60.0)


def test_a_cell_near_the_pole_measures_to_the_coast_not_the_pole():
    # Antarctica is closed along the south pole: no edge there (nor along the seam).
    from ncreel.region.naturalearth import country_polygon

    d = edge_distance(country_polygon("Antarctica"), np.array([0.0, 179.99]),
                      np.array([-89.9, -89.0]))
    assert (d > 400_000).all()  # the Ross Ice Shelf reaches 85.2 S; the pole is 11 km away


@pytest.mark.parametrize("value", [3, "", None, ["a.geojson"]])
def test_region_file_that_is_not_a_path_is_one_line(value):
    with pytest.raises(NcreelError, match="region.file': must be the path") as err:
        region_from_config({"file": value})
    assert "\n" not in str(err.value)


def test_polygon_written_across_the_antimeridian_is_split_and_said(tmp_path, caplog):
    # 170E..170W written without the split RFC 7946 asks for: read literally it runs the
    # other way, 340 degrees round the globe. Read as the 20-degree box, with a warning.
    path = geojson(tmp_path / "pacific.geojson", [(170, 0), (-170, 0), (-170, 10), (170, 10),
                                                  (170, 0)])
    with caplog.at_level("WARNING", logger="ncreel.region.polygon"):
        region = read_polygon_file(path)
    assert "read as crossing the antimeridian" in caplog.text
    assert region.area == pytest.approx(200.0)
    assert region.covers(shapely.Point(175, 5)) and region.covers(shapely.Point(-175, 5))
    assert not region.intersects(shapely.Point(0, 5))
    # A polar cap's edge along a parallel from -180 to 180 is no crossing.
    caplog.clear()
    cap = read_polygon_file(geojson(tmp_path / "cap.geojson", [(-180, 80), (180, 80),
                                                                (180, 90), (-180, 90),
                                                                (-180, 80)]))
    assert cap.area == pytest.approx(3600.0) and "antimeridian" not in caplog.text


def test_polygon_file_ring_round_a_pole_is_its_polar_cap(tmp_path):
    # A ring round the south pole written unsplit (90-degree steps, one across 180) is
    # the cap south of it, whichever way it is wound.
    ring = [(0, -70), (90, -70), (180, -70), (-90, -70), (0, -70)]
    for i, r in enumerate((ring, ring[::-1])):
        cap = read_polygon_file(geojson(tmp_path / f"cap{i}.geojson", r))
        assert cap.area == pytest.approx(360.0 * 20.0) and cap.bounds[1] == -90.0


def test_projected_polygon_across_the_antimeridian_is_split(tmp_path):
    from pyproj import Transformer

    # A box in Pacific Mercator (EPSG:3832, central meridian 150E) from 170E to 170W.
    tr = Transformer.from_crs("EPSG:4326", "EPSG:3832", always_xy=True)
    (x0, x1), (y0, y1) = tr.transform([170.0, 190.0], [0.0, 10.0])
    path = tmp_path / "pacific3832.geojson"
    path.write_text(json.dumps({
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": "EPSG:3832"}},
        "features": [{"type": "Feature", "properties": {}, "geometry": {
            "type": "Polygon", "coordinates": [box_ring(x0, y0, x1, y1)]}}]}))
    region = read_polygon_file(path)
    assert region.area == pytest.approx(200.0, rel=1e-3)
    assert region.covers(shapely.Point(179.9, 5)) and region.covers(shapely.Point(-179.9, 5))
    assert not region.intersects(shapely.Point(0, 5))


def test_unreadable_geometry_or_shapefile_is_one_line(tmp_path):
    path = tmp_path / "foo.geojson"
    path.write_text(json.dumps({"type": "Feature", "geometry": {"type": "Foo"}}))
    with pytest.raises(NcreelError, match="foo.geojson': a geometry cannot be read"):
        read_polygon_file(path)
    shp = tmp_path / "garbage.shp"
    shp.write_bytes(b"not a shapefile at all" * 10)
    with pytest.raises(NcreelError, match="garbage.shp': cannot be read as a shapefile"):
        read_polygon_file(shp)
