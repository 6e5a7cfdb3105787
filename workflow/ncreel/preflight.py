"""``ncreel inspect``: what the workflow will make of a file, before anything is submitted.

It opens the file with the same detection code the workflow runs at parse time
(:func:`ncreel.source.open_series`) and says, in words: the variable and its dimensions,
the grid kind (rectilinear, curvilinear, projected with its CRS, unstructured mesh), the
time axis (decoded or not, calendar, first and last frame label, step), where
latitude/longitude come from, the extra dimensions and the ``select`` they need, the
numbers of cells, steps and rows and the COPY file's size, and every note detection
logged (where it was unsure). It also draws one preview frame, as a shard job would.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ncreel.errors import NcreelError


class _Notes(logging.Handler):
    """Collects the warnings detection logs, to say them in the report."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.lines.append(" ".join(record.getMessage().split()))


def list_variables(path: str | os.PathLike) -> list[str]:
    """One line per data variable of `path`: name, dimensions with sizes, long name."""
    from ncreel.inputcheck import check_input_sizes
    from ncreel.source import _open, resolve_paths

    first = resolve_paths(os.fspath(path))[0]
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
    return lines


def _copy_bytes_per_step(series) -> tuple[int, int]:
    """Rows and COPY bytes of the middle step, by the default cell model (field)."""
    from ncreel.cells import ShardRows, cells_settings
    from ncreel.settings import CellsSettings

    t = series.n_time // 2
    block = series.read(t, t + 1)
    cells = CellsSettings.from_params(cells_settings({}))
    rows = ShardRows.for_series(series, cell_mean=np.zeros((series.ny, series.nx)),
                                cells=cells)
    fh = io.BytesIO()
    n = rows.write(fh, t, block)
    return n, len(fh.getvalue())


def preview_frame(series, path: str | os.PathLike, *, width: int = 960, height: int = 540,
                  dpi: float = 100, cmap: str = "viridis",
                  labels: Sequence[str] | None = None) -> tuple[float, float]:
    """Draw the middle time step as the workflow would, with that step's own 2-98 % range.

    Returns
    -------
    (vmin, vmax) : tuple of float
        The colour limits used (the run takes them from the whole series instead).
    """
    from ncreel.configcheck import schema_defaults
    from ncreel.render.segment import make_renderer
    from ncreel.settings import RenderSettings

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
            time: str | None = None, preview: str | os.PathLike | None = None) -> list[str]:
    """Describe how the workflow will read `variable` of `input`, in plain lines.

    Parameters
    ----------
    input : str or sequence of str
        NetCDF path, glob or list (config ``input``).
    variable : str
        Variable (config ``variable``).
    select, time_dim, lat, lon, time
        As the config keys of the same names.
    preview : path, optional
        PNG to draw the middle step into.

    Returns
    -------
    list of str
        The report's lines.

    Raises
    ------
    NcreelError
        What the workflow would stop with (one line naming the file, variable or key).
    """
    from ncreel.inputcheck import check_input_sizes
    from ncreel.render.segment import time_labels
    from ncreel.source import open_series, resolve_paths

    notes = _Notes()
    logger = logging.getLogger("ncreel")
    logger.addHandler(notes)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        # As the workflow before it opens the series: a truncated or crashing file.
        check_input_sizes(resolve_paths(input))
        series = open_series(input, variable, time_dim=time_dim, select=select, lat=lat,
                             lon=lon, time=time)
        with series:
            da = series._dataset(0)[series.variable]
            dims = ", ".join(f"{d}={n}" for d, n in da.sizes.items())
            lines = [f"input: {len(series.paths)} file(s): {series.paths[0]}"
                     + (f" ... {series.paths[-1]}" if len(series.paths) > 1 else ""),
                     f"variable: '{series.variable}' ({dims}), {series.long_name}"
                     + (f" [{series.units}]" if series.units else "") + f", {da.dtype}"]
            lines += _grid_kind(series)
            extra = {d: i for d, i in series.select.items()}
            if extra:
                lines.append("select: " + ", ".join(f"{d}={i}" for d, i in extra.items()))
            labels = time_labels(series)
            lines += _time_lines(series, labels)
            cells = series.ny * series.nx
            rows, nbytes = _copy_bytes_per_step(series)
            lines.append(f"cells: {cells:,}; steps: {series.n_time:,}; at most "
                         f"{cells * series.n_time:,} rows (one per cell and step that is not "
                         "missing)")
            lines.append(f"COPY file (cell model field): about "
                         f"{nbytes * series.n_time / 1e6:,.1f} MB ({rows:,} rows and "
                         f"{nbytes:,} bytes in the middle step)")
            if preview is not None:
                vmin, vmax = preview_frame(series, preview, labels=labels)
                lines.append(f"preview: {preview} (middle step, its own colour range "
                             f"{vmin:.4g}..{vmax:.4g}; a run uses the whole series)")
    finally:
        logger.removeHandler(notes)
        logger.setLevel(old_level)
    note = getattr(series, "note", "")
    said = [*notes.lines, *([note] if note else [])]
    lines += [f"note: {n}" for n in dict.fromkeys(said)] or ["note: detection was sure of "
                                                             "everything above"]
    return lines


def main(args) -> int:
    """Run ``ncreel inspect`` with parsed `args`; print the lines; return the exit status."""
    import sys

    try:
        if not args.variable:
            print("variables (give one: ncreel inspect FILE VARIABLE):")
            for line in list_variables(args.file):
                print(f"  {line}")
            return 0
        select = {}
        for item in args.select or []:
            dim, _, index = item.partition("=")
            if not dim or not index.lstrip("-").isdigit():
                raise NcreelError(f"--select {item!r}: use DIM=INDEX, e.g. --select level=0")
            select[dim] = int(index)
        preview = None if args.no_preview else (args.preview or
                                                 f"{Path(args.variable).name}_preview.png")
        for line in inspect(args.file, args.variable, select=select, time_dim=args.time_dim,
                            lat=args.lat, lon=args.lon, time=args.time, preview=preview):
            print(line)
    except NcreelError as err:
        print(f"ncreel: error: {err}", file=sys.stderr)
        return 2
    return 0
