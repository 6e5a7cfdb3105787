"""The report's summary page stays small enough to open inside Snakemake's single-file report.

Snakemake shows an HTML result in a frame whose source is a base64 ``data:`` URL of the page,
and Chromium loads no such URL over 2 MiB: a page embedding a 1.8 MB movie came out blank.
These tests make real movies with ffmpeg and check the page's size and the movie it holds.
"""

import base64
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from conftest import missing_program_reason
from ncreel.render.movie import encode_movie
from ncreel.report.summary import PAGE_LIMIT_BYTES, write_summary
from PIL import Image

pytestmark = pytest.mark.skipif(shutil.which("ffprobe") is None,
                                reason=missing_program_reason("ffprobe"))


def _movie(tmp_path, n, width, height, seed=0):
    """Encode `n` frames of noise (which compresses badly: a large movie) at 24 frames/s."""
    rng = np.random.default_rng(seed)
    frames = []
    for i in range(n):
        path = tmp_path / f"f{i:03d}.png"
        Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path)
        frames.append(path)
    movie = tmp_path / "movie.mp4"
    encode_movie(frames, movie, fps=24, crf=18, preset="ultrafast")
    return movie, frames[n // 2]


def _page(tmp_path, movie, poster, n, **kw):
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({"n_time": n, "ny": 4, "nx": 5, "n_finite": 20 * n,
                                 "vmin": 0.0, "vmax": 1.0}))
    copy = tmp_path / "cells.copy"
    copy.write_text("")
    page = tmp_path / "summary.html"
    shown = write_summary(page, run="r", variable="tas", inputs=["in.nc"], movie=movie,
                          poster=poster, copy_file=copy, stats_json=stats, fps=24,
                          jobs=[], shards=1, **kw)
    return page, shown


def _embedded_movie(page, tmp_path):
    uri = re.search(r"src='data:video/mp4;base64,([^']+)'", page.read_text()).group(1)
    out = tmp_path / "embedded.mp4"
    out.write_bytes(base64.b64decode(uri))
    probe = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0",
                            "-show_entries", "stream=codec_name,width,pix_fmt:format=duration",
                            "-of", "json", str(out)], capture_output=True, text=True,
                           check=True)
    info = json.loads(probe.stdout)
    return out, info["streams"][0], float(info["format"]["duration"])


def test_small_movie_is_embedded_as_it_is(tmp_path):
    movie, poster = _movie(tmp_path, 12, 64, 48)
    page, shown = _page(tmp_path, movie, poster, 12)
    assert shown["movie_in_page"] == "movie"
    out, _, _ = _embedded_movie(page, tmp_path)
    assert out.read_bytes() == movie.read_bytes()
    # What the run ran with: rebuilding its environment starts from these.
    from importlib.metadata import version

    import ncreel
    assert f"ncreel {ncreel.__version__}" in page.read_text()
    assert f"Snakemake {version('snakemake')}" in page.read_text()
    assert shown["software"]["packages"]["xarray"] == version("xarray")


def test_large_movie_becomes_a_copy_that_fits_the_report(tmp_path):
    # 48 frames of 640 x 360 noise: several MB, like a real run's movie over the limit.
    movie, poster = _movie(tmp_path, 48, 640, 360)
    assert movie.stat().st_size > 2 * PAGE_LIMIT_BYTES
    page, shown = _page(tmp_path, movie, poster, 48)
    size = page.stat().st_size
    # What Chromium is given: the page as base64 in a data: URL of at most 2 MiB.
    assert len(base64.b64encode(page.read_bytes())) + 100 <= 2 * 1024 * 1024
    assert size <= PAGE_LIMIT_BYTES
    assert shown["movie_in_page"] == "copy"
    _, stream, duration = _embedded_movie(page, tmp_path)
    assert stream["codec_name"] == "h264" and stream["pix_fmt"] == "yuv420p"
    assert stream["width"] == 480
    assert duration == pytest.approx(2.0, abs=0.1)
    assert "a smaller copy" in page.read_text() and str(movie) in page.read_text()


def test_long_movie_copy_holds_its_beginning(tmp_path):
    # A page limit this small leaves room for only the first seconds at a watchable rate.
    movie, poster = _movie(tmp_path, 480, 64, 48)  # 20 s
    page, shown = _page(tmp_path, movie, poster, 480, page_limit_bytes=250_000)
    assert shown["movie_in_page"].startswith("first ")
    assert page.stat().st_size <= 250_000
    _, _, duration = _embedded_movie(page, tmp_path)
    assert 3.0 < duration < 19.0
    assert "of 20 s" in page.read_text()


def test_no_room_links_the_movie(tmp_path):
    movie, poster = _movie(tmp_path, 24, 320, 180)
    page, shown = _page(tmp_path, movie, poster, 24, page_limit_bytes=60_000)
    assert shown["movie_in_page"] == "link"
    assert "<video" not in page.read_text() and str(movie) in page.read_text()
