"""Typed settings handed from a rule's adapter to the package.

Rules keep their ``params`` as plain dicts (Snakemake compares them to decide what to
rerun); each adapter in ``workflow/scripts`` builds these frozen dataclasses from them
once, with :meth:`from_params`, and passes them on. The values come from the validated
config (the schema holds the defaults), so the classes carry no defaults of their own: a
missing or unknown setting is an error naming it. :class:`Calibration` is the content of
``calibration.json``, written by the ``calibrate_render`` checkpoint and read by the
resources functions and the shard plan.

This module is a leaf: it imports the standard library and :mod:`ncreel.core.errors` only (and
:mod:`ncreel.core.io` to write a calibration), so login-node tools may read a calibration with
it and any module may import it. A selection is opened with
:func:`ncreel.region.selection.open_selection`; config ``cells`` is normalised into
:class:`CellsSettings` parameters by :func:`ncreel.cells.cells_settings`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ncreel.core.errors import NcreelError

#: What a run can make (config ``outputs``), in this order; a run of both is also what
#: records written before the setting existed describe.
OUTPUTS = ("movie", "table")
#: File-name suffix of the COPY files for each ``cells.compression``.
COPY_SUFFIXES = {"none": ".copy", "gzip": ".copy.gz", "zstd": ".copy.zst"}
GEOMETRIES = ("none", "text", "postgis")


def _fields_from(cls, params: Any, where: str) -> dict:
    """Take the keyword arguments of `cls` from `params`: exactly its field names."""
    if not isinstance(params, Mapping):
        raise NcreelError(f"settings '{where}': expected a mapping, got "
                          f"{type(params).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in params]
    if missing:
        raise NcreelError(f"setting '{where}.{missing[0]}': missing (settings '{where}' "
                          f"need {', '.join(names)})")
    unknown = sorted(str(k) for k in params if k not in names)
    if unknown:
        raise NcreelError(f"setting '{where}.{unknown[0]}': unknown (known: "
                          f"{', '.join(names)})")
    return {n: params[n] for n in names}


def _bad(where: str, key: str, what: str, value: Any) -> NcreelError:
    return NcreelError(f"setting '{where}.{key}': must be {what}, got {value!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _check_int(where, key, value, *, low=None, high=None):
    if not _is_int(value) or (low is not None and value < low) or (
            high is not None and value > high):
        span = (f" in {low}..{high}" if high is not None else f" >= {low}"
                if low is not None else "")
        raise _bad(where, key, f"an integer{span}", value)


def _check_number(where, key, value, *, positive=False, non_negative=False):
    if not _is_number(value) or (positive and value <= 0) or (non_negative and value < 0):
        what = "a positive number" if positive else (
            "a number >= 0" if non_negative else "a finite number")
        raise _bad(where, key, what, value)


def _check_str(where, key, value, *, optional=False, choices=None):
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise _bad(where, key, "a non-empty string" + (" or null" if optional else ""), value)
    if choices is not None and value not in choices:
        raise _bad(where, key, f"one of {', '.join(choices)}", value)


class _Settings:
    """Shared :meth:`from_params` / :meth:`to_params` of the settings dataclasses."""

    #: Name of the settings in messages (the rule's params key).
    KEY: ClassVar[str] = ""
    #: Optional fields and their defaults: left out of :meth:`to_params` when at the
    #: default, so that params (and so the jobs Snakemake reruns on a params change) of
    #: runs that do not use a newer setting stay what they were.
    OPTIONAL: ClassVar[dict] = {}

    @classmethod
    def from_params(cls, params: Mapping):
        """Build from a rule's params dict (every field present but :attr:`OPTIONAL`).

        Raises
        ------
        NcreelError
            Naming the missing, unknown or bad setting.
        """
        if isinstance(params, Mapping):
            params = {**cls.OPTIONAL, **params}
        return cls(**_fields_from(cls, params, cls.KEY))

    def to_params(self) -> dict:
        """Return the plain dict :meth:`from_params` reads (JSON- and pickle-friendly)."""
        params = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        for key, default in self.OPTIONAL.items():
            if params[key] == default:
                del params[key]
        return params


def _plain(value: Any) -> Any:
    if isinstance(value, _Settings):
        return value.to_params()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return dict(value)
    return value


@dataclass(frozen=True)
class SeriesSelection(_Settings):
    """Which variable of which NetCDF files is the series, as detected at parse time.

    The rule's ``series`` params (:meth:`ncreel.input.source.Series.spec`); picklable, so a
    render worker process opens the series from it.

    Attributes
    ----------
    paths : tuple of str
        NetCDF files in time order.
    variable : str
        Variable name, ``GROUP/NAME`` for one in a NetCDF-4 group.
    time_dim : str or None
        Time dimension (None: detected).
    select : dict of str to int
        Index taken along each extra dimension.
    lat, lon, time : str or None
        Coordinate variable names (None: detected by CF attributes).
    steps : list or None
        ``[file, start, stop]`` runs of the files' own time indices (`file` an index into
        `paths`), in time order, where a file repeats times or holds them out of order
        (None: every step of every file, in order). Decided when the series is first
        opened (at parse time), so every job reads the same steps without comparing data
        or times again.
    region : dict or None
        The movie's region (:meth:`ncreel.region.spec.Region.to_params`), None: the whole
        grid.
    window : list of 3 int or None
        ``[start, stop, every]``: the steps of the whole series shown (config
        ``time_range``, ``time_every``; :func:`ncreel.input.timeaxis.time_window`), None:
        every step.
    table_region : dict or None
        The per-cell table's own region (config ``cells.region``), None: as ``region``
        says (its ``table``: ``region`` or ``global``).
    """

    KEY: ClassVar[str] = "series"
    paths: tuple[str, ...]
    variable: str
    time_dim: str | None
    select: dict
    lat: str | None
    lon: str | None
    time: str | None
    steps: list | None = None
    region: dict | None = None
    window: list | None = None
    table_region: dict | None = None

    OPTIONAL: ClassVar[dict] = {"region": None, "window": None, "table_region": None}

    def table_selection(self) -> SeriesSelection:
        """Return the selection the per-cell table reads.

        The table's own region (``cells.region``) when given; else the whole grid when
        the movie's region says ``table: global``; else this selection.
        """
        if self.table_region is not None:
            return dataclasses.replace(self, region=dict(self.table_region),
                                       table_region=None)
        if self.region is not None and self.region.get("table") == "global":
            return dataclasses.replace(self, region=None)
        return self

    def __post_init__(self):
        w = self.KEY
        paths = self.paths
        if isinstance(paths, str) or not isinstance(paths, list | tuple) or not paths or \
                not all(isinstance(p, str) and p for p in paths):
            raise _bad(w, "paths", "a non-empty list of file paths", paths)
        object.__setattr__(self, "paths", tuple(paths))
        _check_str(w, "variable", self.variable)
        for key in ("time_dim", "lat", "lon", "time"):
            _check_str(w, key, getattr(self, key), optional=True)
        if not isinstance(self.select, Mapping) or not all(
                isinstance(k, str) and _is_int(v) for k, v in self.select.items()):
            raise _bad(w, "select", "a mapping of dimension name to integer index",
                       self.select)
        object.__setattr__(self, "select", dict(self.select))
        if self.steps is not None and not (
                isinstance(self.steps, list | tuple) and all(
                    isinstance(r, list | tuple) and len(r) == 3 and all(map(_is_int, r))
                    for r in self.steps)):
            raise _bad(w, "steps", "null or a list of [file, start, stop] runs", self.steps)
        for key in ("region", "table_region"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, Mapping):
                raise _bad(w, key, "null or a mapping of region parameters", value)
        if self.window is not None:
            if not (isinstance(self.window, list | tuple) and len(self.window) == 3
                    and all(map(_is_int, self.window)) and 0 <= self.window[0]
                    < self.window[1] and self.window[2] >= 1):
                raise _bad(w, "window", "null or [start, stop, every] with 0 <= start < "
                           "stop and every >= 1", self.window)
            object.__setattr__(self, "window", list(self.window))


@dataclass(frozen=True)
class MapSettings(_Settings):
    """Map of grids with latitude/longitude (config ``map``).

    Attributes
    ----------
    coastlines : bool or None
        Draw coastlines; None draws them when the grid has latitude/longitude.
    borders : bool
        Draw land borders.
    projection : str
        Name of a ``cartopy.crs`` projection class.
    projection_params : dict
        Its keyword arguments.
    gridlines : bool
        Draw labelled gridlines.
    """

    KEY: ClassVar[str] = "render.map"
    coastlines: bool | None
    borders: bool
    projection: str
    projection_params: dict
    gridlines: bool = False

    OPTIONAL: ClassVar[dict] = {"gridlines": False}

    def __post_init__(self):
        w = self.KEY
        if self.coastlines is not None and not isinstance(self.coastlines, bool):
            raise _bad(w, "coastlines", "true, false or null", self.coastlines)
        if not isinstance(self.borders, bool):
            raise _bad(w, "borders", "true or false", self.borders)
        _check_str(w, "projection", self.projection)
        if not isinstance(self.projection_params, Mapping):
            raise _bad(w, "projection_params", "a mapping", self.projection_params)
        object.__setattr__(self, "projection_params", dict(self.projection_params))
        if not isinstance(self.gridlines, bool):
            raise _bad(w, "gridlines", "true or false", self.gridlines)


@dataclass(frozen=True)
class RenderSettings(_Settings):
    """How a frame is drawn (config ``width``, ``height``, ``dpi``, ``cmap``, ``map``).

    Attributes
    ----------
    width, height : int
        Frame size in pixels.
    dpi : float
        Dots per inch (font size relative to the frame).
    cmap : str
        Matplotlib colormap name.
    map : MapSettings
        Built from a mapping by :meth:`from_params`.
    contours : dict or None
        Config ``contours`` (contour lines of another variable), None: none.
    vectors : dict or None
        Config ``vectors`` (arrows of a u/v pair), None: none.
    colorbar_extend : str or None
        Config ``colorbar_extend``; None: ``auto``.
    caption : str or None
        Config ``caption``: a line at the bottom of every frame.
    decorate : dict or None
        Config ``decorate`` as :func:`ncreel.render.decorate.decorate_params` gives it:
        ``function`` (``module:function``) and ``source`` (a digest of its module).
    panels : dict or None
        Config ``panels`` as planned at parse time (:func:`ncreel.render.panelplan.plan_panels`):
        several fields side by side; None: the one top-level field.
    time_format : str or None
        Config ``time_format``: the frames' date in this strftime-style format
        (:func:`ncreel.render.timelabels.strftime_date`); None: automatic.
    """

    KEY: ClassVar[str] = "render"
    width: int
    height: int
    dpi: float
    cmap: str
    map: MapSettings
    contours: dict | None = None
    vectors: dict | None = None
    colorbar_extend: str | None = None
    caption: str | None = None
    decorate: dict | None = None
    panels: dict | None = None
    time_format: str | None = None

    OPTIONAL: ClassVar[dict] = {key: None for key in (
        "contours", "vectors", "colorbar_extend", "caption", "decorate", "panels",
        "time_format")}

    def __post_init__(self):
        w = self.KEY
        _check_int(w, "width", self.width, low=1)
        _check_int(w, "height", self.height, low=1)
        _check_number(w, "dpi", self.dpi, positive=True)
        _check_str(w, "cmap", self.cmap)
        if isinstance(self.map, Mapping):
            object.__setattr__(self, "map", MapSettings.from_params(self.map))
        elif not isinstance(self.map, MapSettings):
            raise _bad(w, "map", "a mapping of map settings", self.map)
        _check_str(w, "caption", self.caption, optional=True)
        _check_str(w, "time_format", self.time_format, optional=True)
        if self.colorbar_extend is not None:
            _check_str(w, "colorbar_extend", self.colorbar_extend,
                       choices=("auto", "neither", "min", "max", "both"))
        if self.panels is not None and not (isinstance(self.panels, Mapping)
                                            and isinstance(self.panels.get("panels"), list)):
            raise _bad(w, "panels", "null or a planned panel layout", self.panels)
        for key in ("contours", "vectors", "decorate", "panels"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, Mapping):
                raise _bad(w, key, "null or a mapping", value)
            if value is not None:
                object.__setattr__(self, key, dict(value))


@dataclass(frozen=True)
class EncodeSettings(_Settings):
    """How frames are encoded (config ``fps``, ``crf``, ``preset``; libx264, H.264).

    Attributes
    ----------
    fps : float
        Movie frames per second.
    crf : int
        libx264 constant rate factor, 0..51.
    preset : str
        libx264 speed/size preset.
    """

    KEY: ClassVar[str] = "encode"
    fps: float
    crf: int
    preset: str

    def __post_init__(self):
        _check_number(self.KEY, "fps", self.fps, positive=True)
        _check_int(self.KEY, "crf", self.crf, low=0, high=51)
        _check_str(self.KEY, "preset", self.preset)


@dataclass(frozen=True)
class CellsSettings(_Settings):
    """How the per-cell COPY rows are computed and written.

    The rule's ``cells`` params, i.e. config ``cells`` normalised by
    :func:`ncreel.cells.cells_settings`: ``CellsSettings.from_params(cells_settings(cells))``.

    Attributes
    ----------
    model : str
        ``field``, ``etr_risk`` or ``package.module:function``.
    params : dict
        The model's keyword arguments.
    geometry : str
        ``none``, ``text`` or ``postgis``.
    compression : str
        ``none``, ``gzip`` or ``zstd``.
    compression_level : int or None
        Level of the compressor (None: its default).
    suffix : str
        File-name suffix of the COPY files, from `compression`.
    layout : str
        ``wide`` (one table) or ``normalised`` (cells, steps and values tables and a view;
        :mod:`ncreel.pg.layout`).
    """

    KEY: ClassVar[str] = "cells"
    model: str
    params: dict
    geometry: str
    compression: str
    compression_level: int | None
    suffix: str
    layout: str

    def __post_init__(self):
        w = self.KEY
        _check_str(w, "layout", self.layout, choices=("wide", "normalised"))
        _check_str(w, "model", self.model)
        if not isinstance(self.params, Mapping):
            raise _bad(w, "params", "a mapping", self.params)
        object.__setattr__(self, "params", dict(self.params))
        _check_str(w, "geometry", self.geometry, choices=GEOMETRIES)
        _check_str(w, "compression", self.compression, choices=tuple(COPY_SUFFIXES))
        if self.compression_level is not None:
            _check_int(w, "compression_level", self.compression_level, low=1, high=19)
        if self.suffix != COPY_SUFFIXES[self.compression]:
            raise _bad(w, "suffix", f"{COPY_SUFFIXES[self.compression]!r} for compression "
                       f"{self.compression}", self.suffix)


@dataclass(frozen=True)
class Calibration(_Settings):
    """What the ``calibrate_render`` checkpoint measured: ``calibration.json``.

    Memory in MiB of resident memory, times in seconds (wall clock unless said).

    Attributes
    ----------
    width, height : int
        Frame size in pixels of the probe.
    dpi : float
    preset : str
    crf : int
        Encoder settings of the probe.
    probe_frames : int
        Frames rendered and encoded.
    base_mb : float
        The process before rendering.
    worker_peak_mb : float
        Its peak while rendering.
    encoder_peak_mb : float
        Its ffmpeg's peak.
    encoder_cpu_s_per_frame : float
        ffmpeg's CPU seconds per frame.
    startup_s : float
        Opening the input and building the figure.
    seconds_per_frame : float
        Drawing and encoding together, start-up included.
    render_s_per_frame : float
        Drawing alone.
    target_minutes : float
        Wanted wall time of one shard job.
    frames_per_shard : int
        Configured, or computed from `target_minutes` at the measured speed.
    workers : int
        Render worker processes per shard job.
    """

    KEY: ClassVar[str] = "calibration"
    width: int
    height: int
    dpi: float
    preset: str
    crf: int
    probe_frames: int
    base_mb: float
    worker_peak_mb: float
    encoder_peak_mb: float
    encoder_cpu_s_per_frame: float
    startup_s: float
    seconds_per_frame: float
    render_s_per_frame: float
    target_minutes: float
    frames_per_shard: int
    workers: int

    def __post_init__(self):
        w = self.KEY
        for key in ("width", "height", "probe_frames", "frames_per_shard", "workers"):
            _check_int(w, key, getattr(self, key), low=1)
        _check_int(w, "crf", self.crf, low=0, high=51)
        _check_str(w, "preset", self.preset)
        _check_number(w, "dpi", self.dpi, positive=True)
        _check_number(w, "target_minutes", self.target_minutes, positive=True)
        for key in ("base_mb", "worker_peak_mb", "encoder_peak_mb", "encoder_cpu_s_per_frame",
                    "startup_s", "seconds_per_frame", "render_s_per_frame"):
            _check_number(w, key, getattr(self, key), non_negative=True)

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> Calibration:
        """Read ``calibration.json``.

        Raises
        ------
        FileNotFoundError
            When there is no such file (the checkpoint has not run).
        NcreelError
            Naming the file when it is not JSON or a setting is missing or bad.
        """
        with open(path) as fh:
            text = fh.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise NcreelError(f"calibration file '{path}': {err}; delete it to measure "
                              "again") from None
        try:
            return cls.from_params(data)
        except NcreelError as err:
            raise NcreelError(f"calibration file '{path}': {err}; delete it to measure "
                              "again") from None

    def to_json(self, path: str | os.PathLike) -> None:
        """Write ``calibration.json`` atomically (the keys :meth:`from_json` reads)."""
        from ncreel.core.io import atomic_path

        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(self.to_params(), indent=2) + "\n")
