"""A polygon region's table in real PostGIS: its cells are those ST_Intersects finds.

The region's rows (written by :class:`ncreel.cells.ShardRows` from the cut series) and the
whole grid's rows are loaded by :func:`ncreel.pg.load.load_copy` into a PostGIS database;
PostGIS then picks the whole grid's cells that intersect the region (read from the same
GeoJSON file with ``ST_GeomFromGeoJSON``). Both sets must be the same cells with the same
polygons, and the run's covered fraction and edge distance must agree with PostGIS's
geography measures.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from layouts import write_rectilinear
from ncreel.cells import ShardRows, cells_settings
from ncreel.config.settings import CellsSettings, SeriesSelection
from ncreel.pg.load import load_copy
from ncreel.region.selection import open_selection
from ncreel.region.spec import region_from_config

LAT = np.arange(-27.5, 30.0, 5.0)
LON = np.arange(0.0, 360.0, 5.0)  # 0...360: the cells 177.5..182.5 are split at 180
#: Across the antimeridian (split there, RFC 7946), slanted edges, one edge on a cell edge.
REGION = {"type": "MultiPolygon", "coordinates": [
    [[[171.0, -12.0], [180.0, -12.0], [180.0, 8.0], [174.0, 8.0], [171.0, -12.0]]],
    [[[-180.0, -12.0], [-165.0, -12.0], [-180.0, 8.0], [-180.0, -12.0]]]]}


def load(conn, sel, tmp_path, run, table="cells"):
    cells = CellsSettings.from_params(cells_settings({"geometry": "postgis"}))
    copy = tmp_path / f"{run}.copy"
    with open_selection(sel) as s:
        rows = ShardRows.for_series(s, cell_mean=np.zeros(s.shape[1:]), cells=cells)
        with open(copy, "wb") as fh:
            rows.write(fh, 0, s.read(0, 1))
    load_copy(copy, conninfo=conn.info.dsn, table=table, run=run, columns=rows.columns)
    return rows.columns


def test_region_cells_are_st_intersects_of_the_loaded_geometry(postgis_conn, tmp_path):
    conn = postgis_conn
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=LAT, lon=LON)
    gj = tmp_path / "region.geojson"
    gj.write_text(json.dumps(REGION))
    region = region_from_config({"file": str(gj)})
    assert region.west == 171 and region.east == -165  # its bounds, across 180

    def selection(reg):
        return SeriesSelection(paths=[str(path)], variable="tas", time_dim=None, select={},
                               lat=None, lon=None, time=None, region=reg)

    columns = load(conn, selection(region.to_params()), tmp_path, "region")
    assert [c[0] for c in columns[-3:]] == ["covered_fraction", "edge_distance_m", "geom"]
    # The whole grid, no region: whose cells PostGIS intersects with the region.
    load(conn, selection(None), tmp_path, "whole", table="grid")
    geojson = json.dumps(REGION)
    ours = conn.execute("SELECT geom::text FROM cells WHERE run = 'region' ORDER BY 1"
                        ).fetchall()
    theirs = conn.execute(
        "SELECT geom::text FROM grid WHERE ST_Intersects(geom, "
        "ST_SetSRID(ST_GeomFromGeoJSON(%s), 4326)) ORDER BY 1", (geojson,)).fetchall()
    assert len(ours) == len(theirs) >= 20
    assert ours == theirs  # the same cells, with the same polygons (bit for bit)
    # The split cells at 180 are in.
    assert conn.execute("SELECT count(*) FROM cells WHERE run = 'region' AND "
                        "ST_NumGeometries(geom) = 2").fetchone()[0] >= 4
    # Covered fraction and edge distance against PostGIS geography (geodesic edges, so
    # close to ncreel's, not equal: ncreel's cells are bounded by parallels).
    got = np.array(conn.execute(
        "SELECT covered_fraction, ST_Area(ST_Intersection(geom, r)::geography) / "
        "ST_Area(geom::geography), edge_distance_m, ST_Distance(ST_SetSRID(ST_MakePoint("
        "lon, lat), 4326)::geography, ST_Segmentize(ST_Boundary(s), 0.01)::geography), "
        "ST_Intersects(ST_SetSRID(ST_MakePoint(lon, lat), 4326), r) FROM cells, "
        "(SELECT r, ST_UnaryUnion(ST_ShiftLongitude(r)) AS s FROM (SELECT ST_SetSRID("
        "ST_GeomFromGeoJSON(%s), 4326) AS r) a) g WHERE run = 'region'",
        (geojson,)).fetchall(), dtype=float)
    np.testing.assert_allclose(got[:, 0], got[:, 1], atol=2e-3)
    assert ((got[:, 0] > 0) & (got[:, 0] <= 1)).all()
    assert (got[:, 0] == 1).sum() >= 3
    # Sign: positive with the centre inside. Size: against PostGIS's distance to the
    # region made one piece in 0...360 (its seam at 180 is no edge), its edges
    # densified to 0.01 degree so that geography's geodesic edges follow the straight
    # longitude/latitude edges (a parallel is no geodesic).
    assert ((got[:, 2] > 0) == (got[:, 4] == 1)).all()
    np.testing.assert_allclose(np.abs(got[:, 2]), got[:, 3], rtol=1e-3, atol=60.0)


@pytest.mark.parametrize("name", ["Chile"])
def test_country_region_cells_are_st_intersects_of_its_outline(postgis_conn, tmp_path, name):
    # A named country: the table's cells are those of the country's box that intersect
    # its full Natural Earth outline.
    conn = postgis_conn
    lat, lon = np.arange(-59.0, 0.0, 2.0), np.arange(-89.0, -60.0, 2.0)
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon)
    region = region_from_config(name)
    sel = SeriesSelection(paths=[str(path)], variable="tas", time_dim=None, select={},
                          lat=None, lon=None, time=None, region=region.to_params())
    load(conn, sel, tmp_path, "country")
    import shapely

    outline = shapely.to_wkt(region.polygon, rounding_precision=-1)
    n_ours, n_inside, n_box = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE ST_Intersects(geom, ST_GeomFromText(%s, "
        "4326))), (SELECT count(*) FROM cells WHERE run = 'country') FROM cells WHERE "
        "run = 'country'", (outline,)).fetchone()
    assert n_ours == n_inside == n_box
    with open_selection(sel) as s:
        assert 0 < n_ours < s.ny * s.nx  # the outline is narrower than its box
