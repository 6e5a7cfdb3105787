"""``ncreel inspect``: what the workflow will make of a file, before anything is submitted.

It opens the file with the same detection code the workflow runs at parse time
(:func:`ncreel.input.source.open_series`) and says, in words: the variable and its dimensions,
the grid kind (rectilinear, curvilinear, projected with its CRS, unstructured mesh), the
time axis (decoded or not, calendar, first and last frame label, step), where
latitude/longitude come from, the extra dimensions and the ``select`` they need, how the
variable is chunked and what a chunk costs to read (:mod:`ncreel.input.chunking`; a file
chunked along its whole time axis is named, with how to rewrite it), the numbers of
cells, steps and rows and the COPY file's size, and every note detection logged (where it
was unsure). It also draws one preview frame, as a shard job would.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ncreel.core.errors import NcreelError


class _Notes(logging.Handler):
    """Collects the warnings detection logs, to say them in the report."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.lines.append(" ".join(record.getMessage().split()))


def list_variables(path: str | os.PathLike | Mapping) -> list[str]:
    """One line per data variable of `path`: name, dimensions with sizes, long name.

    `path` may be a catalog query (config ``input``): its dataset's first file is listed.
    """
    from ncreel.input.inputcheck import check_input_sizes
    from ncreel.input.source import _open, resolve_paths

    first = resolve_paths(path if isinstance(path, Mapping) else os.fspath(path))[0]
    check_input_sizes([first])
    with _open(first) as ds:
        out = []
        for name, da in ds.data_vars.items():
            dims = ", ".join(f"{d}={n}" for d, n in da.sizes.items())
            about = da.attrs.get("long_name") or da.attrs.get("standard_name") or ""
            out.append(f"{name} ({dims}){f'  {about}' if about else ''}")
    return out


def _grid_kind(series) -> list[str]:
    mesh = getattr(series, "mesh", None)
    if mesh is not None:
        return [f"grid: unstructured mesh ({mesh.kind}), {mesh.n_face:,} faces along "
                f"'{mesh.face_dim}'; latitude/longitude: face centres"]
    lines = []
    if series.mapping is not None:
        m = series.mapping
        lines.append(f"grid: projected, CF grid mapping '{m.name}' ({m.kind}); x/y "
                     f"coordinates '{series.x_name}'/'{series.y_name}'")
    if series.lat_name and series.lon_name:
        two_d = series._dataset(0)[series.lat_name].ndim - (
            series.time_dim in series._dataset(0)[series.lat_name].dims) >= 2
        kind = "curvilinear" if two_d else "rectilinear"
        if series.mapping is None:
            lines.append(f"grid: {kind}, {series.ny} x {series.nx}")
        lines.append(f"latitude/longitude: the file's '{series.lat_name}'/'{series.lon_name}'"
                     f" ({'2-D' if two_d else '1-D'})")
    elif series.mapping is not None:
        lines.append("latitude/longitude: computed from the grid mapping (pyproj)")
    else:
        lines.append(f"grid: {series.ny} x {series.nx} without latitude/longitude: drawn in "
                     "its own coordinates or grid indices, table lat/lon NULL (name them "
                     "with lat=/lon= if the file has them)")
    return lines


def _time_lines(series, labels: Sequence[str]) -> list[str]:
    axis = series.time_axis()
    missing = sum(lab is None for lab in axis.labels)
    name = series.time_name or series.time_dim
    if axis.decoded:
        head = (f"time: '{name}' along '{series.time_dim}', {series.n_time:,} steps, "
                f"calendar {axis.calendar}, units '{axis.units}'")
    else:
        head = (f"time: '{name}' along '{series.time_dim}', {series.n_time:,} steps, NOT "
                f"decoded ({axis.note or 'no CF time units'}); frames are labelled with "
                "the raw values, the table's time column is NULL")
    lines = [head, f"frames: first '{labels[0]}', last '{labels[-1]}'"]
    if missing and axis.decoded:
        lines.append(f"time: {missing} step(s) without a time (missing values)")
    if series.time_note:
        lines.append(f"time order: NOT as stored: {series.time_note}")
    elif all(v is None for v in axis.labels) and not np.isfinite(axis.values).any():
        lines.append("time order: as stored (no time to check it by)")
    else:
        lines.append("time order: as stored, checked: every step after the one before")
    return lines


