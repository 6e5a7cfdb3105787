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
