"""The per-cell table in a real PostGIS database, as a GIS analyst uses it.

Rows are written by :class:`ncreel.cells.ShardRows` with ``cells.geometry: postgis`` and
loaded by :func:`ncreel.pg.load.load_copy` (the load job's code) into a throw-away server
with ``CREATE EXTENSION postgis``. Expected cells are computed independently: cell boxes
from the file's coordinates with numpy, intersections with shapely.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import shapely
from grid_files import write_polar_stereographic, write_rotated_pole
from layouts import write_curvilinear, write_rectilinear
from meshes import voronoi_mesh, write_healpix, write_mpas
from ncreel.cells import ShardRows, cells_settings
from ncreel.config.settings import CellsSettings
from ncreel.input.source import open_series
from ncreel.pg.load import load_copy

NATURAL_EARTH = Path(__file__).resolve().parents[1] / "workflow/ncreel/data/natural_earth"


def load_run(conn, path, variable: str, tmp_path, *, table: str = "cells", steps: int = 1,
             run: str = "r1") -> dict:
    """Write the ``field`` rows of the first `steps` steps with ``geometry: postgis`` to a
    COPY file and load it with :func:`load_copy`; return the load summary."""
    cells = CellsSettings.from_params(cells_settings({"geometry": "postgis"}))
    copy = tmp_path / f"{table}.copy"
    with open_series(str(path), variable) as s:
        block = s.read(0, steps)
        rows = ShardRows.for_series(s, cell_mean=np.nanmean(s.read(0, s.n_time), axis=0),
                                    cells=cells)
        with open(copy, "wb") as fh:
            rows.write(fh, 0, block)
    assert rows.columns[-1] == ("geom", "geometry(MultiPolygon, 4326)")
    return load_copy(copy, conninfo=conn.info.dsn, table=table, run=run,
                     columns=rows.columns)


def containing(conn, lon: float, lat: float, table: str = "cells") -> list[int]:
    """cell_id of the step-0 cells whose polygon holds the point (lon, lat)."""
    return [r[0] for r in conn.execute(
        f"SELECT cell_id FROM {table} WHERE time_index = 0 AND "
        "ST_Intersects(geom, ST_SetSRID(ST_MakePoint(%s, %s), 4326)) ORDER BY cell_id",
        (lon, lat)).fetchall()]


def file_cell_boxes(path) -> tuple[np.ndarray, np.ndarray, list]:
    """Cell boxes of a rectilinear file from its own coordinates, in -180…180: edges
    halfway between centres (the sample has no CF bounds), row-major south to north."""
    import xarray as xr

    with xr.open_dataset(path) as ds:
        lat = ds["latitude"].values.astype(np.float64)
        lon = ds["longitude"].values.astype(np.float64)

    def edges(c):
        mid = (c[1:] + c[:-1]) / 2
        return np.r_[c[0] - (mid[0] - c[0]), mid, c[-1] + (c[-1] - mid[-1])]

    ye, xe = edges(lat), edges(lon) - 360.0  # the sample's longitudes are 225…315
    boxes = [shapely.box(xe[i], ye[j], xe[i + 1], ye[j + 1])
             for j in range(lat.size) for i in range(lon.size)]
    return lat, lon, boxes


def natural_earth_country(name: str):
    """The 1:50m outline of a Natural Earth country, decoded here from the TopoJSON ncreel
    ships (quantized, delta-encoded arcs; ~i is arc i reversed)."""
    topo = json.loads((NATURAL_EARTH / "countries-50m.json").read_text())
    (sx, sy), (tx, ty) = topo["transform"]["scale"], topo["transform"]["translate"]
    arcs = [np.cumsum(np.asarray(a, float), axis=0) * [sx, sy] + [tx, ty] for a in topo["arcs"]]

    def ring(ids):
        pts = [arcs[i] if i >= 0 else arcs[~i][::-1] for i in ids]
        return np.concatenate([pts[0], *[p[1:] for p in pts[1:]]])

    geom = next(g for g in topo["objects"]["countries"]["geometries"]
                if g["properties"]["name"] == name)
    polys = geom["arcs"] if geom["type"] == "MultiPolygon" else [geom["arcs"]]
    return shapely.MultiPolygon([shapely.Polygon(ring(p[0]), [ring(h) for h in p[1:]])
                                 for p in polys])


def test_kansas_point_finds_its_cell_in_the_0_360_sample(postgis_conn, sample_nc, tmp_path):
    summary = load_run(postgis_conn, sample_nc, "air_temperature", tmp_path, steps=2)
    lat, lon, _ = file_cell_boxes(sample_nc)
    assert summary["rows"] == 2 * lat.size * lon.size
    # Kansas, (-100, 40): the cell whose centre is nearest (260 in the file's 0…360).
    iy, ix = int(np.argmin(np.abs(lat - 40))), int(np.argmin(np.abs(lon - 260)))
    assert containing(postgis_conn, -100.0, 40.0) == [iy * lon.size + ix]
    assert containing(postgis_conn, 260.0, 40.0) == []  # the file's 0…360 is not EPSG:4326
    got = postgis_conn.execute(
        "SELECT lat, lon, lon_raw, ST_X(ST_Centroid(geom)), ST_Y(ST_Centroid(geom)) FROM cells "
        "WHERE time_index = 1 AND cell_id = %s", (iy * lon.size + ix,)).fetchone()
    assert got[:3] == (lat[iy], lon[ix] - 360.0, lon[ix])
    assert got[3:] == pytest.approx((lon[ix] - 360.0, lat[iy]))
    assert postgis_conn.execute(
        "SELECT bool_and(ST_IsValid(geom)), bool_and(GeometryType(geom) = 'MULTIPOLYGON'), "
        "min(ST_SRID(geom)), max(ST_XMax(geom)) FROM cells").fetchone() == (
            True, True, 4326, -45.0 + 1.875 / 2)


def test_join_with_a_natural_earth_country_returns_its_cells(postgis_conn, sample_nc,
                                                              tmp_path):
    load_run(postgis_conn, sample_nc, "air_temperature", tmp_path)
    country = natural_earth_country("Mexico")
    postgis_conn.execute("CREATE TABLE country (name text, geom geometry(MultiPolygon, 4326))")
    postgis_conn.execute("INSERT INTO country VALUES "
                         "('Mexico', ST_GeomFromText(%s, 4326))", (country.wkt,))
    _, _, boxes = file_cell_boxes(sample_nc)
    boxes = np.array(boxes)
    touching = np.flatnonzero(shapely.intersects(boxes, country)).tolist()
    inside = np.flatnonzero(shapely.within(boxes, country)).tolist()
    # Mexico, about 2 million km², is some 70 cells of 1.875° x 1.25°.
    assert len(touching) > 100 and len(inside) > 30

    def cells(predicate):
        return [r[0] for r in postgis_conn.execute(
            f"SELECT c.cell_id FROM cells c JOIN country k ON {predicate}(c.geom, k.geom) "
            "WHERE c.time_index = 0 AND k.name = 'Mexico' ORDER BY c.cell_id").fetchall()]

    assert cells("ST_Intersects") == touching
    assert cells("ST_Within") == inside


def test_global_grid_cells_on_the_antimeridian(postgis_conn, tmp_path):
    lon = np.arange(0.0, 360.0, 2.5)  # a column of cells centred on 180
    lat = np.arange(-88.75, 90.0, 2.5)
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon, n_time=1)
    load_run(postgis_conn, path, "tas", tmp_path)
    n = lat.size * lon.size
    assert postgis_conn.execute(
        "SELECT count(*), bool_and(ST_IsValid(geom)), sum(ST_Area(geom)), min(ST_XMin(geom)), "
        "max(ST_XMax(geom)), count(*) FILTER (WHERE ST_NumGeometries(geom) = 2) FROM cells"
    ).fetchone() == (n, True, pytest.approx(360 * 180), -180.0, 180.0, lat.size)
    iy = int(np.searchsorted(lat, 10.0))  # the row holding latitude 10.1
    east, west = containing(postgis_conn, 179.9, 10.1), containing(postgis_conn, -179.9, 10.1)
    assert east == west == [iy * lon.size + int(np.flatnonzero(lon == 180.0)[0])]
    assert postgis_conn.execute("SELECT lon, lon_raw FROM cells WHERE cell_id = %s",
                                east).fetchone() == (-180.0, 180.0)
    assert containing(postgis_conn, 0.1, 10.1) == [iy * lon.size]


@pytest.mark.parametrize("kind", ["curvilinear", "rotated_pole", "polar_stereographic", "mesh",
                                  "healpix"])
def test_every_grid_kind_loads_valid_geometry(postgis_conn, tmp_path, kind):
    if kind == "curvilinear":
        path, _ = write_curvilinear(tmp_path / "c.nc", ny=4, nx=8)
        var = "tas"
    elif kind == "rotated_pole":  # pole longitude 0: the domain straddles 180
        path, _ = write_rotated_pole(tmp_path / "r.nc", mapping={
            "grid_mapping_name": "rotated_latitude_longitude",
            "grid_north_pole_latitude": 39.25, "grid_north_pole_longitude": 0.0})
        var = "tas"
    elif kind == "polar_stereographic":
        path, _ = write_polar_stereographic(tmp_path / "p.nc")
        var = "sic"
    elif kind == "mesh":
        path = tmp_path / "mpas.nc"
        write_mpas(path, voronoi_mesh(200), nt=1)
        var = "temperature"
    else:
        path = tmp_path / "hp.nc"
        write_healpix(path, 3, nt=1)
        var = "tas"
    load_run(postgis_conn, path, var, tmp_path)
    valid, kinds, x0, x1, split, area = postgis_conn.execute(
        "SELECT bool_and(ST_IsValid(geom)), array_agg(DISTINCT GeometryType(geom)), "
        "min(ST_XMin(geom)), max(ST_XMax(geom)), count(*) FILTER (WHERE ST_XMin(geom) = -180 "
        "AND ST_XMax(geom) = 180), sum(ST_Area(geom)) FROM cells").fetchone()
    assert valid and kinds == ["MULTIPOLYGON"] and x0 >= -180 and x1 <= 180
    assert split >= 1  # cells on the antimeridian (or round the pole) are split there
    if kind in ("mesh", "healpix"):  # the faces tile the sphere
        assert area == pytest.approx(360 * 180, rel=1e-3)


@pytest.mark.integration
def test_workflow_loads_postgis_geometry_and_cells_sql_reloads_it(postgis_conn, pg_server,
                                                                  tmp_path):
    from workflow_run import make_workdir, snakemake

    (tmp_path / "w").mkdir()
    work = make_workdir(tmp_path / "w")
    lon = np.arange(0.0, 360.0, 20.0)  # 0…360 with a column of cells centred on 180
    lat = np.arange(-80.0, 90.0, 20.0)
    path, _ = write_rectilinear(tmp_path / "g.nc", lat=lat, lon=lon, n_time=4)
    db = postgis_conn.info.dbname
    cfg = {"input": str(path), "variable": "tas", "run": "gis", "table": "cells",
           "cells": {"geometry": "postgis"},
           "database": {"url": f"postgresql://postgres@/{db}?host={pg_server['host']}"}}
    (work / "run.yaml").write_text(json.dumps(cfg))
    snakemake(work, "results/gis/load.json", "--configfile", "run.yaml")
    n = 4 * lat.size * lon.size
    kansas = int(np.flatnonzero(lat == 40)[0]) * lon.size + int(np.flatnonzero(lon == 260)[0])

    def check():
        assert postgis_conn.execute(
            "SELECT count(*), bool_and(ST_IsValid(geom)), "
            "count(*) FILTER (WHERE ST_NumGeometries(geom) = 2) FROM cells WHERE run = 'gis'"
        ).fetchone() == (n, True, 4 * lat.size)
        assert containing(postgis_conn, -100.0, 40.0) == [kansas]
        assert containing(postgis_conn, 179.9, 0.0) == containing(postgis_conn, -179.9, 0.0)

    check()
    # The run's cells.sql, as a user loads it with psql, gives the same table.
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", pg_server["host"],
                    "-U", "postgres", "-d", db, "-f", "cells.sql"],
                   cwd=work / "results/gis", check=True, capture_output=True, text=True)
    check()