def _size(nbytes: float) -> str:
    """``7.3 kB`` or ``95.5 MB``."""
    return f"{nbytes / 1e3:,.1f} kB" if nbytes < 1e5 else f"{nbytes / 1e6:,.1f} MB"


def _chunk_lines(series) -> list[str]:
    """Describe the variable's chunking and what one chunk costs decoded.

    With one more line for a file whose chunks are too large to hold (one along its whole
    time axis): each step read decodes all of it again.
    """
    from ncreel.input.chunking import MAX_HELD_BYTES

    every = 1 if series.window is None else series.window[2]

    def ahead_bytes(c) -> int:  # the most a read holds of a chunk (Series._read_run)
        ahead = 0 if c.read_whole is None else len(range(every, c.read_whole, every))
        return ahead * series.ny * series.nx * c.itemsize

    first = series.file_chunking(0)
    if first.chunks is None:
        return ["chunks: contiguous (not chunked): each step is read alone"]
    line = f"chunks: {first.describe()}; one chunk is {_size(first.chunk_bytes())} decoded"
    steps = first.read_whole
    if steps is None:
        line += (", one step" if first.time_chunk == 1 else
                 ", not compressed: each step is read alone")
    elif ahead_bytes(first) <= MAX_HELD_BYTES:
        line += (f", {steps} steps: each chunk is decompressed once, its steps not yet "
                 f"read held for the next reads (at most {_size(ahead_bytes(first))})")
    lines = [line]
    for i, path in enumerate(series.paths):
        c = series.file_chunking(i)
        if ahead_bytes(c) <= MAX_HELD_BYTES:
            continue
        spec = ",".join(f"{d}/{1 if d == c.time_dim or d in series.select else n}"
                        for d, n in zip(c.dims, c.shape, strict=True))
        whole = (f"in one chunk along its whole time axis ({c.read_whole:,} steps)"
                 if c.whole_axis else f"in chunks of {c.read_whole:,} steps")
        what = ("its whole chunk" if not c.whole_axis else
                "the whole series" if len(series.paths) == 1 else "the whole file")
        out = shlex.quote(f"{os.path.splitext(os.path.basename(path))[0]}_steps.nc")
        lines.append(
            f"chunks: warning: '{path}' holds '{series.variable}' {whole}, "
            f"{_size(c.chunk_bytes())} decoded, more than the {_size(MAX_HELD_BYTES)} a run "
            f"holds: each step read decompresses {what} again; rewrite it with one step "
            f"per chunk: nccopy -c {spec} {shlex.quote(path)} {out} (or cdo -f nc4 -z zip "
            "-k grid copy, or xarray's to_netcdf with encoding chunksizes of one step)")
        break
    return lines


def _copy_bytes_of_a_step(series) -> tuple[int, int, float]:
    """Step, rows and COPY bytes of a step with data, by the default cell model (field)."""
    from ncreel.cells import cells_settings
    from ncreel.config.settings import CellsSettings
    from ncreel.jobs.diskguard import copy_bytes_of_a_step

    return copy_bytes_of_a_step(series, CellsSettings.from_params(cells_settings({})))


def preview_frame(series, path: str | os.PathLike, *, width: int = 960, height: int = 540,
                  dpi: float = 100, cmap: str = "viridis",
                  labels: Sequence[str] | None = None) -> tuple[float, float]:
    """Draw the middle time step as the workflow would, with that step's own 2-98 % range.

    Returns
    -------
    (vmin, vmax) : tuple of float
        The colour limits used (the run takes them from the whole series instead).
    """
    from ncreel.config.configcheck import schema_defaults
    from ncreel.config.settings import RenderSettings
    from ncreel.render.segment import make_renderer

    t = series.n_time // 2
    field = series.read(t, t + 1)[0]
    finite = field[np.isfinite(field)]
    if finite.size:
        vmin, vmax = (float(v) for v in np.percentile(finite, [2.0, 98.0]))
    else:
        vmin, vmax = 0.0, 1.0
    if not vmin < vmax:
        vmin, vmax = vmin - 0.5, vmin + 0.5
    render = RenderSettings.from_params({
        "width": width, "height": height, "dpi": dpi, "cmap": cmap,
        "map": schema_defaults("properties", "map")})
    renderer = make_renderer(series, render, vmin=vmin, vmax=vmax, labels=list(labels))
    try:
        renderer.render(field, labels[t], path)
    finally:
        renderer.close()
    return vmin, vmax


