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
from collections.abc import Mapping, Sequence
from pathlib import Path

from ncreel.io import atomic_path

#: Movies larger than this are not embedded (the page would not open); the page says where
#: the file is instead.
EMBED_LIMIT_MB = 200


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
                  inputs: Sequence[str], movie: str | os.PathLike,
                  poster: str | os.PathLike, copy_file: str | os.PathLike,
                  stats_json: str | os.PathLike, fps: float, jobs: Sequence[Mapping],
                  shards: int, embed_limit_mb: float = EMBED_LIMIT_MB) -> dict:
    """Write the summary page (HTML, self-contained).

    Parameters
    ----------
    path : path
        Output HTML file (``results/<run>/report/summary.html``).
    run, variable : str
        The run's name and the variable shown.
    inputs : sequence of str
        The input files, in time order.
    movie, poster : path
        ``movie.mp4`` and the preview PNG shown before it plays.
    copy_file : path
        The run's COPY file.
    stats_json : path
        ``stats.json`` of the statistics job (``n_time``, ``ny``, ``nx``, ``n_finite``,
        ``vmin``, ``vmax``).
    fps : float
        Movie frames per second.
    jobs : sequence of mapping
        Rows of :func:`ncreel.report.resourcepage.collect_jobs`.
    shards : int
        Number of shard jobs in the plan.
    embed_limit_mb : float
        Largest movie (MB) embedded in the page.

    Returns
    -------
    dict
        The numbers shown (also stored in the page as JSON, element ``ncreel-summary``).
    """
    stats = json.loads(Path(stats_json).read_text())
    numbers = run_numbers(jobs)
    movie_bytes = Path(movie).stat().st_size
    n_time = int(stats["n_time"])
    shown = {
        "run": run, "variable": variable, "frames": n_time,
        "movie_seconds": n_time / float(fps), "movie_bytes": movie_bytes,
        "cells": int(stats["ny"]) * int(stats["nx"]), "grid": [stats["ny"], stats["nx"]],
        "values": int(stats["n_finite"]), "copy_bytes": Path(copy_file).stat().st_size,
        "colour_range": [stats["vmin"], stats["vmax"]], "shards": int(shards), **numbers,
    }
    out = io.StringIO()
    esc = html.escape
    out.write("<!DOCTYPE html><html><head><meta charset='utf-8'>"
              f"<title>run {esc(run)}</title><style>body{{font-family:sans-serif;"
              "font-size:14px;max-width:1100px}table{border-collapse:collapse}"
              "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
              "td.n{text-align:right}video{max-width:100%;background:#000}</style>"
              "</head><body>")
    out.write(f"<h2>run {esc(run)}: {esc(variable)}</h2>")
    if movie_bytes <= embed_limit_mb * 1e6:
        mp4 = base64.b64encode(Path(movie).read_bytes()).decode()
        png = base64.b64encode(Path(poster).read_bytes()).decode()
        out.write(f"<video id='movie' controls loop preload='auto' "
                  f"poster='data:image/png;base64,{png}'>"
                  f"<source type='video/mp4' src='data:video/mp4;base64,{mp4}'></video>")
    else:
        out.write(f"<p>The movie ({_size(movie_bytes)}) is too large to embed here: open "
                  f"<code>{esc(os.fspath(movie))}</code>.</p>")
    ratio = (None if not numbers["shard_peak_mb"] or not numbers["shard_declared_mb"]
             else numbers["shard_declared_mb"] / numbers["shard_peak_mb"])
    rows = [
        ("frames", f"{n_time:,} ({_duration(shown['movie_seconds'])} at {fps:g} frames/s, "
                   f"{_size(movie_bytes)})"),
        ("grid", f"{stats['ny']} × {stats['nx']} = {shown['cells']:,} cells"),
        ("values written", f"{shown['values']:,} (cell and time steps that are not "
                           "missing)"),
        ("COPY file", f"{_size(shown['copy_bytes'])}"),
        ("colour range", f"{stats['vmin']:.6g} … {stats['vmax']:.6g}"),
        ("jobs", f"{numbers['jobs']} ({shards} shard{'s' if shards != 1 else ''}); "
                 f"{numbers['retried']} needed more than one attempt"),
        ("wall time", "—" if numbers["wall_s"] is None else _duration(numbers["wall_s"])),
        ("core-hours", f"{numbers['core_hours']:.3f}"),
        ("render job memory", "—" if ratio is None else
         f"peak {numbers['shard_peak_mb']:.0f} MB of {numbers['shard_declared_mb']:.0f} MB "
         f"declared ({ratio:.1f}× headroom)"),
        ("input", "<br>".join(esc(p) for p in inputs[:5])
         + (f"<br>… and {len(inputs) - 5} more" if len(inputs) > 5 else "")),
    ]
    out.write("<table>")
    for key, value in rows:
        value = value if key == "input" else esc(value)
        out.write(f"<tr><th>{esc(key)}</th><td>{value}</td></tr>")
    out.write("</table>")
    out.write("<p>More in this report: <b>Resources</b> (every job's declared against "
              "measured memory and time), <b>Frames</b> (the contact sheet and the run plan), "
              "and the movie file itself under <b>Movie</b>.</p>")
    out.write("<script type='application/json' id='ncreel-summary'>"
              f"{esc(json.dumps(shown))}</script></body></html>\n")
    with atomic_path(path) as tmp:
        tmp.write_text(out.getvalue())
    return shown
