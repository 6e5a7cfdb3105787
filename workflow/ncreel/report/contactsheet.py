"""The report's contact sheet and run plan: what the frames look like, and how it was set up.

The contact sheet is a grid of the PNG frames the shard jobs kept (first, middle and last
of each shard, every ``png_every``-th, the run's middle frame), each titled with its time
index and time label. The plan page states the colour limits and how they were chosen, the
``calibrate_render`` numbers and the shard plan with each shard's declared ``mem_mb``.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ncreel.config.settings import Calibration
from ncreel.core.io import atomic_path

#: At most this many frames on one sheet; more are thinned evenly (first and last kept).
MAX_FRAMES = 48
#: Resolution of the contact sheet figure (its own, not the frames' config dpi).
SHEET_DPI = 100

_FRAME = re.compile(r"frame_(\d+)\.png$")


def sampled_frames(frame_dirs: Sequence[str | os.PathLike]) -> list[tuple[int, Path]]:
    """``(time index, path)`` of every ``frame_<index>.png`` in `frame_dirs`, in time order."""
    found = {}
    for d in frame_dirs:
        for p in Path(d).glob("frame_*.png"):
            m = _FRAME.search(p.name)
            if m:
                found[int(m.group(1))] = p
    return sorted(found.items())


def frame_labels(frames: Sequence[tuple[int, str | os.PathLike]]) -> dict[int, str] | None:
    """Return the time label each PNG frame carries, ``{time index: label}``.

    A shard writes its frame's time label as the PNG's ``Description`` text
    (:func:`ncreel.render.frame.write_png`), so the sheet needs no second read of the input.

    Returns
    -------
    dict or None
        None when a frame carries no label (written by an earlier version): the caller
        then takes the labels from the input (:func:`ncreel.render.segment.time_labels`).
    """
    from PIL import Image

    labels = {}
    for t, p in frames:
        with Image.open(p) as im:
            label = im.text.get("Description")
        if label is None:
            return None
        labels[t] = label
    return labels


def thin(items: Sequence, limit: int = MAX_FRAMES) -> list:
    """At most `limit` of `items`, evenly spaced, always keeping the first and the last."""
    if len(items) <= limit:
        return list(items)
    idx = sorted({round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)})
    return [items[i] for i in idx]


def contact_sheet(frames: Sequence[tuple[int, str | os.PathLike]], labels: Mapping[int, str],
                  path: str | os.PathLike, *, columns: int | None = None,
                  title: str = "") -> list[int]:
    """Draw the frames in a grid, each titled ``t=<index>  <label>``, into one PNG.

    Titles are drawn literally (no mathtext) and shrunk to their cell's width.

    Parameters
    ----------
    frames : sequence of (int, path)
        Time index and PNG file, in time order (see :func:`sampled_frames`).
    labels : mapping of int to str
        Time label per global time index (:func:`frame_labels`); a frame without one is
        titled with its index alone.
    path : path
        Output PNG.
    columns : int, optional
        Grid columns; default about square, at most 6.
    title : str
        Figure title.

    Returns
    -------
    list of int
        The time indices drawn (frames beyond :data:`MAX_FRAMES` are thinned evenly).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    frames = thin(list(frames))
    n = max(len(frames), 1)
    ncol = columns or min(6, math.ceil(math.sqrt(n)))
    nrow = math.ceil(n / ncol)
    first = mpimg.imread(frames[0][1]) if frames else None
    aspect = first.shape[0] / first.shape[1] if first is not None else 0.6
    # Each frame at up to 480 pixels wide (its own width if smaller), so the frame's title,
    # time label and colour-bar ticks stay readable on the sheet.
    width_px = first.shape[1] if first is not None else 480
    cell_w = max(2.6, min(480, width_px) / SHEET_DPI)
    fig, axes = plt.subplots(nrow, ncol, figsize=(cell_w * ncol, (cell_w * aspect + 0.35) * nrow
                                                  + 0.5), squeeze=False, layout="constrained",
                             dpi=SHEET_DPI)
    for ax in axes.flat:
        ax.axis("off")
    renderer = fig.canvas.get_renderer()
    room = 0.95 * cell_w * SHEET_DPI  # pixels of one cell's width
    for ax, (t, p) in zip(axes.flat, frames, strict=False):
        ax.imshow(mpimg.imread(p))
        text = ax.set_title(f"t={t}  {labels.get(t, '')}", fontsize=8, parse_math=False)
        # A long label (an undecodable axis's 'TIME = 4748.91 hour since 0000-01-01') is
        # shrunk to its cell rather than run into the next one.
        width = text.get_window_extent(renderer).width
        if width > room:
            text.set_fontsize(8 * room / width)
    if title:
        fig.suptitle(title)
    with atomic_path(path) as tmp:  # a killed job leaves no half-written sheet
        fig.savefig(tmp, dpi=SHEET_DPI, format="png")
    plt.close(fig)
    return [t for t, _ in frames]


