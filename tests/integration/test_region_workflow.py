"""The whole workflow with a region across the antimeridian, overlays and the table setting."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image
from test_overlays import LAT, LON, write_weather
from workflow_run import make_workdir, probe, snakemake

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("table", ["region", "global"])
def test_region_run_movie_and_table(tmp_path, table):
    path = write_weather(tmp_path / "weather.nc", n_time=3)  # 0...360, 5 degree grid
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    cfg = {"width": 160, "height": 96, "dpi": 30, "preset": "ultrafast",
           "calibration_frames": 2, "frames_per_shard": 8, "run": "pacific",
           "input": str(path), "variable": "tas",
           "region": {"lon": [160, -160], "lat": [-10, 10], "table": table},
           "contours": {"variable": "psl", "levels": 4},
           "vectors": {"u": "uas", "v": "vas", "density": 4}}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    results = work / "results" / "pacific"
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 3
    stats = json.loads((results / "stats.json").read_text())
    # The region's 4 x 8 cells (lat -7.5..7.5, lon 162.5..197.5) set the colour limits.
    assert (stats["ny"], stats["nx"]) == (4, 8)
    assert len(stats["overlays"]["contour_levels"]) >= 2
    assert stats["overlays"]["vector_speed"] > 0
    rows = (results / "cells.copy").read_text().splitlines()
    n_cells = 4 * 8 if table == "region" else LAT.size * LON.size
    assert len(rows) == 3 * n_cells
    assert np.load(results / "cell_mean.npy").shape == ((4, 8) if table == "region"
                                                        else (LAT.size, LON.size))
    frame = np.asarray(Image.open(results / "preview.png"))
    assert frame.shape[:2] == (96, 160)


def test_polygon_region_run_keeps_exactly_the_intersecting_cells(tmp_path):
    import shapely

    path = write_weather(tmp_path / "weather.nc", n_time=2)  # 0...360, 5 degree grid
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    ring = [[-101.0, 31.0], [-84.0, 33.0], [-96.0, 47.0], [-101.0, 31.0]]
    (work / "field.geojson").write_text(json.dumps({"type": "Feature", "properties": {},
                                                    "geometry": {"type": "Polygon",
                                                                 "coordinates": [ring]}}))
    cfg = {"width": 160, "height": 96, "dpi": 30, "preset": "ultrafast",
           "calibration_frames": 2, "frames_per_shard": 8, "run": "field",
           "input": str(path), "variable": "tas", "region": {"file": "field.geojson"}}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    results = work / "results" / "field"
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 2
    # The cells (5 degree boxes round the file's centres) the triangle intersects.
    tri = shapely.Polygon(ring)
    want = {(float(x), float(y)) for y in LAT for x in LON - 360.0
            if shapely.intersects(shapely.box(x - 2.5, y - 2.5, x + 2.5, y + 2.5), tri)}
    assert 8 <= len(want) < 20
    sql = (results / "cells.sql").read_text()
    assert "covered_fraction" in sql and "edge_distance_m" in sql
    rows = [line.split("\t") for line in (results / "cells.copy").read_text().splitlines()]
    got = {(float(r[5]), float(r[4])) for r in rows}  # lon, lat
    assert got == want and len(rows) == 2 * len(want)
    fraction = {(float(r[5]), float(r[4])): float(r[9]) for r in rows}
    assert all(0 < f <= 1 for k, f in fraction.items() if k != (-87.5, 42.5))
    # That cell only touches the triangle (its edge runs through the cell's corner at
    # -90, 40): kept, as ST_Intersects keeps it, with nothing covered.
    assert fraction[(-87.5, 42.5)] == 0.0


def test_polygon_off_the_grid_stops_a_dry_run_with_one_line(tmp_path):
    from layouts import write_rectilinear

    path, _ = write_rectilinear(tmp_path / "g.nc", lat=[0.0, 10.0, 20.0, 30.0, 40.0])
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    (work / "north.geojson").write_text(json.dumps({"type": "Polygon", "coordinates": [
        [[0, 60], [10, 60], [10, 70], [0, 70], [0, 60]]]}))
    cfg = {"run": "x", "input": str(path), "variable": "tas",
           "region": {"file": "north.geojson"}}
    (work / "run.json").write_text(json.dumps(cfg))
    proc = snakemake(work, "-n", "--configfile", "run.json", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if "ncreel: error:" in ln]
    assert len(lines) == 1 and "north.geojson" in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (work / "results").exists()


def test_polygon_region_on_a_mesh_run_keeps_the_intersecting_faces(tmp_path):
    import shapely
    from meshes import voronoi_mesh, write_mpas
    from ncreel.cells.geometry import MeshGeometry
    from ncreel.input.source import open_series

    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi_mesh(200), nt=2, levels=2)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    ring = [[-40.0, -20.0], [50.0, -20.0], [50.0, 40.0], [-40.0, -20.0]]
    (work / "p.geojson").write_text(json.dumps({"type": "Polygon", "coordinates": [ring]}))
    cfg = {"width": 160, "height": 96, "dpi": 30, "preset": "ultrafast",
           "calibration_frames": 2, "frames_per_shard": 8, "run": "mesh",
           "input": str(path), "variable": "temperature", "select": {"nVertLevels": 1},
           "region": {"file": "p.geojson"}}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    results = work / "results" / "mesh"
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 2
    with open_series(str(path), "temperature", select={"nVertLevels": 1}) as s:
        text = MeshGeometry(s.mesh).polygons(np.arange(s.nx)).to_list()
    faces = shapely.from_wkt([t.split(";", 1)[1] for t in text])
    want = set(np.flatnonzero(shapely.intersects(faces, shapely.Polygon(ring))).tolist())
    rows = [line.split("\t") for line in (results / "cells.copy").read_text().splitlines()]
    assert {int(r[3]) for r in rows} == want and len(rows) == 2 * len(want)
    assert 5 <= len(want) < 100