def inspect(input: str | Sequence[str], variable: str, *, select: Mapping | None = None,
            time_dim: str | None = None, lat: str | None = None, lon: str | None = None,
            time: str | None = None, preview: str | os.PathLike | None = None,
            sel: Mapping | None = None, time_range: Sequence | None = None,
            time_every: int = 1, outputs: Sequence[str] = ("movie", "table"),
            width: int = 960, height: int = 540, crf: int = 18) -> list[str]:
    """Describe how the workflow will read `variable` of `input`, in plain lines.

    Parameters
    ----------
    input : str or sequence of str or mapping
        NetCDF path, Zarr store, glob or list, or a catalog query (config ``input``).
    variable : str
        Variable (config ``variable``).
    select, time_dim, lat, lon, time, sel, time_range, time_every, outputs
        As the config keys of the same names: the steps and level shown, and what the
        run makes (no COPY estimate without ``table``, no preview without ``movie``).
    preview : path, optional
        PNG to draw the middle step into.
    width, height, crf : int
        The movie's frame size and quality, for its size on disk.

    Returns
    -------
    list of str
        The report's lines.

    Raises
    ------
    NcreelError
        What the workflow would stop with (one line naming the file, variable or key).
    """
    from ncreel.input.coordsel import resolve_sel, sel_text
    from ncreel.input.inputcheck import check_input_sizes
    from ncreel.input.source import open_series, resolve_paths
    from ncreel.input.timeaxis import time_window
    from ncreel.jobs.diskguard import movie_bytes_per_frame
    from ncreel.render.segment import time_labels

    notes = _Notes()
    logger = logging.getLogger("ncreel")
    logger.addHandler(notes)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        # As the workflow before it opens the series: a truncated or crashing file.
        paths = resolve_paths(input, variable)  # a catalog is searched once
        check_input_sizes(paths)
        chosen = resolve_sel(paths[0], variable, sel, select, time_dim=time_dim)
        series = open_series(paths, variable, time_dim=time_dim, select=chosen, lat=lat,
                             lon=lon, time=time)
        window = None
        if time_range is not None or time_every != 1:
            window = time_window(series.time_axis(), time_range, time_every,
                                 variable=series.variable)
            if window is not None:
                series.close()
                series = open_series(paths, variable, time_dim=time_dim, select=chosen,
                                     lat=lat, lon=lon, time=time,
                                     steps=series.spec()["steps"], window=window)
        with series:
            series.check_one_geometry()
            da = series._dataset(0)[series.variable]
            dims = ", ".join(f"{d}={n}" for d, n in da.sizes.items())
            lines = [f"input: {len(series.paths)} file(s): {series.paths[0]}"
                     + (f" ... {series.paths[-1]}" if len(series.paths) > 1 else ""),
                     f"variable: '{series.variable}' ({dims}), {series.long_name}"
                     + (f" [{series.units}]" if series.units else "") + f", {da.dtype}"]
            lines += _grid_kind(series)
            lines += _chunk_lines(series)
            extra = {d: i for d, i in series.select.items() if d not in (sel or {})}
            if extra:
                lines.append("select: " + ", ".join(f"{d}={i}" for d, i in extra.items()))
            if sel:
                lines.append("sel: " + sel_text(sel, series.select))
            labels = time_labels(series)
            lines += _time_lines(series, labels)
            if window is not None:
                lines.append(f"steps shown: {series.n_time:,} of {series.n_input:,} (time_range "
                             f"{list(time_range) if time_range else 'all'}, time_every "
                             f"{time_every}): the table's time_index {window[0]} .. "
                             f"{window[0] + window[2] * (series.n_time - 1)} (each step's "
                             "index in the whole series)")
            cells = series.ny * series.nx
            if "table" in outputs:
                t, rows, nbytes = _copy_bytes_of_a_step(series)
                lines.append(f"cells: {cells:,}; steps: {series.n_time:,}; at most "
                             f"{cells * series.n_time:,} rows (one per cell and step that is "
                             "not missing)")
                lines.append(f"COPY file (cell model field): about "
                             f"{nbytes * series.n_time / 1e6:,.1f} MB ({rows:,} rows and "
                             f"{nbytes:,.0f} bytes in "
                             + ("the middle step" if t == series.n_time // 2 else f"step {t}")
                             + "); a run needs twice "
                             "that on disk (the shard files and the joined file)")
            else:
                lines.append(f"cells: {cells:,}; steps: {series.n_time:,}; table: not made "
                             "(outputs: movie)")
            if "movie" in outputs:
                per_frame = movie_bytes_per_frame(width, height, crf)
                lines.append(f"movie: {series.n_time:,} frames of {width} x {height}; at most "
                             f"about {per_frame * series.n_time / 1e6:,.1f} MB at crf {crf} "
                             "(twice that on disk while the shards' segments are kept)")
            else:
                preview = None
                lines.append("movie: not made (outputs: table); no frame is drawn")
            if preview is not None:
                vmin, vmax = preview_frame(series, preview, labels=labels)
                lines.append(f"preview: {preview} (middle step, its own colour range "
                             f"{vmin:.4g}..{vmax:.4g}; a run's colour range is that of "
                             + ("all the steps it shows)" if window is not None
                                else "the whole series)"))
    finally:
        logger.removeHandler(notes)
        logger.setLevel(old_level)
    note = getattr(series, "note", "")
    said = [*notes.lines, *([note] if note else [])]
    lines += [f"note: {n}" for n in dict.fromkeys(said)] or ["note: detection was sure of "
                                                             "everything above"]
    return lines


def _input_of(args):
    """Config ``input`` of the command line: the file, or a catalog with its ``--query``."""
    queries = getattr(args, "query", None) or []
    if not queries and not str(args.file).endswith(".json"):
        return args.file
    query = {}
    for item in queries:
        column, sep, value = item.partition("=")
        if not column or not sep:
            raise NcreelError(f"--query {item!r}: use COLUMN=VALUE, e.g. --query "
                              "experiment_id=historical")
        query.setdefault(column, []).append(value)
    return {"catalog": args.file,
            "query": {k: v[0] if len(v) == 1 else v for k, v in query.items()}}


def main(args) -> int:
    """Run ``ncreel inspect`` with parsed `args`; print the lines; return the exit status."""
    import sys

    try:
        source = _input_of(args)
        if not args.variable:
            lines = list_variables(source)  # a bad file: its one line, nothing before
            print("variables (give one: ncreel inspect FILE VARIABLE):")
            for line in lines:
                print(f"  {line}")
            return 0
        select = {}
        for item in args.select or []:
            dim, _, index = item.partition("=")
            if not dim or not index.lstrip("-").isdigit():
                raise NcreelError(f"--select {item!r}: use DIM=INDEX, e.g. --select level=0")
            select[dim] = int(index)
        sel = {}
        for item in args.sel or []:
            dim, _, value = item.partition("=")
            if not dim or not value:
                raise NcreelError(f"--sel {item!r}: use DIM=VALUE, e.g. --sel plev=85000 or "
                                  "--sel 'plev=850 hPa'")
            try:
                sel[dim] = float(value) if "." in value or "e" in value.lower() \
                    else int(value)
            except ValueError:
                sel[dim] = value
        outputs = [o.strip() for o in (args.outputs or "movie,table").split(",") if o.strip()]
        if not outputs or set(outputs) - {"movie", "table"}:
            raise NcreelError(f"--outputs {args.outputs!r}: use movie, table or movie,table")
        preview = None if args.no_preview else (args.preview or
                                                 f"{Path(args.variable).name}_preview.png")
        for line in inspect(source, args.variable, select=select, time_dim=args.time_dim,
                            lat=args.lat, lon=args.lon, time=args.time, preview=preview,
                            sel=sel, time_range=args.time_range, time_every=args.time_every,
                            outputs=outputs):
            print(line)
    except NcreelError as err:
        print(f"ncreel: error: {err}", file=sys.stderr)
        return 2
    return 0
