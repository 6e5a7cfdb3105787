"""Before any job, whether the run's outputs fit on the disk they go to.

Each output's size is predicted from the input and the settings (the COPY text from one
real step written by the configured cell model, geometry and compression; the movie
from the frame size and encoder quality), less what earlier runs of the same command
already wrote, and compared with the free space of the file system each goes to
(``os.statvfs``; a user quota, such as GLADE's, is not seen by it). A run that cannot fit
stops with one line naming both numbers and the ways to make it smaller.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ncreel.core.errors import DISK_WAYS_OUT, NcreelError

#: Rows of the sample step written to measure a row's COPY bytes (and compressed size).
SAMPLE_ROWS = 20_000
#: H.264 bytes of one frame of the movie at crf 18 (the default): this many per pixel plus
#: :data:`MOVIE_BYTES_PER_FRAME`; per six crf steps above 18 half (libx264's rate roughly
#: halves per 6). Measured on ncreel's maps at crf 18, medium preset: 0.0146 bytes per
#: pixel at 960 x 540 (the demo, 7.6 kB per frame; a 0.25 degree global field the same),
#: 0.075 at 160 x 96 (1.2 kB); the model gives 21.7 kB and 1.6 kB. Not a bound: a field
#: with noise at the scale of its cells takes more (0.15 bytes per pixel measured on
#: random values of a 100 x 100 grid at 1280 x 720); docs/running.md says so.
MOVIE_BYTES_PER_PIXEL_CRF18 = 0.04
MOVIE_BYTES_PER_FRAME = 1000
#: Bytes per pixel of one PNG frame kept under frames/ (zlib level 6, measured 0.3-0.6).
PNG_BYTES_PER_PIXEL = 0.8
#: Bytes per pixel of one GIF frame (256 colours, Bayer dither: LZW keeps little of a
#: dithered map; measured 0.21 on the demo at 480 pixels wide), an upper estimate.
GIF_BYTES_PER_PIXEL = 0.5
#: Frames per shard assumed before the calibration has planned the shards (a slow frame
#: of a second in a shard of :func:`ncreel.render.calibrate.calibrate_render`'s default 10
#: minutes): each shard keeps three PNG frames (its first, middle and last).
UNPLANNED_FRAMES_PER_SHARD = 600
#: The report's pages besides the contact sheet: the summary (its movie copy at most
#: :data:`ncreel.report.summary.PAGE_LIMIT_BYTES`), the plan and resources pages.
REPORT_PAGES_BYTES = 2.5e6
#: Above this fraction of the free space the run is started with a note.
NOTE_FRACTION = 0.5


@dataclass(frozen=True)
class Need:
    """Bytes one output of the run still needs on its file system.

    Attributes
    ----------
    what : str
        The output in words (``table: shard COPY files and the joined cells.copy``).
    path : str
        Where it is written (a directory of the run).
    total : float
        Predicted bytes of the finished output.
    present : float
        Bytes of it already written (by an earlier run of the same command).
    """

    what: str
    path: str
    total: float
    present: float

    @property
    def bytes(self) -> float:
        """Bytes still to be written."""
        return max(self.total - self.present, 0.0)


def _size(n: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def copy_bytes_per_step(series, cells, *, t: int | None = None,
                        sample_rows: int = SAMPLE_ROWS) -> tuple[int, float]:
    """Rows and COPY bytes of one step, written as the shard jobs write them.

    Parameters
    ----------
    series : ncreel.input.source.Series
        The table's series (its region's cells).
    cells : ncreel.config.settings.CellsSettings
        Cell model, geometry and compression. A model that needs the degradation
        pre-pass is measured as ``field`` (the rows' text is much the same).
    t : int, optional
        The step (default: the middle one).
    sample_rows : int
        Rows formatted (and compressed) to measure a row; the step's rows are counted.

    Returns
    -------
    rows : int
        Rows of the step (cells not missing, within a polygon region).
    nbytes : float
        Their bytes in the COPY file, compressed as configured.
    """
    from ncreel.cells import ShardRows
    from ncreel.cells.context import GEOMETRY_COLUMN
    from ncreel.cells.rows import probe_settings
    from ncreel.pg.copytext import open_copy_writer, write_copy_rows

    cells = probe_settings(cells)
    t = series.n_time // 2 if t is None else t
    block = series.read(t, t + 1)
    shard_rows = ShardRows.for_series(series, cell_mean=np.zeros((series.ny, series.nx)),
                                      cells=cells)
    out = shard_rows.rows(t, block)
    n = len(next(iter(out.values()))) if out else 0
    if n == 0:  # a step without data (a gap in a record): the caller tries another
        return 0, 0.0
    # The step's first rows, written as ShardRows.write does (polygon column included).
    keep = min(n, sample_rows)
    part = {k: v[:keep] for k, v in out.items()}
    if shard_rows.geometry is not None:
        part[GEOMETRY_COLUMN] = shard_rows.geometry.polygons(np.asarray(part["cell_id"]))
    raw = io.BytesIO()
    written = write_copy_rows(raw, part)
    text = raw.getvalue()
    if cells.compression != "none" and text:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="ncreel-size-") as tdir:
            path = Path(tdir) / "sample"
            with open_copy_writer(path, cells.compression, cells.compression_level) as fh:
                fh.write(text)
            size = path.stat().st_size
    else:
        size = len(text)
    return n, size / max(written, 1) * n


def copy_bytes_of_a_step(series, cells) -> tuple[int, int, float]:
    """:func:`copy_bytes_per_step` of the first step with rows among those tried.

    The middle step, else the first, the last, then steps spread over the series: a step
    that cannot be read or has no data (a gap in a record) says nothing of the rows.

    Returns
    -------
    t : int
        The step measured (the last tried when none has rows).
    rows, nbytes
        As :func:`copy_bytes_per_step`; ``0, 0.0`` when no tried step has data.

    Raises
    ------
    NcreelError
        The last read error, when no tried step has rows and one could not be read.
    """
    n = series.n_time
    unread = None
    for t in dict.fromkeys((n // 2, 0, n - 1, *(n * k // 8 for k in range(1, 8)))):
        try:
            rows, nbytes = copy_bytes_per_step(series, cells, t=t)
        except NcreelError as err:
            unread = err
            continue
        if rows:
            return t, rows, nbytes
    if unread is not None:
        raise unread
    return t, 0, 0.0


def movie_bytes_per_frame(width: int, height: int, crf: int) -> float:
    """Estimate one H.264 frame's bytes of a smooth field (:data:`MOVIE_BYTES_PER_PIXEL_CRF18`)."""
    return (int(width) * int(height) * MOVIE_BYTES_PER_PIXEL_CRF18 + MOVIE_BYTES_PER_FRAME) \
        * 2.0 ** ((18 - int(crf)) / 6)


def _present(*patterns: Path) -> float:
    total = 0.0
    for pattern in patterns:
        for p in pattern.parent.glob(pattern.name) if pattern.parent.is_dir() else ():
            if p.is_file():
                total += p.stat().st_size
            elif p.is_dir():
                total += sum(q.stat().st_size for q in p.rglob("*") if q.is_file())
    return total


def predicted_needs(run, workdir: str | os.PathLike = ".",
                    notes: list | None = None) -> list[Need]:
    """Return what each output of `run` still needs on disk.

    Parameters
    ----------
    run : ncreel.jobs.runconfig.RunConfig
        The checked run (its config, series, cells and outputs).
    workdir : path
        Snakemake's working directory (the run's results/ are under it).
    notes : list, optional
        Gets a line when a size cannot be predicted: the table's when neither its middle,
        first nor last step can be read (a corrupt chunk, which the job that reads it
        names); the run then goes on without that part of the check.

    Returns
    -------
    list of Need
        For the table (with ``table`` in outputs): the shards' COPY files and the joined
        file (both stay: the shard files are the database load's input); for the movie:
        the segments, ``movie.mp4`` and any other format, the PNG frames kept.
    """
    from ncreel.config.settings import CellsSettings, SeriesSelection
    from ncreel.region.selection import open_selection, table_series

    cfg = run.config
    out = Path(workdir) / run.out
    n_time = run.grid["n_time"]
    needs = []
    if run.table_on:
        cells = CellsSettings.from_params(run.cells)
        selection = SeriesSelection.from_params(run.series)
        with open_selection(selection) as shown, table_series(selection, shown) as table:
            try:
                _, rows, per_step = copy_bytes_of_a_step(table, cells)
            except NcreelError as unread:
                rows = per_step = None
                if notes is not None:
                    notes.append(f"the table's size could not be predicted ({unread}); its "
                                 "room on the disk is not checked")
    if run.table_on and per_step is not None:
        total = per_step * n_time
        suffix = run.cells["suffix"]
        needs.append(Need(
            f"table ({rows:,} rows per step, {_size(per_step)} of COPY text per step: the "
            "shard files and the joined file)", os.fspath(out), 2 * total,
            _present(out / "cells" / f"*{suffix}", out / f"cells{suffix}",
                     out / "cells" / "*.part", out / f"cells{suffix}.part")))
    if run.movie_on:
        width, height = int(cfg["width"]), int(cfg["height"])
        pixels = width * height
        per_frame = movie_bytes_per_frame(width, height, cfg["crf"])
        movie = per_frame * n_time
        others = set(cfg["formats"]) - {"mp4"}
        # webm at most the H.264 movie's size; a gif's frames at its own size and rate.
        extra = movie * len(others - {"gif"})
        if "gif" in others:
            gif_w = min(_gif_setting(cfg, "width"), width)  # never scaled up
            gif_frames = n_time * min(1.0, _gif_setting(cfg, "fps") / float(cfg["fps"]))
            extra += gif_frames * gif_w * gif_w * height / width * GIF_BYTES_PER_PIXEL
        # PNG frames kept: every png_every-th step, each shard's first, middle and last,
        # and the run's middle one (ncreel.render.segment.png_sample).
        frames_per_shard = _frames_per_shard(run, out)
        shards = -(-n_time // frames_per_shard)
        pngs = min(n_time, (n_time // cfg["png_every"] if cfg["png_every"] else 0)
                   + 3 * shards + 1)
        needs.append(Need(
            f"movie (about {_size(per_frame)} per frame: the shards' segments, movie.mp4"
            + (f" and {len(others)} other format(s)" if others else "") + ", PNG frames)",
            os.fspath(out), movie * 2 + extra + pngs * pixels * PNG_BYTES_PER_PIXEL,
            _present(out / "segments", out / "movie.*", out / "frames")))
        needs.append(Need(
            "report (contact sheet of the PNG frames, summary page with the movie, plan and "
            "resources pages)", os.fspath(out), _sheet_bytes(pngs, width, height)
            + REPORT_PAGES_BYTES, _present(out / "report", out / "preview.*")))
    return needs


def _gif_setting(cfg, key: str) -> float:
    """Config ``gif.<key>``, else the schema's default."""
    from ncreel.config.configcheck import schema_defaults

    value = (cfg.get("gif") or {}).get(key)
    return float(schema_defaults("properties", "gif")[key] if value is None else value)


def _frames_per_shard(run, out: Path) -> int:
    """Frames per shard: the plan's when known, else :data:`UNPLANNED_FRAMES_PER_SHARD`."""
    from ncreel.config.settings import Calibration

    planned = run.config.get("frames_per_shard")
    calibration = out / "calibration.json"
    if not planned and calibration.is_file():
        try:
            planned = Calibration.from_json(calibration).frames_per_shard
        except (OSError, NcreelError):  # a bad file: the calibration job says so
            planned = None
    return max(int(planned or UNPLANNED_FRAMES_PER_SHARD), 1)


def _sheet_bytes(pngs: int, width: int, height: int) -> float:
    """Upper estimate of the contact sheet (:func:`ncreel.report.contactsheet.contact_sheet`)."""
    from ncreel.report.contactsheet import MAX_FRAMES, SHEET_DPI

    cell = max(2.6 * SHEET_DPI, min(480, width))  # each frame's width on the sheet, pixels
    return min(pngs, MAX_FRAMES) * cell * (cell * height / width + 35) * PNG_BYTES_PER_PIXEL


def free_bytes(path: str | os.PathLike) -> tuple[float, str, int]:
    """Free bytes for an unprivileged user on the file system `path` goes to.

    Returns
    -------
    (free, existing, device)
        Bytes available (``f_bavail``), the nearest existing directory measured, and its
        device (outputs on one device share the free space).
    """
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    st = os.statvfs(probe)
    return float(st.f_bavail * st.f_frsize), probe, os.stat(probe).st_dev


def check_disk(needs: list[Need], *, run: str, free=free_bytes) -> list[str]:
    """Stop a run whose outputs cannot fit where they go; notes for a tight fit.

    Parameters
    ----------
    needs : list of Need
        :func:`predicted_needs`.
    run : str
        The run's name, for messages.
    free : callable
        ``free(path) -> (bytes, directory, device)`` (:func:`free_bytes`).

    Returns
    -------
    list of str
        Notes (a run that needs more than :data:`NOTE_FRACTION` of the free space).

    Raises
    ------
    NcreelError
        When the outputs going to one file system need more than its free space: the
        line names both numbers, each output's share and what to change.
    """
    by_device: dict[int, list] = {}
    places: dict[int, tuple[float, str]] = {}
    for need in needs:
        avail, where, device = free(need.path)
        by_device.setdefault(device, []).append(need)
        places[device] = (avail, where)
    notes = []
    for device, group in by_device.items():
        avail, where = places[device]
        total = sum(n.bytes for n in group)
        parts = "; ".join(f"{n.what}: {_size(n.bytes)}" for n in group)
        if total > avail:
            raise NcreelError(
                f"run '{run}' needs about {_size(total)} more on the disk of {where}, "
                f"which has {_size(avail)} free ({parts}): free space there, put results/ "
                f"on a larger file system (snakemake --directory), or {DISK_WAYS_OUT}")
        if total > NOTE_FRACTION * avail:
            notes.append(f"run '{run}' needs about {_size(total)} of the {_size(avail)} "
                         f"free on the disk of {where} ({parts})")
    return notes


def guard(run, workdir: str | os.PathLike = ".") -> list[str]:
    """Stop before any job when `run` cannot fit on its disk; return notes of a tight fit.

    :func:`check_disk` of :func:`predicted_needs`.

    Raises
    ------
    NcreelError
        As :func:`check_disk`.
    """
    notes: list[str] = []
    needs = predicted_needs(run, workdir, notes)
    return [*notes, *check_disk(needs, run=run.run)]
