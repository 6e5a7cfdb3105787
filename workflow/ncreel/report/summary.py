"""The report's summary page: the movie, playable in the page, and the run's key numbers.

Snakemake's HTML report offers an MP4 only as a download. This page embeds the movie in a
``<video>`` element (with the middle frame as its poster), so it plays where the report is
opened, and lists what a scientist checks first: frames, cells, rows written, the COPY
file's size, the run's wall time and core-hours, and the render jobs' peak memory against
what they declared. Everything is inside the one HTML file (data URIs), as Snakemake's
self-contained report requires.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ncreel.core.io import atomic_path
from ncreel.run.software import software

#: Largest page (bytes) that opens inside Snakemake's single-file report: the report shows
#: an HTML result in a frame whose source is a base64 ``data:`` URL of the page, and
#: Chromium loads no ``data:`` URL longer than 2 MiB. 4 KiB are left for the URL's prefix.
PAGE_LIMIT_BYTES = 2 * 1024 * 1024 * 3 // 4 - 4096
#: Below this many bytes for the movie a copy is not worth watching; the page links instead.
SMALLEST_COPY_BYTES = 100_000


def _size(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min" if h else (f"{m} min {s:02d} s" if m else f"{s} s")


def run_numbers(jobs: Sequence[Mapping]) -> dict:
    """Wall time, core-hours and peak memory of a run from its jobs' records.

    Parameters
    ----------
    jobs : sequence of mapping
        Rows of :func:`ncreel.report.resourcepage.collect_jobs` (``rule``, ``threads``,
        ``wall_s``, ``max_rss_mb``, ``mem_mb``, ``attempts``, ``attempt_records``).

    Returns
    -------
    dict
        ``wall_s`` (first recorded start to last recorded end, seconds; None without
        records), ``core_hours`` (sum of threads x wall time of each job's final attempt),
        ``jobs``, ``retried`` (jobs with more than one attempt), ``shard_peak_mb`` and
        ``shard_declared_mb`` (largest measured ``max_rss`` and declared ``mem_mb`` of the
        ``process_shard`` jobs; None without them).
    """
    starts = [a["start"] for j in jobs for a in j.get("attempt_records", ()) if a.get("start")]
    ends = [a["end"] for j in jobs for a in j.get("attempt_records", ()) if a.get("end")]
    shards = [j for j in jobs if j["rule"] == "process_shard"]
    peaks = [j["max_rss_mb"] for j in shards if j.get("max_rss_mb") is not None]
    declared = [j["mem_mb"] for j in shards if j.get("mem_mb") is not None]
    return {
        "wall_s": (max(ends) - min(starts)) if starts and ends else None,
        "core_hours": sum((j.get("threads") or 1) * (j.get("wall_s") or 0.0)
                          for j in jobs) / 3600.0,
        "jobs": len(jobs),
        "retried": sum(1 for j in jobs if (j.get("attempts") or 0) > 1),
        "shard_peak_mb": max(peaks) if peaks else None,
        "shard_declared_mb": max(declared) if declared else None,
    }


def write_summary(path: str | os.PathLike, *, run: str, variable: str,
                  inputs: Sequence[str], movie: str | os.PathLike | None,
                  poster: str | os.PathLike | None, copy_file: str | os.PathLike | None,
                  stats_json: str | os.PathLike, fps: float, jobs: Sequence[Mapping],
                  shards: int, page_limit_bytes: int = PAGE_LIMIT_BYTES,
                  ffmpeg: str | None = None) -> dict:
    """Write the summary page (HTML, self-contained).

    Parameters
    ----------
    path : path
        Output HTML file (``results/<run>/report/summary.html``).
    run, variable : str
        The run's name and the variable shown.
    inputs : sequence of str
        The input files, in time order.
    movie, poster : path or None
        ``movie.mp4`` and the preview PNG shown before it plays; None for a run without
        a movie (config ``outputs``).
    copy_file : path or None
        The run's COPY file; None for a run without a table.
    stats_json : path
        ``stats.json`` of the statistics job (``n_time``, ``ny``, ``nx``, ``n_finite``,
        ``vmin``, ``vmax``).
    fps : float
        Movie frames per second.
    jobs : sequence of mapping
        Rows of :func:`ncreel.report.resourcepage.collect_jobs`.
    shards : int
        Number of shard jobs in the plan.
    page_limit_bytes : int
        Largest page; a movie that would make the page larger is embedded as a smaller
        copy (:func:`ncreel.render.movie.preview_movie`) that fits, or only linked when
        even that cannot fit.
    ffmpeg : str, optional
        ffmpeg executable for the copy.

    Returns
    -------
    dict
        The numbers shown (also stored in the page as JSON, element ``ncreel-summary``).
    """
    stats = json.loads(Path(stats_json).read_text())
    numbers = run_numbers(jobs)
    movie_bytes = Path(movie).stat().st_size if movie is not None else None
    n_time = int(stats["n_time"])
    made = [w for w, f in (("movie", movie), ("table", copy_file)) if f is not None]
    shown = {
        "run": run, "variable": variable, "outputs": made, "frames": n_time,
        "movie_seconds": n_time / float(fps) if movie is not None else None,
        "movie_bytes": movie_bytes,
        "cells": int(stats["ny"]) * int(stats["nx"]), "grid": [stats["ny"], stats["nx"]],
        "values": int(stats["n_finite"]),
        "copy_bytes": Path(copy_file).stat().st_size if copy_file is not None else None,
        "colour_range": [stats["vmin"], stats["vmax"]], "shards": int(shards), **numbers,
        "software": software(),
    }
    esc = html.escape
    head = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>run {esc(run)}</title><style>body{{font-family:sans-serif;"
            "font-size:14px;max-width:1100px}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
            "td.n{text-align:right}video{max-width:100%;background:#000}</style>"
            f"</head><body><h2>run {esc(run)}: {esc(variable)}</h2>")
    ratio = (None if not numbers["shard_peak_mb"] or not numbers["shard_declared_mb"]
             else numbers["shard_declared_mb"] / numbers["shard_peak_mb"])
    rows = [
        ("outputs", " and ".join(made) + ("" if len(made) == 2 else
                                          f" (config outputs: [{', '.join(made)}])")),
        ("frames", f"{n_time:,} ({_duration(shown['movie_seconds'])} at {fps:g} frames/s, "
                   f"{_size(movie_bytes)})") if movie is not None else
        ("time steps", f"{n_time:,} (no movie)"),
        ("grid", f"{stats['ny']} × {stats['nx']} = {shown['cells']:,} cells"),
        ("values written", f"{shown['values']:,} (cell and time steps that are not "
                           "missing)") if copy_file is not None else
        ("values", f"{shown['values']:,} shown (no table written)"),
        ("COPY file", f"{_size(shown['copy_bytes'])}" if copy_file is not None else "none"),
        ("colour range", f"{stats['vmin']:.6g} … {stats['vmax']:.6g}"
         if stats["vmin"] is not None else "none (no movie)"),
        ("jobs", f"{numbers['jobs']} ({shards} shard{'s' if shards != 1 else ''}); "
                 f"{numbers['retried']} needed more than one attempt"),
        ("wall time", "—" if numbers["wall_s"] is None else _duration(numbers["wall_s"])),
        ("core-hours", f"{numbers['core_hours']:.3f}"),
        ("render job memory" if movie is not None else "shard job memory",
         "—" if ratio is None else
         f"peak {numbers['shard_peak_mb']:.0f} MB of {numbers['shard_declared_mb']:.0f} MB "
         f"declared ({ratio:.1f}× headroom)"),
        ("software", _software_text(shown["software"])),
        ("input", "<br>".join(esc(p) for p in inputs[:5])
         + (f"<br>… and {len(inputs) - 5} more" if len(inputs) > 5 else "")),
    ]
    out = io.StringIO()
    out.write("<table>")
    for key, value in rows:
        value = value if key == "input" else esc(value)
        out.write(f"<tr><th>{esc(key)}</th><td>{value}</td></tr>")
    out.write("</table>")
    out.write("<p>More in this report: <b>Resources</b> (every job's declared against "
              "measured memory and time), <b>Frames</b> ("
              + ("the contact sheet and the run plan), and the movie file itself under "
                 "<b>Movie</b>" if movie is not None else "the run plan)") + ".</p>")
    rest = out.getvalue()
    if movie is None:
        video, shown["movie_in_page"] = ("<p>This run makes no movie (config outputs: "
                                         "table).</p>", "none")
    else:
        # The movie part is decided last: it gets what the page's limit leaves.
        poster_uri = ("data:image/png;base64,"
                      + base64.b64encode(Path(poster).read_bytes()).decode())
        json_room = 400  # the numbers below grow by the movie_in_page entry
        room = (page_limit_bytes - len(head) - len(rest) - len(esc(json.dumps(shown)))
                - json_room)
        video, shown["movie_in_page"] = _movie_part(movie, room - len(poster_uri),
                                                    poster_uri,
                                                    float(shown["movie_seconds"]), ffmpeg)
    page = (head + video + rest + "<script type='application/json' id='ncreel-summary'>"
            f"{esc(json.dumps(shown))}</script></body></html>\n")
    with atomic_path(path) as tmp:
        tmp.write_text(page)
    return shown


def _software_text(sw: Mapping) -> str:
    # ncreel 0.1.0, commit 3f2a9c1d0b7e (with local changes), Python 3.11.7, Snakemake 9.27.1
    text = f"ncreel {sw['ncreel']}"
    if sw["commit"]:
        text += f", commit {sw['commit'][:12]}" + (" (with local changes)"
                                                     if sw["local_changes"] else "")
    snakemake = sw["packages"].get("snakemake")
    text += f", Python {sw['python']}" + (f", Snakemake {snakemake}" if snakemake else "")
    return text + f"; {len(sw['packages'])} packages (listed in this page's data)"


def _video(mp4: bytes, poster_uri: str, note: str = "") -> str:
    uri = "data:video/mp4;base64," + base64.b64encode(mp4).decode()
    return (f"<video id='movie' controls loop preload='auto' poster='{poster_uri}'>"
            f"<source type='video/mp4' src='{uri}'></video>{note}")


def _movie_part(movie, room: int, poster_uri: str, seconds: float,
                ffmpeg: str | None) -> tuple[str, str]:
    """Return the page's movie HTML within `room` characters, and what it holds.

    ``"movie"`` (the file itself), ``"copy"`` (a smaller copy of all of it),
    ``"first N s"`` (a copy of its beginning) or ``"link"``.
    """
    esc = html.escape
    size = Path(movie).stat().st_size
    room_bytes = (room - 600) * 3 // 4  # base64 is 4 characters per 3 bytes
    if size <= room_bytes:
        return _video(Path(movie).read_bytes(), poster_uri), "movie"
    where = (f"the whole movie ({_size(size)}) is <code>{esc(os.fspath(movie))}</code> and "
             "under <b>Movie</b> in this report")
    if room_bytes < SMALLEST_COPY_BYTES:
        return (f"<p>The movie is too large to play inside this report: {where}.</p>",
                "link")
    from ncreel.render.movie import preview_movie

    with tempfile.TemporaryDirectory() as tdir:
        copy = os.path.join(tdir, "preview.mp4")
        held = preview_movie(movie, copy, duration_s=seconds, max_bytes=room_bytes,
                             ffmpeg=ffmpeg)
        mp4 = Path(copy).read_bytes()
    whole = held >= seconds - 1e-6
    what = ("a smaller copy" if whole else
            f"a smaller copy of its first {_duration(held)} of {_duration(seconds)}")
    note = (f"<p>This page plays {what}, so that it opens inside the single-file report; "
            f"{where}.</p>")
    return _video(mp4, poster_uri, note), "copy" if whole else f"first {held:.0f} s"