def _table(rows: Sequence[Sequence], header: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if v is None else str(v))}</td>"
                                    for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def plan_page(path: str | os.PathLike, *, stats: Mapping, configured: Mapping,
              calibration: Calibration, shards: Sequence[Mapping], title: str = "") -> None:
    """Write the run-plan page (HTML): colour limits, calibration, shard plan.

    Parameters
    ----------
    path : path
        Output HTML.
    stats : mapping
        ``stats.json`` of the statistics rule (``vmin``, ``vmax``, ``min``, ``max``,
        ``percentiles``); ``vmin`` None for a run without a movie (no colour limits).
    configured : mapping
        The configured ``vmin``/``vmax`` (None when not set).
    calibration : Calibration
        ``calibration.json`` of the calibrate_render checkpoint.
    shards : sequence of mapping
        ``shard``, ``start``, ``stop``, ``frames``, ``mem_mb`` and ``runtime`` (declared by
        the shard job's newest attempt; None if it has not run) and ``attempts``.
    """
    lo, hi = stats.get("percentiles", [2.0, 98.0])
    how = []
    for key, q in (("vmin", lo), ("vmax", hi)) if stats.get("vmin") is not None else ():
        if configured.get(key) is not None:
            how.append([key, stats[key], f"configured ({key}: {configured[key]})"])
        else:
            how.append([key, stats[key], f"{q:g} % percentile of all finite values of the "
                        "series (statistics rule, streamed histogram)"])
    if stats.get("widened"):
        how.append(["vmin..vmax", f"{stats['vmin']}..{stats['vmax']}", stats["widened"]])
    how.append(["data min / max", f"{stats.get('min')} / {stats.get('max')}", ""])
    cal = [[k, v] for k, v in calibration.to_params().items()]
    total = sum(s["frames"] for s in shards)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><style>body{font-family:sans-serif;"
        "font-size:13px}table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px "
        "solid #ccc;padding:2px 6px;text-align:left}</style></head><body>",
        f"<h2>{html.escape(title or 'run plan')}</h2>",
        "<h3>Colour limits</h3>", _table(how, ["limit", "value", "how chosen"])
        if stats.get("vmin") is not None else
        "<p>None: the run makes no movie (config outputs: table).</p>",
        "<h3>Calibration (calibrate_render)</h3>", _table(cal, ["key", "value"]),
        f"<h3>Shard plan: {len(shards)} shard(s), {total} frames, "
        f"{calibration.frames_per_shard} frames per shard</h3>",
        _table([[s["shard"], s["start"], s["stop"], s["frames"], s.get("mem_mb"),
                 s.get("runtime"), s.get("attempts")] for s in shards],
               ["shard", "first step", "stop (exclusive)", "frames",
                "declared mem_mb", "declared runtime [min]", "attempts"]),
        "</body></html>\n",
    ]
    with atomic_path(path) as tmp:
        tmp.write_text("".join(parts))
