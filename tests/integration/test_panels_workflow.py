"""The whole workflow with a panel layout: two files and their difference in one movie."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from PIL import Image
from test_panels import _write
from workflow_run import make_workdir, probe, snakemake

pytestmark = pytest.mark.integration


def _config(tmp_path, main, other, **extra):
    return {"width": 320, "height": 96, "dpi": 30, "preset": "ultrafast",
            "calibration_frames": 2, "frames_per_shard": 3, "run": "pan", "input": main,
            "variable": "tas", "panel_columns": 3,
            "panels": [{"name": "a"}, {"name": "b", "input": other},
                       {"difference_of": ["b", "a"]}], **extra}


def test_panels_run_movie_limits_and_table(tmp_path):
    main = _write(tmp_path / "main.nc", start=2, n=5)
    other = _write(tmp_path / "other.nc", start=0, n=8, offset=10.0)  # more steps, +10
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    (work / "run.json").write_text(json.dumps(_config(tmp_path, main, other)))
    snakemake(work, "--configfile", "run.json")
    results = work / "results" / "pan"
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 5
    stats = json.loads((results / "stats.json").read_text())
    # Matched by date: b - a is 10 at every step (b's step t + 2 is a's step t).
    assert [(p["min"], p["max"]) for p in stats["panels"]] == [(2.0, 6.0), (12.0, 16.0),
                                                               (10.0, 10.0)]
    assert stats["panels"][2]["vmin"] == -stats["panels"][2]["vmax"]
    assert {i["path"] for i in stats["inputs"]} >= {main, other}
    # The table stays the top-level input: 5 steps x 20 cells.
    assert len((results / "cells.copy").read_text().splitlines()) == 5 * 20
    frame = np.asarray(Image.open(results / "preview.png"))
    assert frame.shape[:2] == (96, 320)
    calibration = json.loads((results / "calibration.json").read_text())
    assert calibration["worker_peak_mb"] > 0


def test_a_missing_step_stops_a_dry_run_with_one_line(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=5)
    other = _write(tmp_path / "other.nc", start=1, n=3)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    (work / "run.json").write_text(json.dumps(_config(tmp_path, main, other)))
    proc = snakemake(work, "--configfile", "run.json", "-n", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert len(lines) == 1 and "panels[1]" in lines[0] and "other.nc" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (work / "results" / "pan" / "stats.json").exists()


def _statistics_mem_mb(stdout: str) -> int:
    # `snakemake -n` prints each job's rule and then its resources.
    block = stdout.split("rule statistics:", 1)[1]
    return int(re.search(r"\bmem_mb=(\d+)", block).group(1))


def test_statistics_memory_covers_the_largest_panel_grid(tmp_path):
    main = _write(tmp_path / "main.nc", start=0, n=2)
    big = _write(tmp_path / "big.nc", start=0, n=2, ny=1000, nx=1000)
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    mem = {}
    for name, panels in (("one", [{}]), ("big", [{}, {"input": big}])):
        cfg = {"run": name, "input": main, "variable": "tas", "panels": panels}
        (work / f"{name}.json").write_text(json.dumps(cfg))
        proc = snakemake(work, "--configfile", f"{name}.json", "-n")
        mem[name] = _statistics_mem_mb(proc.stdout)
    # The statistics job holds per-cell sums of the largest grid: the big panel's.
    from ncreel.run.resources import statistics_mem_mb

    assert mem["one"] == statistics_mem_mb(ny=4, nx=5)
    assert mem["big"] == statistics_mem_mb(ny=1000, nx=1000) > mem["one"], mem


def test_panels_with_contours_vectors_and_decorate(tmp_path):
    from test_overlays import write_weather

    main = str(write_weather(tmp_path / "main.nc", n_time=4))
    other = str(write_weather(tmp_path / "other.nc", n_time=4))
    (tmp_path / "work").mkdir()
    work = make_workdir(tmp_path / "work")
    (work / "marks.py").write_text(
        "def station(fig, ax, info):\n"
        "    x, y = info.to_map([100.0], [0.0])\n"
        "    ax.plot(x, y, 's', color='red', markersize=10)\n")
    cfg = {**_config(tmp_path, main, other), "width": 320, "height": 120, "dpi": 30,
           "frames_per_shard": 2, "panel_columns": 2,
           "contours": {"variable": "psl", "levels": 5}, "decorate": "marks:station",
           "panels": [{"name": "tas"},
                      {"name": "wind", "input": other, "variable": "psl",
                       "vectors": {"u": "uas", "v": "vas", "density": 8}}]}
    (work / "run.json").write_text(json.dumps(cfg))
    snakemake(work, "--configfile", "run.json")
    results = work / "results" / "pan"
    assert int(probe(results / "movie.mp4")["nb_read_frames"]) == 4
    stats = json.loads((results / "stats.json").read_text())
    # The top-level contours on the top-level input's panel; the other file's panel has
    # its own vectors only.
    assert set(stats["panels"][0]["overlays"]) == {"contour_levels"}
    assert len(stats["panels"][0]["overlays"]["contour_levels"]) >= 3
    assert set(stats["panels"][1]["overlays"]) == {"vector_speed"}
    assert "overlays" not in stats  # per panel only
    frame = np.asarray(Image.open(results / "preview.png"))
    assert frame.shape[:2] == (120, 320)
    red = (frame[..., 0] > 200) & (frame[..., 1] < 80) & (frame[..., 2] < 80)
    # One station marker per panel (left and right half).
    assert red[:, :160].sum() > 4 and red[:, 160:].sum() > 4
    log = "".join(p.read_text() for p in (work / "logs" / "pan").rglob("*.log"))
    assert "decorate: what it drew changed" not in log
