"""One shard job: render its frames into a movie segment, its cell rows written beside them."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
from pathlib import Path

import numpy as np

from ncreel.cells import ShardRows
from ncreel.cells.soil import read_degradation_state
from ncreel.config.settings import CellsSettings, EncodeSettings, RenderSettings, SeriesSelection
from ncreel.core.io import OUTPUT_ATTR, atomic_path
from ncreel.input.identity import check_inputs
from ncreel.input.source import MAX_BLOCK_CELLS
from ncreel.pg.copytext import open_copy_writer
from ncreel.region.selection import open_selection, table_series
from ncreel.render.segment import FrameJob, colorbar_extend, render_shard
from ncreel.run.progress import Progress
from ncreel.run.shardplan import Shard

log = logging.getLogger(__name__)


def run_shard(selection: SeriesSelection, shard: Shard, *, stats_json: str | os.PathLike,
              cell_mean_npy: str | os.PathLike, frames_dir: str | os.PathLike,
              rows_path: str | os.PathLike, render: RenderSettings,
              segment: str | os.PathLike, encode: EncodeSettings, cells: CellsSettings,
              png_times=(), workers: int = 1, png_compress: int = 6,
              degradation: tuple | None = None, table_paths: dict | None = None) -> dict:
    """Render the frames and write the COPY rows of time steps ``shard.start:shard.stop``.

    Frames: :func:`ncreel.render.segment.render_shard` reads the slice in its own small
    blocks. Rows (:class:`ShardRowsWriter`), in blocks of at most ``MAX_BLOCK_CELLS``
    values, each written and then dropped: when the frames are drawn in this process
    (``workers == 1``), in a second thread while they are drawn, sharing each block the
    frames read (read once) when the table is of the same cells as the movie; with
    several render workers, or a table of its own extent, the rows read the slice
    themselves. The passes then overlap, so peak memory is the sum of the two
    (:func:`ncreel.run.resources.render_mem_mb_calibrated`); with several workers the
    rows come after the frames and the peak is the larger. Neither grows with the shard's
    length. Every output is written under a temporary name and renamed only when the
    whole job is done; an error or a stop signal in either pass stops both. The input is
    opened once here; render worker processes (``workers > 1``) open their own from
    `selection`.

    Parameters
    ----------
    selection : SeriesSelection
        The input.
    shard : Shard
        Which time steps.
    stats_json, cell_mean_npy : path
        Outputs of the statistics rule (colour limits; per-cell means, shape (ny, nx)).
    frames_dir : path
        Directory to create, holding ``frame_<time_index>.png`` for `png_times`.
    rows_path : path or None
        COPY text file of this shard's rows; None writes no rows (config ``outputs``
        without ``table``).
    render : RenderSettings
    segment : path or None
        The shard's H.264 MP4 segment; None draws no frame (``outputs`` without
        ``movie``).
    encode : EncodeSettings
    cells : CellsSettings
        Cell model, geometry column and compression of the COPY file.
    png_times : iterable of int
        Global time indices also written as PNG (see :func:`ncreel.render.segment.png_sample`).
    workers : int
        Render worker processes (the job's ``threads``).
    png_compress : int
        zlib level of the PNG frames.
    degradation : (path, path) or None
        ``degradation_state.npy`` and ``.json`` of the ``degradation_state`` rule (etr_risk
        with a temperature variable); (None, None) or None when not used.

    table_paths : dict, optional
        ``cells`` and ``steps``: the shard's files of the normalised layout
        (``cells.layout: normalised``; `rows_path` then holds the values rows only).

    Returns
    -------
    dict
        ``frames`` and ``rows`` written, the render statistics, and ``rows_mode``
        (:attr:`ShardRowsWriter.mode`; ``none`` without rows).

    Raises
    ------
    NcreelError
        If an input file is not the version ``stats.json`` records (:mod:`ncreel.input.identity`),
        before any read or after the last one.
    """
    stats = json.loads(Path(stats_json).read_text())
    # The files must be the versions the statistics (colour limits, cell means) describe;
    # checked again after the last read, before the rows file gets its final name.
    recorded = stats.get("inputs")
    # The files this job reads: the input's and, with panels, every panel's.
    panels = render.panels["panels"] if render.panels else []
    paths = list(dict.fromkeys([*selection.paths, *(
        q for p in panels if p["series"] for q in p["series"]["paths"])]))
    if recorded is not None:
        check_inputs(recorded, paths)
    job = FrameJob(series=selection, render=render, encode=encode, vmin=stats["vmin"],
                   vmax=stats["vmax"], png_compress=png_compress,
                   overlay_limits=stats.get("overlays"),
                   extend=colorbar_extend(render.colorbar_extend, stats),
                   panel_limits=stats.get("panels"), label=f"shard {shard.name} frames"
                   ) if segment is not None else None
    info = {"frames": 0, "pngs": 0, "workers": 0, "wall_s": 0.0, "render_s": 0.0,
            "maxrss_mb": 0.0, "encoder_maxrss_mb": 0.0}
    with open_selection(selection) as series, table_series(selection, series) as table:
        rows = None
        if rows_path is not None:  # config outputs: table
            state = {}
            if degradation and degradation[0]:
                state["degradation"] = read_degradation_state(*degradation)
            rows = ShardRows.for_series(table, cell_mean=np.load(cell_mean_npy), cells=cells,
                                        state=state)
        with contextlib.ExitStack() as stack:
            writer = None
            if rows is not None:
                # Every rows file under its temporary name until the job is done; the
                # writer is left (its thread stopped) before they are removed or renamed.
                files = {"rows": stack.enter_context(atomic_path(rows_path))}
                for key in ("cells", "steps") if table_paths else ():
                    files[key] = stack.enter_context(atomic_path(table_paths[key]))
                # Beside the frames when they are drawn here; sharing their blocks when
                # the rows are of the same cells (not a table of its own extent, nor a
                # layout of panels, which reads its own files).
                beside = segment is not None and int(workers) <= 1
                writer = stack.enter_context(ShardRowsWriter(
                    rows, table, shard, files, cells, final=rows_path, beside=beside,
                    shared=beside and table is series and not render.panels))
            if segment is not None:  # config outputs: movie
                with atomic_path(frames_dir) as fdir:
                    fdir.mkdir()
                    info = render_shard(job, shard, segment=segment, frames_dir=fdir,
                                        png_times=png_times, workers=workers, series=series,
                                        on_block=writer.on_block if writer else None)
            n_rows = writer.finish() if writer is not None else 0
            writer_mode = writer.mode if writer is not None else "none"
            if recorded is not None:
                check_inputs(recorded, paths)
    if rows is None:
        log.info("shard %s: %d frames, no rows (outputs: movie)", shard.name, info["frames"])
        return {**info, "rows": 0, "rows_mode": "none"}
    how = {"shared": "beside, sharing the blocks of", "beside": "beside",
           "after": "after"}[writer_mode]
    log.info("shard %s: %d rows (%s the frames); %d frames (%d PNG) by %d worker(s) in "
             "%.1f s, %.1f frames/s drawn, worker peak RSS %.0f MiB, encoder peak RSS %.0f MiB",
             shard.name, n_rows, how, info["frames"], info["pngs"], info["workers"],
             info["wall_s"], info["frames"] / max(info["render_s"], 1e-9), info["maxrss_mb"],
             info["encoder_maxrss_mb"])
    return {**info, "rows": n_rows, "rows_mode": writer_mode}


#: Blocks the frames may read ahead of the rows written beside them: each waits in a
#: queue of this length (a block is at most ``RENDER_BLOCK_BYTES`` or one time step), so
#: memory stays bounded when the rows are slower than the frames.
QUEUED_BLOCKS = 2


class _Stopped(Exception):
    """The job stopped (an error or a signal in the main thread): the rows end unwritten."""


class ShardRowsWriter:
    """Write one shard's COPY rows: after its frames, or beside them in a second thread.

    Beside the frames (`beside`), the rows are written in a thread started on entering
    while the main thread renders: matplotlib draws in the main thread, which also takes
    the job's stop signals, and the rows' heavy parts (numpy, polars' CSV writer, zlib or
    zstd) release the GIL, so the two overlap. With `shared`, the thread writes the
    blocks the frames read (:meth:`on_block`), each read once, handed over through a
    queue of :data:`QUEUED_BLOCKS`; otherwise it reads the table's own blocks.

    An error in the thread is raised in the main thread at its next block or at
    :meth:`finish`; leaving the writer (also on an error or a stop signal) stops the
    thread and waits for it, before the caller removes the temporary files.

    Parameters
    ----------
    rows : ShardRows
        The cell model set up for `table`.
    table : ncreel.input.source.Series
        The series the rows read.
    shard : Shard
        Which time steps.
    files : dict of str to path
        Temporary files to write: ``rows`` and, for ``cells.layout: normalised``,
        ``cells`` and ``steps``.
    cells : CellsSettings
        Compression of the COPY files.
    final : path
        The rows file's final name, which a failed write (a full disk) names.
    beside : bool
        Write in a thread while the caller renders the frames in this process.
    shared : bool
        With `beside`: write the blocks given to :meth:`on_block` (the same cells as
        `table`'s), not read them again.
    """

    def __init__(self, rows: ShardRows, table, shard: Shard, files: dict, cells: CellsSettings,
                 *, final: str | os.PathLike, beside: bool = False, shared: bool = False):
        self.rows, self.table, self.shard = rows, table, shard
        self.files, self.cells = files, cells
        self.final = os.fspath(final)
        self.beside, self.shared = bool(beside), bool(beside and shared)
        self.n_rows = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._queue: queue.Queue = queue.Queue(QUEUED_BLOCKS)
        self._thread: threading.Thread | None = None

    @property
    def mode(self) -> str:
        """How the rows are written: ``after`` the frames, ``beside`` them, or ``shared``."""
        return "shared" if self.shared else "beside" if self.beside else "after"

    def __enter__(self) -> ShardRowsWriter:
        if self.beside:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"shard {self.shard.name} rows")
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._join()

    def on_block(self, t0: int, block) -> None:
        """Take one block the frames read, ``t0 : t0 + n``, before its frames are drawn.

        Raises the thread's error, if it has failed. With `shared`, a copy of `block`
        (neither side can change what the other reads) is queued for the rows; waits
        while :data:`QUEUED_BLOCKS` are queued.
        """
        self._raise_failed()
        if self.shared:
            self._put((t0, block.copy()))

    def finish(self) -> int:
        """Write the rows (after the frames), or wait for the thread's; return rows written.

        Raises
        ------
        BaseException
            What the rows' pass raised (in the thread or here).
        """
        if not self.beside:
            self.n_rows = self._write(self._own_blocks())
            return self.n_rows
        if self.shared:
            self._put(None)  # no more blocks
        self._join()
        self._raise_failed()
        return self.n_rows

    # --- in the thread -------------------------------------------------------------------
    def _run(self) -> None:
        try:
            blocks = self._queued_blocks() if self.shared else self._own_blocks()
            self.n_rows = self._write(blocks)
        except _Stopped:
            pass
        except BaseException as exc:  # handed to the main thread, which raises it
            if not hasattr(exc, OUTPUT_ATTR):
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(exc, OUTPUT_ATTR, self.final)
            self.error = exc

    def _queued_blocks(self):
        while True:
            try:
                item = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._stop.is_set():
                    raise _Stopped() from None
                continue
            if item is None:
                return
            yield item

    def _own_blocks(self):
        max_bytes = MAX_BLOCK_CELLS * self.table.dtype.itemsize
        for t0, block in self.table.iter_blocks(self.shard.start, self.shard.stop, max_bytes):
            if self._stop.is_set():
                raise _Stopped()
            yield t0, block

    def _write(self, blocks) -> int:
        shard, cells, files = self.shard, self.cells, self.files
        n_rows, expected = 0, shard.start
        with contextlib.ExitStack() as stack:
            fh = stack.enter_context(open_copy_writer(files["rows"], cells.compression,
                                                      cells.compression_level))
            split = steps_fh = None
            if "steps" in files:
                from ncreel.cells.normalised import NormalisedRows

                split = NormalisedRows(self.rows)
                steps_fh = stack.enter_context(open_copy_writer(
                    files["steps"], cells.compression, cells.compression_level))
            progress = Progress(shard.n_frames, f"shard {shard.name} rows", unit="time steps")
            for t0, block in blocks:
                if t0 != expected:
                    raise RuntimeError(f"shard {shard.name} rows: got steps from {t0}, "
                                       f"expected {expected}")
                n_rows += (split.write(fh, steps_fh, t0, block) if split is not None
                           else self.rows.write(fh, t0, block))
                expected = t0 + block.shape[0]
                progress.update(expected - shard.start, rows_written=n_rows)
            if expected != shard.stop:
                raise RuntimeError(f"shard {shard.name} rows: steps end at {expected}, "
                                   f"expected {shard.stop}")
            if split is not None:
                with open_copy_writer(files["cells"], cells.compression,
                                      cells.compression_level) as cfh:
                    split.finish(cfh)
        return n_rows

    # --- in the main thread --------------------------------------------------------------
    def _put(self, item) -> None:
        while True:
            self._raise_failed()
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                if not self._thread.is_alive():  # failed (raised above) or a bug
                    self._raise_failed()
                    raise RuntimeError(f"shard {self.shard.name} rows: the writer "
                                       "ended before its last block") from None

    def _join(self) -> None:
        # In short waits: the main thread takes the job's stop signals between them.
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.1)

    def _raise_failed(self) -> None:
        if self.error is not None:
            raise self.error
