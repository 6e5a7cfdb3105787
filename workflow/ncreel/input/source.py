"""Open a NetCDF time series (one file or a glob of files split along time) lazily.

A Zarr store (:mod:`ncreel.input.zarrstore`) is one more kind of file here: opened by
:func:`_open`.

Only the header is read when a :class:`Series` is opened; :meth:`Series.read` reads one
slice of time steps, so memory is bounded by the slice (and one held time chunk), never by
the whole series. Files whose chunks along time are read whole (compressed NetCDF-4, Zarr;
:mod:`ncreel.input.chunking`) are read chunk-aware: consecutive reads decode each chunk
once (:meth:`Series._read_run`), and :meth:`Series.iter_blocks` ends its blocks on chunk
boundaries.
"""

from __future__ import annotations

import bisect
import glob
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import xarray as xr

from ncreel.core.errors import NcreelError
from ncreel.input import chunking
from ncreel.input.catalog import is_catalog, select_dataset
from ncreel.input.cfaxes import (
    _check_constant,
    _find_coordinate,
    _find_projection,
    _grid_array,
    _grid_dims,
    _grid_note,
    _is_spatial,
    _orientation,
    cf_bounds,
)
from ncreel.input.gridmap import GridMapping, edges_1d, unwrap_rows
from ncreel.input.mesh import Mesh, check_not_points, load_mesh, mesh_kind
from ncreel.input.timeaxis import (
    TimeAxis,
    _file_dates,
    _find_time,
    _time_order,
    detect_time_dim,
    time_order,
)
from ncreel.input.zarrstore import not_a_store_message, open_store, store_format, store_groups

log = logging.getLogger(__name__)

#: Default bound on one block read by :meth:`Series.iter_blocks` (the statistics pass).
BLOCK_BYTES = 64 * 2**20
#: Bound on values in one block of the rows passes (time steps x cells): keeps row columns
#: ~100 MB at most. Used by ncreel.jobs.shard and ncreel.cells.soil; modelled by
#: ncreel.run.resources.
MAX_BLOCK_CELLS = 1_000_000
#: Largest distance, in cells, between a cell's centre by the grid mapping and by the
#: file's 2-D latitude/longitude (:meth:`Series.check_one_geometry`): float32
#: coordinates are far closer; a quarter cell keeps each centre well inside its polygon.
GEOMETRY_TOLERANCE = 0.25


def _angle(lon1, lat1, lon2, lat2) -> np.ndarray:
    """Great-circle angle (degrees, on the sphere) between points; the haversine formula."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(
        np.radians(np.asarray(lon2) - lon1) / 2) ** 2
    return np.degrees(2 * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0))))


def stacked(parts: list[np.ndarray], empty_shape: tuple[int, ...],
            dtype=np.float64) -> np.ndarray:
    """Concatenate time blocks along axis 0 (no copy for one); an empty array for none."""
    if not parts:
        return np.empty(empty_shape, dtype=dtype)
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


class _Held(NamedTuple):
    """Steps of one time chunk already decoded, kept for the next reads.

    ``values[k]`` is file `file`'s own step ``first + k * every`` (those below `stop`).
    """

    file: int
    first: int
    stop: int
    every: int
    values: np.ndarray


@dataclass
class Series:
    """A lazily opened variable spread over one or more NetCDF files, seen as ``(time, y, x)``.

    ``y`` is latitude and ``x`` longitude when the grid has them, whatever the order of the
    dimensions in the file: rows run south to north and columns west to east with
    longitudes increasing (1-D longitudes are sorted, so a ±180 axis stored as 0…150,
    −180…−30 becomes −180…150). Cell ``iy * nx + ix`` is row ``iy``, column ``ix`` of that
    view. Use :func:`open_series` to build one.

    A grid in projection x/y (``x_name``/``y_name``: CF ``projection_x_coordinate``,
    ``grid_longitude``...) is seen with x and y increasing; with a CF grid mapping
    (``mapping``) its geographic latitude/longitude are computed from it where the file
    has no latitude/longitude variables (``lat_name``/``lon_name`` are then None).

    The whole input series runs over the steps in time order: every file's own steps,
    the files in order, or, where a step repeated from an earlier file was dropped or
    times were out of order, the ``(file, start, stop)`` runs of ``steps`` (half-open runs
    of file ``paths[file]``'s own indices, ascending within a run); ``counts[i]`` is the
    number of steps file ``i`` contributes. Of it, the series shows the steps of
    ``window`` (config ``time_range`` and ``time_every``: ``(start, stop, every)`` of the
    whole series' indices), or every step; time step ``t`` of the series (:meth:`read`,
    :meth:`time_axis`, ``n_time``) is step :meth:`input_index` ``(t)`` of the whole
    series.
    """

    paths: tuple[str, ...]
    variable: str
    time_dim: str
    y_dim: str
    x_dim: str
    select: dict
    counts: tuple[int, ...]
    ny: int
    nx: int
    dtype: np.dtype
    units: str
    long_name: str
    group: str | None = None
    lat_name: str | None = None
    lon_name: str | None = None
    time_name: str | None = None
    y_index: np.ndarray | None = None
    x_index: np.ndarray | None = None
    x_name: str | None = None
    y_name: str | None = None
    mapping: GridMapping | None = None
    steps: tuple | None = None
    note: str = ""
    window: tuple | None = None
    #: Which steps were out of time order in the files and are read in order ('' when
    #: none; part of :attr:`note` too).
    time_note: str = ""
    _datasets: list = field(default_factory=list, repr=False)
    _time: TimeAxis | None = field(default=None, repr=False)
    _lonlat: tuple | None = field(default=None, repr=False)
    #: Each file's :func:`_file_dates`, decoded once when the series was opened.
    _decoded: list | None = field(default=None, repr=False)
    #: Each variable's steps of the last time chunk read and not yet handed out
    #: (:meth:`_read_run`), by name; not passed on to a series built from this one (a
    #: region's cut reads its own).
    _held: dict = field(default_factory=dict, repr=False, init=False)
    #: Each file's and variable's :class:`ncreel.input.chunking.Chunking`, looked up once.
    _chunkings: dict = field(default_factory=dict, repr=False, init=False)
    #: Serialises opening files and the held chunks: a shard job's rows thread reads
    #: (a cell model's other variables) while its frames are read.
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False, init=False)

    @property
    def n_input(self) -> int:
        """Time steps of the whole input series (every file, repeated times dropped)."""
        return int(sum(self.counts))

    @property
    def n_time(self) -> int:
        """Time steps of the series: those of :attr:`window`, else all of :attr:`n_input`."""
        if self.window is None:
            return self.n_input
        return len(range(*self.window))

    def input_index(self, t):
        """Index in the whole input series of the series' step(s) `t` (int or int array).

        The per-cell table's ``time_index``: the same step has the same index whatever
        ``time_range`` and ``time_every`` a run shows.
        """
        if self.window is None:
            return t
        return self.window[0] + self.window[2] * t

    @property
    def has_lat_lon(self) -> bool:
        """Whether the cells have geographic latitude/longitude (from the file or a mapping)."""
        return (self.lat_name is not None and self.lon_name is not None) or (
            self.mapping is not None and self.x_name is not None)

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(n_time, ny, nx)``."""
        return (self.n_time, self.ny, self.nx)

    def spec(self) -> dict:
        """Plain-dict selection that reopens this series (a rule's ``series`` params).

        :meth:`ncreel.config.settings.SeriesSelection.from_params` reads it; its ``open()``
        reopens exactly this series (files in this time order, detected names).
        """
        return {"paths": list(self.paths),
                "variable": f"{self.group}/{self.variable}" if self.group else self.variable,
                "time_dim": self.time_dim, "select": dict(self.select), "lat": self.lat_name,
                "lon": self.lon_name, "time": self.time_name,
                "steps": None if self.steps is None else [list(run) for run in self.steps],
                # Only when set: the params of runs that show every step stay as they were.
                **({} if self.window is None else {"window": list(self.window)})}

    def _segments(self) -> tuple:
        """``(file, start, stop)`` runs of the files' own time indices, in time order."""
        if self.steps is None:
            return tuple((i, 0, n) for i, n in enumerate(self.counts))
        return self.steps

    def _time_parts(self, start: int, stop: int):
        """Yield ``(i, t0, part)`` for the series' steps ``start:stop``, in order.

        `i` is the file, `part` a slice of its own time indices (one per run of
        :attr:`steps`; with a ``window`` stride, a slice with that step) and `t0` the
        whole-series index of the step ``part.start``.
        """
        every = 1
        if self.window is not None and stop > start:
            first, _, every = self.window
            start, stop = first + start * every, first + (stop - 1) * every + 1
        offset = 0
        for i, a, b in self._segments():
            lo, hi = max(start - offset, 0), min(stop - offset, b - a)
            # The stride counts from `start` across runs: this run's first step of it.
            lo += -(offset + lo - start) % every
            if lo < hi:
                yield i, offset + lo, slice(a + lo, a + hi, every if every > 1 else None)
            offset += b - a
            if offset >= stop:
                break

    def _dataset(self, i: int) -> xr.Dataset:
        with self._lock:
            if self._datasets[i] is None:
                self._datasets[i] = _open(self.paths[i], self.group)
            return self._datasets[i]

    def _oriented(self, arr: np.ndarray) -> np.ndarray:
        """Put the last two axes of `arr`, in (y_dim, x_dim) order, south-north/west-east."""
        if self.y_index is not None:
            arr = arr[..., self.y_index, :]
        if self.x_index is not None:
            arr = arr[..., self.x_index]
        return arr

    def _values(self, da: xr.DataArray) -> np.ndarray:
        # One file's slice as (time, y, x) in file order (a mesh series overrides this).
        return da.transpose(self.time_dim, self.y_dim, self.x_dim).values

    def _checked_read(self, i: int, offset: int, name: str, part: slice, read):
        """``read(part)`` of file `i`; a read error is one line naming the exact step.

        `offset` is the global index of ``part.start``. A corrupt compressed chunk fails
        the whole slice with libnetcdf's bare "NetCDF: HDF error"; each step of `part` is
        then read alone to name the first one that fails (its index in the series, and in
        the file when they differ).
        """
        try:
            return read(part)
        except (RuntimeError, OSError) as err:  # netCDF4's bare "NetCDF: HDF error"
            bad, why = part.start, err
            for t in range(part.start, part.stop, part.step or 1):
                try:
                    read(slice(t, t + 1))
                except (RuntimeError, OSError) as one:
                    bad, why = t, one
                    break
            index = offset + bad - part.start
            own = "" if index == bad else f" (step {bad} of this file)"
            raise NcreelError(
                f"input '{self.paths[i]}': variable '{name}': cannot read time step {index}"
                f"{own} ({why}); the file is corrupt there: replace it with a good copy"
            ) from err

    def read(self, start: int, stop: int) -> np.ndarray:
        """Read time steps ``start:stop`` as a float array with NaN for missing cells.

        ``_FillValue``/``missing_value`` become NaN and ``scale_factor``/``add_offset`` are
        applied (CF section 8.1) by xarray's mask-and-scale decoding.

        Parameters
        ----------
        start, stop : int
            Half-open range of global time indices, ``0 <= start <= stop <= n_time``.

        Returns
        -------
        numpy.ndarray, shape (stop - start, ny, nx)
            float32 for float32 or packed 8/16-bit data, float64 otherwise; in the variable's
            units; rows south to north, columns west to east (see :class:`Series`).
        """
        if not 0 <= start <= stop <= self.n_time:
            raise ValueError(f"time slice {start}:{stop} outside 0:{self.n_time}")
        parts = []
        for i, offset, part in self._time_parts(start, stop):
            da = self._variable(i)
            values = self._checked_read(
                i, offset, self.variable, part, lambda run, i=i, da=da: self._read_run(i, da, run))
            parts.append(self._oriented(values))
        block = stacked(parts, (0, self.ny, self.nx), self.dtype)
        if not np.issubdtype(block.dtype, np.floating):
            block = block.astype(np.float64)
        return block

    # --- chunks along time read whole: each decoded once by consecutive reads --------
    def _variable(self, i: int, name: str | None = None) -> xr.DataArray:
        """Return the variable (or `name`) in file `i`, as read through :meth:`_values`."""
        return self._dataset(i)[name or self.variable]

    def file_chunking(self, i: int = 0, name: str | None = None) -> chunking.Chunking:
        """How file `i`'s variable (or its variable `name`) is chunked.

        See :func:`ncreel.input.chunking.time_chunking`.
        """
        key = (i, name or self.variable)
        if key not in self._chunkings:
            self._chunkings[key] = chunking.time_chunking(
                self._variable(i, name), self.time_dim,
                store=bool(self.paths[i]) and os.path.isdir(self.paths[i]))
        return self._chunkings[key]

    def _read_run(self, i: int, da: xr.DataArray, run: slice, name: str | None = None,
                  select: dict | None = None) -> np.ndarray:
        """File `i`'s own steps `run` of `da` as ``(time, y, x)`` in file order.

        One thread at a time (:attr:`_lock`): the held chunks are shared state.
        """
        with self._lock:
            return self._read_run_unlocked(i, da, run, name, select)

    def _read_run_unlocked(self, i: int, da: xr.DataArray, run: slice,
                           name: str | None = None, select: dict | None = None) -> np.ndarray:
        """Body of :meth:`_read_run`.

        `da` is the variable `name` (default the series'), read at the indices `select`
        (default :attr:`select`). Where the file's chunks along time are read whole
        (compressed NetCDF-4, Zarr; :attr:`ncreel.input.chunking.Chunking.read_whole`), a
        read ending inside a chunk also reads the chunk's later steps of the same stride
        and holds them (:attr:`_held`: one chunk of each variable at most, and at most
        :data:`ncreel.input.chunking.MAX_HELD_BYTES`) for the next reads, which a shard's
        frames and blocks are: each chunk is decoded once by consecutive reads, whatever
        their length. A step is handed out once: a read of it again decodes it again.
        """
        name = name or self.variable
        select = self.select if select is None else select
        every = run.step or 1
        steps = self.file_chunking(i, name).read_whole
        if steps is None or run.start >= run.stop:
            return self._values(da.isel({self.time_dim: run, **select}))
        parts, pos = [], run.start
        held = self._held.get(name)
        if held is not None and (held.file, held.every) == (i, every) and \
                held.first <= pos < held.stop and (pos - held.first) % every == 0:
            k = (pos - held.first) // every
            n = len(range(pos, min(run.stop, held.stop), every))
            parts.append(held.values[k:k + n])
            pos += n * every
            rest = held.values[k + n:]
            if len(rest):
                self._held[name] = held._replace(first=pos, values=rest)
            else:
                del self._held[name]
        if pos < run.stop:
            self._held.pop(name, None)  # done with: freed before the next chunk is decoded
            last = range(pos, run.stop, every)[-1]
            end = min((last // steps + 1) * steps, int(da.sizes[self.time_dim]))
            ahead = len(range(last + every, end, every))
            step_bytes = self.ny * self.nx * np.dtype(da.dtype).itemsize
            # A chunk larger than the bound (one along the whole time axis) is not held:
            # then it is decoded again by the next read, as it would be without this.
            hold = ahead and ahead * step_bytes <= chunking.MAX_HELD_BYTES
            values = self._values(da.isel({
                self.time_dim: slice(pos, end if hold else run.stop, every), **select}))
            n = len(range(pos, run.stop, every))
            parts.append(values[:n])
            if hold:
                self._held[name] = _Held(i, last + every, end, every, values[n:])
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def _chunk_keys(self, start: int, stop: int) -> np.ndarray:
        """Which chunk along time each of the steps ``start:stop`` is read from (int64).

        Equal keys for neighbouring steps: one chunk read whole. A step of a file whose
        steps are read alone has a key of its own.
        """
        keys = []
        for i, _, part in self._time_parts(start, stop):
            pos = np.arange(part.start, part.stop, part.step or 1, dtype=np.int64)
            steps = self.file_chunking(i).read_whole
            # file i's chunk number (steps read alone: every position its own "chunk")
            keys.append((i << 40) + (pos // steps if steps else pos))
        return np.concatenate(keys) if keys else np.empty(0, np.int64)

    def chunk_starts(self, start: int, stop: int) -> list[int]:
        """Return the steps of ``start + 1:stop`` that begin another time chunk, ascending.

        Where a block may end without a chunk being read by two blocks (see
        :meth:`_chunk_keys`).
        """
        keys = self._chunk_keys(start, stop)
        return (np.flatnonzero(keys[1:] != keys[:-1]) + 1 + start).tolist()

    def held_chunk_bytes(self, names: Sequence[str] | None = None) -> int:
        """Most bytes :meth:`read` holds between reads: the rest of one time chunk.

        At most :data:`ncreel.input.chunking.MAX_HELD_BYTES`; 0 when no file's chunks
        along time are read whole. The memory a job's estimate counts for it
        (:mod:`ncreel.run.resources`). With `names` (variables a job reads, by
        :meth:`read` and :meth:`read_variable`; default the series' own): the sum of
        each one's, held apart.
        """
        every = 1 if self.window is None else self.window[2]
        total = 0
        for name in dict.fromkeys([self.variable] if names is None else names):
            most = 0
            for i in dict.fromkeys(i for i, _, _ in self._segments()):
                c = self.file_chunking(i, name)
                if c.read_whole is None:
                    continue
                step_bytes = self.ny * self.nx * c.itemsize
                held = min(len(range(every, c.read_whole, every)),
                           chunking.MAX_HELD_BYTES // max(step_bytes, 1))
                most = max(most, held * step_bytes)
            total += most
        return total

    def read_variable(self, name: str, start: int, stop: int) -> np.ndarray:
        """Read another variable of the same files on the same grid (e.g. for a cell model).

        Parameters
        ----------
        name : str
            Variable with dims ``(time, y, x)`` or ``(y, x)`` (plus any dims in ``select``).
        start, stop : int
            Half-open range of global time indices (ignored for a ``(y, x)`` variable).

        Returns
        -------
        numpy.ndarray, float64
            Shape ``(stop - start, ny, nx)``, or ``(ny, nx)`` without a time dimension; NaN
            where missing (CF mask-and-scale applied); oriented as :meth:`read`.

        Raises
        ------
        NcreelError
            If the variable is missing or its dims are not the grid's (plus time).
        """
        ds = self._dataset(0)
        if name not in ds.variables:
            raise NcreelError(f"input '{self.paths[0]}': no variable '{name}' "
                              f"(variables: {', '.join(sorted(map(str, ds.data_vars)))})")
        da = ds[name]
        sel = {d: i for d, i in self.select.items() if d in da.dims}
        dims = set(da.dims) - set(sel)
        if dims == {self.y_dim, self.x_dim}:
            return self._oriented(np.asarray(
                da.isel(sel).transpose(self.y_dim, self.x_dim).values, dtype=np.float64))
        if dims != {self.time_dim, self.y_dim, self.x_dim}:
            raise NcreelError(f"input '{self.paths[0]}': variable '{name}' has dims "
                              f"({', '.join(map(str, da.dims))}); need ({self.time_dim}, "
                              f"{self.y_dim}, {self.x_dim}) or ({self.y_dim}, {self.x_dim})")
        parts = []
        for i, offset, run in self._time_parts(start, stop):
            var = self._dataset(i)[name]
            values = self._checked_read(
                i, offset, name, run,
                lambda r, i=i, var=var: self._read_run(i, var, r, name, sel))
            parts.append(self._oriented(np.asarray(values, np.float64)))
        return stacked(parts, (0, self.ny, self.nx))

    def iter_blocks(self, start: int, stop: int, max_bytes: int = BLOCK_BYTES):
        """Yield ``(t0, block)`` for consecutive slices of ``start:stop``, each ≤ `max_bytes`.

        A block ends where a time chunk read whole ends (:meth:`chunk_starts`) when one
        ends inside it, so that no chunk is read by two blocks; the last ends at `stop`.

        Parameters
        ----------
        start, stop : int
            Half-open range of global time indices.
        max_bytes : int
            Upper bound on one block's size in bytes (at least one time step is always read).

        Yields
        ------
        t0 : int
            Global index of the block's first time step.
        block : numpy.ndarray, shape (n, ny, nx)
            As returned by :meth:`read`.
        """
        step_bytes = max(self.ny * self.nx * 8, 1)
        n = max(1, int(max_bytes // step_bytes))
        starts = self.chunk_starts(start, stop)
        t0 = start
        while t0 < stop:
            t1 = min(t0 + n, stop)
            k = bisect.bisect_right(starts, t1) - 1  # the last chunk start <= t1
            if t1 < stop and k >= 0 and t0 < starts[k] < t1:
                t1 = starts[k]
            yield t0, self.read(t0, t1)
            t0 = t1

    def time_axis(self) -> TimeAxis:
        """Return the concatenated time coordinate, decoded where CF allows.

        The coordinate is ``time_name`` (configured ``time``, the time dimension's
        coordinate variable, or a time variable named in the data variable's
        ``coordinates`` attribute such as WRF's ``XTIME``, else a character array of dates
        such as WRF's ``Times``). Numbers are decoded with ``cftime.num2date`` and the
        file's ``units`` and ``calendar``, so 360-day and other calendars keep their own
        dates; ISO 8601 strings are parsed in that calendar. A step whose value is missing
        (``_FillValue``) or unreadable has label ``None``; the others still decode.
        :attr:`TimeAxis.note` says what was not decoded and why.
        """
        if self._time is not None:
            return self._time
        values, labels, notes = [], [], []
        calendar, units = "standard", ""
        files: dict = {}
        for i, a, b in self._segments():
            if i not in files:
                if self._decoded is not None:
                    files[i] = self._decoded[i]
                else:
                    ds = self._dataset(i)
                    files[i] = _file_dates(ds, self.time_name, int(ds.sizes[self.time_dim]))
                if files[i][4]:
                    notes.append(f"{self.paths[i]}: {files[i][4]}")
            raw, dates, units, calendar, _ = files[i]
            values.append(raw[a:b])
            labels.extend(d.isoformat() if d is not None else None for d in dates[a:b])
        shown = slice(*self.window) if self.window is not None else slice(None)
        values = np.concatenate(values)[shown] if values else np.empty(0)
        labels = labels[shown]
        self._time = TimeAxis(
            values=values,
            labels=labels,
            calendar=calendar,
            units=units,
            decoded=any(lab is not None for lab in labels),
            note="; ".join(notes),
            name=self.time_name or self.time_dim,
        )
        return self._time

    def cell_coordinates(self, continuous: bool = False
                         ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Latitude and longitude of every cell centre, oriented as :meth:`read`.

        Parameters
        ----------
        continuous : bool
            Unwrap 2-D longitudes (modulo 360 degrees) along each row and shift each row
            by whole turns onto the one before, so that no neighbouring cells are 360
            degrees apart where a curvilinear grid crosses the dateline (values may then
            leave -180..360); for drawing and for cell edges. False gives the longitudes
            as stored.

        Returns
        -------
        lat, lon : numpy.ndarray, shape (ny, nx), float64, degrees; or None
            From 1-D latitude/longitude dimension coordinates, or from 2-D auxiliary
            coordinates (CF section 5.2, curvilinear grids) such as those named in the
            variable's ``coordinates`` attribute (a leading time dimension, as in WRF's
            ``XLAT(Time, south_north, west_east)``, is dropped: they are checked to be
            constant in time when the series is opened); else computed from the CF grid
            mapping and the projection x/y (pyproj, to the mapping's own geographic CRS;
            NaN outside the projection's domain). ``None`` when the grid has neither
            (projected x/y without a mapping, or plain indices).
        """
        if self.lat_name is None or self.lon_name is None:
            if self.mapping is None or self.x_name is None:
                return None, None
            if self._lonlat is None:
                x, y = self.grid_xy()
                lon, lat = self.mapping.to_lonlat(*np.meshgrid(x, y))
                self._lonlat = (lat, lon)
            lat, lon = self._lonlat
            return lat.copy(), (unwrap_rows(lon) if continuous else lon.copy())
        ds = self._dataset(0)
        lat = self._oriented(_grid_array(ds, self.lat_name, self.y_dim, self.x_dim,
                                                self.time_dim))
        lon = self._oriented(_grid_array(ds, self.lon_name, self.y_dim, self.x_dim,
                                                self.time_dim))
        if continuous and ds[self.lon_name].ndim - (self.time_dim in ds[self.lon_name].dims) == 2:
            lon = unwrap_rows(lon)
        elif continuous:
            # 1-D longitudes of a box stored across the file's 0/360 seam (0.5, 325.5 ...
            # 355.5): continuous, so the map shows the box and not a world-wide strip;
            # kept as stored when that is not narrower (global grids, in any order).
            unwrapped = unwrap_rows(lon)
            if (np.nanmax(unwrapped) - np.nanmin(unwrapped)
                    < np.nanmax(lon) - np.nanmin(lon) - 1e-9):
                lon = unwrapped
        return lat, lon

    def check_one_geometry(self) -> None:
        """Stop when the grid mapping and the file's 2-D latitude/longitude disagree.

        A grid with both places its cells twice: the table's ``lat``/``lon`` come from the
        file's latitude/longitude, its polygons (and the frames) from the mapping. Each
        cell's two centres must lie within :data:`GEOMETRY_TOLERANCE` of a cell of each
        other (great-circle angle against the smaller spacing of the mapping's centres
        around it, on the sphere); cells either source leaves undefined (NaN) are not
        compared.

        Raises
        ------
        NcreelError
            One line naming the worst cell (the file's indices), both positions and how
            many cells apart they are.
        """
        if self.mapping is None or self.x_name is None or self.lat_name is None \
                or self.lon_name is None:
            return
        x, y = self.grid_xy()
        lon_m, lat_m = self.mapping.to_lonlat(*np.meshgrid(x, y))
        lat_f, lon_f = self.cell_coordinates()
        apart = _angle(lon_m, lat_m, lon_f, lat_f)
        # Each cell's spacing: the smallest step to a neighbour, along rows or columns.
        spacing = np.full(apart.shape, np.inf)
        every = slice(None)
        for lo, hi in (((slice(None, -1), every), (slice(1, None), every)),
                       ((every, slice(None, -1)), (every, slice(1, None)))):
            step = _angle(lon_m[lo], lat_m[lo], lon_m[hi], lat_m[hi])
            spacing[lo] = np.fmin(spacing[lo], step)
            spacing[hi] = np.fmin(spacing[hi], step)
        with np.errstate(invalid="ignore", divide="ignore"):
            cells = apart / spacing
        cells[~np.isfinite(cells)] = 0.0
        j, i = np.unravel_index(int(np.argmax(cells)), cells.shape)
        if cells[j, i] <= GEOMETRY_TOLERANCE:
            return
        jf = int(self.y_index[j]) if self.y_index is not None else int(j)
        if_ = int(self.x_index[i]) if self.x_index is not None else int(i)
        raise NcreelError(
            f"input '{self.paths[0]}': grid mapping {self.mapping.describe()} and the "
            f"file's '{self.lat_name}'/'{self.lon_name}' place the cells differently: cell "
            f"({self.y_dim}={jf}, {self.x_dim}={if_}) is at lat {lat_m[j, i]:.4f}, lon "
            f"{lon_m[j, i]:.4f} by the mapping and at lat {lat_f[j, i]:.4f}, lon "
            f"{lon_f[j, i]:.4f} by '{self.lat_name}'/'{self.lon_name}', {cells[j, i]:.3g} "
            f"cells apart (at most {GEOMETRY_TOLERANCE:g} allowed): correct the mapping's "
            "parameters, or remove the variable's grid_mapping attribute to place the "
            f"cells by '{self.lat_name}'/'{self.lon_name}' alone (ncatted -a "
            f"grid_mapping,{self.variable},d,, FILE)")

    def grid_xy(self) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """Projection x and y of the columns and rows, oriented as :meth:`read`.

        Returns
        -------
        x, y : numpy.ndarray, shapes (nx,) and (ny,), float64, in the file's units; or None
            The grid's 1-D projection x/y coordinates (None when it has none).
        """
        if self.x_name is None or self.y_name is None:
            return None, None
        ds = self._dataset(0)
        x = np.asarray(ds[self.x_name].values, np.float64)
        y = np.asarray(ds[self.y_name].values, np.float64)
        if self.x_index is not None:
            x = x[self.x_index]
        if self.y_index is not None:
            y = y[self.y_index]
        return x, y

    def cell_corners(self, continuous: bool = False
                     ) -> tuple[np.ndarray, np.ndarray] | None:
        """Exact geographic cell corners of a grid with a CF grid mapping.

        The cell edges in projection x/y (from the coordinates' CF ``bounds``, else
        midpoints between centres, the outer ones half a cell out;
        :func:`ncreel.input.gridmap.edges_1d`) transformed to longitude/latitude by the mapping.

        Parameters
        ----------
        continuous : bool
            Longitudes unwrapped along rows (as :meth:`cell_coordinates`), for drawing.

        Returns
        -------
        lon, lat : numpy.ndarray, shape (ny + 1, nx + 1), float64, degrees; or None
            Corner ``[j, i]`` is the lower-left corner of cell ``(j, i)`` in index space;
            NaN outside the projection's domain. None without a mapping and 1-D x/y.
        """
        if self.mapping is None or self.x_name is None or self.y_name is None:
            return None
        ds = self._dataset(0)
        if ds[self.x_name].dims != (self.x_dim,) or ds[self.y_name].dims != (self.y_dim,):
            return None
        x, y = self.grid_xy()
        edges = []
        for name, centres, index in ((self.x_name, x, self.x_index),
                                     (self.y_name, y, self.y_index)):
            b = cf_bounds(ds, name)
            if b is not None and index is not None:
                b = b[index]
            edges.append(edges_1d(centres, b))
        lon, lat = self.mapping.to_lonlat(*np.meshgrid(edges[0], edges[1]))
        return (unwrap_rows(lon) if continuous else lon), lat

    def coordinate_bounds(self, kind: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Lower and upper edges of 1-D latitude (``"lat"``) or longitude (``"lon"``) cells.

        From the coordinate's CF ``bounds`` variable (section 7.1), oriented as
        :meth:`read`; ``None`` when there is none or the coordinate is 2-D.

        Returns
        -------
        (lo, hi) : tuple of numpy.ndarray, each shape (ny,) or (nx,), degrees; or None
        """
        name = self.lat_name if kind == "lat" else self.lon_name
        ds = self._dataset(0)
        if name is None or ds[name].ndim != 1:
            return None
        b = cf_bounds(ds, name)
        if b is None:
            return None
        index = self.y_index if kind == "lat" else self.x_index
        if index is not None:
            b = b[index]
        return b.min(axis=1), b.max(axis=1)

    def axis_label(self, kind: str) -> str:
        """Axis label of latitude (``"lat"``) or longitude (``"lon"``) from CF attributes.

        ``long_name`` (else ``standard_name``, else the name) and ``[units]``; the plain
        dimension name when the grid has no such coordinate.
        """
        name = self.lat_name if kind == "lat" else self.lon_name
        if name is None and self.mapping is not None and self.x_name is not None:
            return "latitude" if kind == "lat" else "longitude"
        if name is None:
            name = self.y_name if kind == "lat" else self.x_name
        if name is None:
            return self.y_dim if kind == "lat" else self.x_dim
        attrs = self._dataset(0)[name].attrs
        text = str(attrs.get("long_name") or attrs.get("standard_name") or name)
        return f"{text} [{attrs['units']}]" if attrs.get("units") else text

    def close(self) -> None:
        """Close every file this series opened."""
        for ds in self._datasets:
            if ds is not None:
                ds.close()
        self._datasets = [None] * len(self.paths)
        self._held.clear()

    def __enter__(self) -> Series:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def resolve_paths(input: str | Sequence[str] | Mapping, variable: str | None = None
                  ) -> list[str]:
    """Expand a NetCDF path, glob, or list of them into a sorted list of existing files.

    A name that exists as given is that file, even when it holds glob characters
    (``run[1].nc``); otherwise such a name is a glob. A Zarr store (a directory) is a
    file here. A catalog (``{"catalog": PATH, "query": {...}}``) is the assets of its one
    matching dataset (:func:`ncreel.input.catalog.select_dataset`, which `variable` helps
    choose where the catalog joins several variables).

    Raises
    ------
    NcreelError
        If nothing matches, or a named path is missing, a directory, not a regular file (a
        FIFO, a device), a symbolic link loop or a dangling link, or not readable; the
        message says which.
    """
    if is_catalog(input):
        input = list(select_dataset(input, variable).paths)
    patterns = [input] if isinstance(input, str | os.PathLike) else list(input)
    if not patterns or patterns == [""]:
        raise NcreelError("config key 'input': no NetCDF path given (set input=PATH or a glob)")
    paths: list[str] = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if glob.has_magic(pattern) and not os.path.lexists(pattern):
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise NcreelError(f"input '{pattern}': no file matches this glob")
        else:
            matches = [pattern]
        for path in matches:
            _check_input_file(path)
            paths.append(path)
    return paths


def _check_input_file(path: str) -> None:
    """One line saying why `path` cannot be read as an input file (the real reason)."""
    import errno
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise NcreelError(f"input '{path}': a symbolic link to '{os.readlink(path)}', "
                              "which does not exist") from None
        raise NcreelError(f"input '{path}': file not found") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NcreelError(f"input '{path}': a loop of symbolic links: point it at the "
                              "NetCDF file itself") from None
        raise NcreelError(f"input '{path}': cannot be examined ({err.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        if store_format(path) is None:
            raise NcreelError(not_a_store_message(path))
        if not os.access(path, os.R_OK | os.X_OK):
            raise NcreelError(f"input '{path}': Zarr store cannot be read (permission "
                              "denied): ask its owner for read access, or copy it")
        return
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise NcreelError(f"input '{path}': is {kind}, not a file: NetCDF is read by "
                          "position, so give the file itself (copy a stream to disk first)")
    if not os.access(path, os.R_OK):
        raise NcreelError(f"input '{path}': cannot be read (permission denied): ask its "
                          "owner for read access, or copy it")


def _open(path: str, group: str | None = None) -> xr.Dataset:
    if os.path.isdir(path):
        return open_store(path, group)
    try:
        # decode_times=False: time is decoded by us, so undecodable units never fail the open.
        return xr.open_dataset(path, group=group, decode_times=False, mask_and_scale=True,
                               cache=False)
    except OSError as err:
        if group and "group" in str(err).lower():
            raise NcreelError(f"input '{path}': no group '{group}' (groups: "
                              f"{', '.join(_groups(path)) or 'none'})") from err
        raise NcreelError(f"input '{path}': not a readable NetCDF file ({err}): it may be "
                          "truncated or corrupt; copy it again completely") from err
    except UnicodeDecodeError:  # a ValueError: netCDF4 decodes names strictly
        from ncreel.input.netcdf3 import not_utf8_error

        raise not_utf8_error(path) from None
    except ValueError as err:  # xarray: no backend recognises the file's first bytes
        raise NcreelError(f"input '{path}': not a readable NetCDF file (neither NetCDF-4/HDF5 "
                          "nor classic NetCDF): check the path, or re-download the file") from err
    except Exception as err:  # netCDF4/h5 raise many types; the user needs the file name
        raise NcreelError(f"input '{path}': not a readable NetCDF file ({err})") from err


def _groups(path: str) -> list[str]:
    """Paths of every NetCDF-4 group of `path` (``a``, ``a/b``, ...), for error messages."""
    import netCDF4

    if os.path.isdir(path):
        return store_groups(path)
    found = []
    with netCDF4.Dataset(path) as nc:
        todo = list(nc.groups.values())
        while todo:
            g = todo.pop(0)
            found.append(g.path.strip("/"))
            todo.extend(g.groups.values())
    return found


def split_variable(variable: str) -> tuple[str | None, str]:
    """Split ``"group/sub/name"`` into the NetCDF-4 group path and the variable name."""
    group, _, name = str(variable).strip("/").rpartition("/")
    return (group or None), name


def open_series(input: str | Sequence[str], variable: str, *, time_dim: str | None = None,
                select: Mapping[str, int] | None = None, lat: str | None = None,
                lon: str | None = None, time: str | None = None,
                steps: Sequence | None = None, window: Sequence | None = None) -> Series:
    """Open `variable` over one or more NetCDF files lazily, validating its shape.

    Multiple files (a glob) are joined along time in the order of their first time value
    (file names are not data). Each must have the same grid. Steps are read in time order:
    times out of order inside a file or across files (one file's times between
    another's) are put in order, and :attr:`Series.note` says so; where that order cannot
    be decided (steps without a time among steps out of order; several files of different
    calendars, or one without a time to place it by) the run stops
    (:func:`ncreel.input.timeaxis.time_order`). A time in a later file that an earlier file
    already has (a re-run month saved beside the original, a restart file) is one step:
    when the data of both are equal, the later file's step is dropped and
    :attr:`Series.note` says so; when they differ, an error names both files and the
    times. Latitude and longitude are found by CF attributes
    (``standard_name``, ``units``, ``axis``, ``_CoordinateAxisType``) among the dimension
    coordinates and the 1-D/2-D auxiliary coordinates on the variable's grid, whatever the
    order of the variable's dimensions; see :class:`Series` for the resulting orientation.

    Parameters
    ----------
    input : str or sequence of str or mapping
        NetCDF path, glob, or list of them (Zarr stores among them); or a catalog query
        (see :func:`resolve_paths`).
    variable : str
        Name of the data variable to show; ``GROUP/NAME`` for one in a NetCDF-4 group.
    time_dim : str, optional
        Time dimension name; detected when omitted (see :func:`detect_time_dim`).
    select : mapping of str to int, optional
        Index to pick along each extra dimension (e.g. ``{"level": 0}``).
    lat, lon : str, optional
        Names of the latitude / longitude coordinate variables (1-D or 2-D), when detection
        cannot decide.
    time : str, optional
        Name of the time coordinate variable (numeric with CF units, or ISO 8601 strings).
    steps : sequence, optional
        The ``(file, start, stop)`` runs of the files' own time indices in time order (a
        :meth:`Series.spec`'s ``steps``; `file` indexes the files in time order): the
        decisions on repeated times and time order made when the series was first
        opened, taken as they are (no data compared).
    window : sequence of 3 int, optional
        ``(start, stop, every)``: the steps of the whole series the series shows (config
        ``time_range`` and ``time_every``, :func:`ncreel.input.timeaxis.time_window`);
        None shows every step.

    Returns
    -------
    Series
        With ``shape == (n_time, ny, nx)``.

    Raises
    ------
    NcreelError
        Missing file, unknown variable (lists the variables and groups), no/ambiguous time
        dimension (lists the dims), ambiguous or unusable latitude/longitude/time
        coordinates (lists the candidates), a variable that is not 2-D per time step (lists
        the extra dims), a bad `select`, an empty time axis, a grid that changes in time,
        files whose grids differ, files that hold the same time with different data, or
        times whose order cannot be decided.
    """
    paths = resolve_paths(input, variable)
    select = {str(k): v for k, v in dict(select or {}).items()}
    if not variable:
        raise NcreelError("config key 'variable': no variable given (set variable=NAME)")
    group, name = split_variable(variable)
    first = _open(paths[0], group)
    datasets = [first]
    where = f"input '{paths[0]}'"
    try:
        if name not in first.variables:
            names = ", ".join(sorted(str(v) for v in first.data_vars)) or "none"
            groups = _groups(paths[0])
            hint = (f"; groups: {', '.join(groups)}; name a variable in a group as "
                    "variable=GROUP/NAME") if groups else ""
            raise NcreelError(f"{where}: no variable '{name}'"
                              f"{f' in group {group!r}' if group else ''} "
                              f"(variables: {names}{hint})")
        for key, value in (("lat", lat), ("lon", lon), ("time", time)):
            if value is not None and value not in first.variables:
                raise NcreelError(f"config key '{key}': {where} has no variable '{value}' "
                                  f"(variables: {', '.join(sorted(map(str, first.variables)))})")
        da = first[name]
        # Unstructured meshes (MPAS, ICON, UGRID, HEALPix, CF bounds): see ncreel.input.mesh.
        found = mesh_kind(first, da)
        if found is not None:
            return _with_window(open_mesh_series(
                paths, group, name, datasets, *found, time_dim=time_dim, select=select,
                time=time, where=where, steps=steps), window)
        if time_dim is None and time is not None and first[time].ndim == 1 \
                and first[time].dims[0] in da.dims:
            time_dim = str(first[time].dims[0])
        tdim = detect_time_dim(first, name, time_dim, select, source=where)
        for dim, index in select.items():
            if dim not in da.dims:
                raise NcreelError(f"config key 'select': '{dim}' is not a dimension of "
                                  f"'{name}' (its dims: {', '.join(map(str, da.dims))})")
            if dim == tdim:
                raise NcreelError(f"config key 'select': '{dim}' is the time dimension")
            if not isinstance(index, int) or isinstance(index, bool) or not (
                    -da.sizes[dim] <= index < da.sizes[dim]):
                raise NcreelError(f"config key 'select': {dim}={index!r} must be an integer "
                                  f"index in 0..{da.sizes[dim] - 1}")
        chosen = [str(d) for d in select if _is_spatial(d, first.variables.get(d))]
        if chosen:
            raise NcreelError(
                f"{where}: '{chosen[0]}' of variable '{name}' is a spatial dimension of its "
                f"grid: sel and select take one value of an extra dimension (a level, a "
                f"member), not of the grid; to cut the grid use region")
        spatial = [str(d) for d in da.dims if d != tdim and d not in select]
        check_not_points(first, da, tdim, spatial, where)  # cells without a mesh
        if len(spatial) != 2:
            extra = [d for d in spatial if not _is_spatial(d, first.variables.get(d))]
            if len(spatial) > 2:
                raise NcreelError(
                    f"{where}: variable '{name}' is not 2-D per time step: extra "
                    f"dims {', '.join(map(str, extra or spatial))} (sizes "
                    f"{', '.join(f'{d}={da.sizes[d]}' for d in (extra or spatial))}); "
                    f"pick one of each by coordinate value with config key sel or by "
                    f"index with select, e.g. --config 'select={{{(extra or spatial)[0]}: 0}}'")
            raise NcreelError(f"{where}: variable '{name}' has dims "
                              f"({', '.join(map(str, da.dims))}); need time plus two spatial "
                              "dims (y, x)")
        lat_name = _find_coordinate(first, da, "lat", lat, tdim, spatial, where)
        lon_name = _find_coordinate(first, da, "lon", lon, tdim, spatial, where)
        if lat_name is None or lon_name is None:
            if lat_name or lon_name:
                log.warning("%s: '%s' has only one of latitude/longitude (%s); not used",
                            where, name, lat_name or lon_name)
            lat_name = lon_name = None
        x_name = y_name = mapping = None
        one_d = lat_name is not None and first[lat_name].ndim == 1 and first[lon_name].ndim == 1
        if not one_d:  # projection x/y and their CF grid mapping (none on a lat/lon grid)
            x_name, y_name, mapping = _find_projection(first, da, spatial, where, name,
                                                       has_lat_lon=lat_name is not None)
        if lat_name is None and x_name is not None:
            y_dim, x_dim = str(first[y_name].dims[0]), str(first[x_name].dims[0])
        else:
            y_dim, x_dim = _grid_dims(first, spatial, lat_name, lon_name, tdim)
        time_name = _find_time(first, da, tdim, time, where)
        ny, nx = int(da.sizes[y_dim]), int(da.sizes[x_dim])
        y_index = x_index = None
        if lat_name is not None:
            for coord in (lat_name, lon_name):
                _check_constant(first, coord, tdim, where)
            y_index, x_index = _orientation(first, lat_name, lon_name, y_dim, x_dim, tdim)
        elif x_name is not None:  # x and y increasing
            y_index, x_index = _orientation(first, y_name, x_name, y_dim, x_dim, tdim)
        _grid_note(where, name, lat_name, x_name, y_name, mapping, (y_dim, x_dim))
        # float32 stays float32 (halves memory); packed ints decode to float via xarray.
        dtype = np.dtype(np.float32) if da.dtype == np.float32 else np.dtype(np.float64)
        units = str(da.attrs.get("units", ""))
        long_name = str(da.attrs.get("long_name") or da.attrs.get("standard_name") or name)
        counts = [int(da.sizes[tdim])]
        for path in paths[1:]:
            ds = _open(path, group)
            datasets.append(ds)
            if name not in ds.variables:
                raise NcreelError(f"input '{path}': no variable '{name}' "
                                  f"(it is in '{paths[0]}')")
            other = ds[name]
            if tdim not in other.dims:
                raise NcreelError(f"input '{path}': '{name}' has no dimension '{tdim}'")
            if (int(other.sizes.get(y_dim, -1)), int(other.sizes.get(x_dim, -1))) != (ny, nx):
                raise NcreelError(f"input '{path}': grid of '{name}' differs from "
                                  f"'{paths[0]}' (expected {y_dim}={ny}, {x_dim}={nx})")
            counts.append(int(other.sizes[tdim]))
        order, kept, segments, note = _series_steps(datasets, paths, name, tdim, select,
                                                    time_name, counts, steps)
    except BaseException:
        for ds in datasets:
            ds.close()
        raise
    series = Series(paths=tuple(paths[i] for i in order), variable=name, time_dim=tdim,
                    y_dim=y_dim, x_dim=x_dim, select=select, counts=kept, ny=ny, nx=nx,
                    dtype=dtype, units=units, long_name=long_name, group=group,
                    lat_name=lat_name, lon_name=lon_name, time_name=time_name,
                    y_index=y_index, x_index=x_index, x_name=x_name, y_name=y_name,
                    mapping=mapping, steps=segments, note=note, time_note=order.time_note,
                    _datasets=[datasets[i] for i in order], _decoded=order.decoded)
    if series.n_time == 0:
        series.close()
        raise NcreelError(f"{where}: time dimension '{tdim}' of '{name}' is empty (0 steps)")
    return _with_window(series, window)


def _with_window(series: Series, window: Sequence | None) -> Series:
    """`series` showing the steps ``start:stop:every`` of `window` (None: every step)."""
    if window is None:
        return series
    start, stop, every = (int(v) for v in window)
    if not (0 <= start < stop <= series.n_input and every >= 1):
        n = series.n_input
        series.close()
        raise NcreelError(f"input '{series.paths[0]}': has {n} time steps, the run's plan "
                          f"shows steps {start}..{stop - 1} (every {every}): the files "
                          "changed since the run was planned; start a new run")
    series.window = (start, stop, every)
    series._time = None  # the time axis of the steps shown
    return series


class MeshSeries(Series):
    """A :class:`Series` on the faces of an unstructured mesh (:mod:`ncreel.input.mesh`).

    Seen as ``(time, 1, n_face)``: ``ny == 1``, ``nx == n_face``, cell id = face index in
    the file's order. :attr:`mesh` holds the faces (see :class:`ncreel.input.mesh.Mesh`).
    """

    mesh: Mesh

    @property
    def has_lat_lon(self) -> bool:
        """True: a mesh's faces have geographic longitudes/latitudes."""
        return True

    def _values(self, da: xr.DataArray) -> np.ndarray:
        return da.transpose(self.time_dim, self.x_dim).values[:, None, :]

    def read_variable(self, name: str, start: int, stop: int) -> np.ndarray:
        """Read another face variable of the same files (as :meth:`Series.read_variable`).

        Returns shape ``(stop - start, 1, n_face)``, or ``(1, n_face)`` without time.
        """
        ds = self._dataset(0)
        if name not in ds.variables:
            raise NcreelError(f"input '{self.paths[0]}': no variable '{name}'")
        da = ds[name]
        sel = {d: i for d, i in self.select.items() if d in da.dims}
        dims = set(map(str, da.dims)) - set(sel)
        if dims == {self.x_dim}:
            return np.asarray(da.isel(sel).values, np.float64)[None, :]
        if dims != {self.time_dim, self.x_dim}:
            raise NcreelError(f"input '{self.paths[0]}': variable '{name}' has dims "
                              f"({', '.join(map(str, da.dims))}); need ({self.time_dim}, "
                              f"{self.x_dim}) or ({self.x_dim})")
        parts = []
        for i, _, run in self._time_parts(start, stop):  # chunk-aware, as read()
            values = self._read_run(i, self._dataset(i)[name], run, name, sel)
            parts.append(np.asarray(values, np.float64))
        return stacked(parts, (0, 1, self.nx))

    def cell_coordinates(self, continuous: bool = False):
        """Face-centre latitude and longitude, each shape (1, n_face), degrees.

        Longitudes in [-180, 180); with `continuous`, a regional mesh's longitudes start
        after the widest gap between them (a Pacific mesh across 180 degrees runs e.g.
        150 to 210), so that the map is centred on it.
        """
        lon = self.mesh.face_lon.copy()
        if continuous and lon.size > 1:
            order = np.sort(lon)
            gaps = np.diff(np.concatenate([order, order[:1] + 360.0]))
            k = int(np.argmax(gaps))
            start = order[(k + 1) % order.size]
            lon = start + (lon - start) % 360.0
        return self.mesh.face_lat[None, :].copy(), lon[None, :]

    def coordinate_bounds(self, kind: str):
        """None: a mesh's cells are polygons (see :attr:`mesh`), not 1-D bounds."""
        return None

    def axis_label(self, kind: str) -> str:
        """``longitude`` / ``latitude`` (of the face centres)."""
        return "longitude" if kind == "lon" else "latitude"

    def spec(self) -> dict:
        """As :meth:`Series.spec`; the mesh is found again on reopening."""
        spec = super().spec()
        spec["lat"] = spec["lon"] = None
        return spec


def open_mesh_series(paths: list[str], group: str | None, name: str, datasets: list,
                     kind: str, face_dim: str, others: dict, *, time_dim: str | None,
                     select: dict, time: str | None, where: str,
                     steps=None) -> MeshSeries:
    """Open `name` on a mesh (see :func:`ncreel.input.mesh.mesh_kind`) as a :class:`MeshSeries`.

    `datasets` holds the first file opened (more are appended here, for the caller to
    close on error).

    Raises
    ------
    NcreelError
        A variable on nodes or edges, extra dims without ``select`` (with an example),
        no or ambiguous time dimension, an unreadable mesh, files whose meshes differ.
    """
    first = datasets[0]
    da = first[name]
    dims = [str(d) for d in da.dims]
    on = [d for d in dims if d in others and d != face_dim]
    if face_dim not in dims:
        what = others.get(on[0], "node") if on else "node"
        raise NcreelError(
            f"{where}: variable '{name}' is on the {kind} mesh's {what}s (dimension "
            f"{on[0] if on else ', '.join(dims)}), not its faces ({face_dim}); ncreel draws "
            f"and tables face variables: choose a variable with dimension {face_dim}")
    if time_dim is None and time is not None and first[time].ndim == 1 \
            and first[time].dims[0] in da.dims:
        time_dim = str(first[time].dims[0])
    # As for grids (never a guess); the face dimension is never time.
    tdim = detect_time_dim(first, name, time_dim, {**select, face_dim: 0}, source=where)
    for dim, index in select.items():
        if dim not in dims:
            raise NcreelError(f"config key 'select': '{dim}' is not a dimension of "
                              f"'{name}' (its dims: {', '.join(dims)})")
        if dim in (tdim, face_dim):
            raise NcreelError(f"config key 'select': '{dim}' is the "
                              f"{'time' if dim == tdim else 'mesh face'} dimension")
        if not isinstance(index, int) or isinstance(index, bool) or not (
                -da.sizes[dim] <= index < da.sizes[dim]):
            raise NcreelError(f"config key 'select': {dim}={index!r} must be an integer "
                              f"index in 0..{da.sizes[dim] - 1}")
    extra = [d for d in dims if d not in (tdim, face_dim) and d not in select]
    if extra:
        raise NcreelError(
            f"{where}: variable '{name}' on the {kind} mesh has extra dims "
            f"{', '.join(extra)} (sizes {', '.join(f'{d}={da.sizes[d]}' for d in extra)}); "
            f"pick one index of each with config key select, e.g. "
            f"--config 'select={{{extra[0]}: 0}}'")
    mesh = load_mesh(first, da, kind, face_dim, where)
    time_name = _find_time(first, da, tdim, time, where)
    dtype = np.dtype(np.float32) if da.dtype == np.float32 else np.dtype(np.float64)
    counts = [int(da.sizes[tdim])]
    for path in paths[1:]:
        ds = _open(path, group)
        datasets.append(ds)
        if name not in ds.variables:
            raise NcreelError(f"input '{path}': no variable '{name}' (it is in '{paths[0]}')")
        other = ds[name]
        if tdim not in other.dims or int(other.sizes.get(face_dim, -1)) != mesh.n_face:
            raise NcreelError(f"input '{path}': '{name}' differs from '{paths[0]}' (expected "
                              f"dims {tdim} and {face_dim}={mesh.n_face})")
        counts.append(int(other.sizes[tdim]))
    for coord in ("lonCell", "latCell"):
        if coord in first.variables:
            _check_constant(first, coord, tdim, where)
    # Files in time order, repeated times decided, as open_series does.
    order, kept, segments, note = _series_steps(datasets, paths, name, tdim, select,
                                                time_name, counts, steps)
    series = MeshSeries(
        paths=tuple(paths[i] for i in order), variable=name, time_dim=tdim, y_dim="",
        x_dim=face_dim, select=dict(select), counts=kept, ny=1,
        nx=mesh.n_face, dtype=dtype, units=str(da.attrs.get("units", "")),
        long_name=str(da.attrs.get("long_name") or da.attrs.get("standard_name") or name),
        group=group, lat_name=None, lon_name=None, time_name=time_name,
        steps=segments, note=note, time_note=order.time_note,
        _datasets=[datasets[i] for i in order], _decoded=order.decoded)
    series.mesh = mesh
    log.info("%s: '%s' on a %s mesh of %d faces (dimension %s)", where, name, kind,
             mesh.n_face, face_dim)
    return series


def _runs(indices) -> tuple:
    """Half-open ``(start, stop)`` runs of consecutive integers in sorted `indices`."""
    runs: list = []
    for i in indices:
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    return tuple((int(a), int(b)) for a, b in runs)


class _Order(list):
    """The files' order (indices into the paths given), with their decoded times.

    ``time_note`` says which steps were put in time order ('' when none were).
    """

    decoded: list
    time_note: str = ""


def _series_steps(datasets: list, paths: list, name: str, tdim: str, select: dict,
                  time_name: str | None, counts: list, steps) -> tuple:
    """Decide which steps of the files a series reads, and in what order.

    Files in the order of their first time; repeated times dropped
    (:func:`_repeated_steps`); steps put in time order (:func:`time_order`) -- or, with
    `steps` (a spec's), those steps as they are.

    Returns
    -------
    order : list of int
        The files' order (indices into `paths`); ``order.decoded`` their
        :func:`_file_dates` in that order.
    counts : tuple of int
        The number of steps each file (in that order) contributes.
    segments : tuple of (int, int, int) or None
        :attr:`Series.steps`.
    note : str
        What was dropped or put in order.
    """
    decoded = [_file_dates(ds, time_name, count)
               for ds, count in zip(datasets, counts, strict=True)]
    order = _Order(_time_order([d[1] for d in decoded], paths))
    order.decoded = [decoded[i] for i in order]
    ordered_paths = [paths[i] for i in order]
    if steps is not None:
        segments = _given_steps(steps, ordered_paths, [counts[i] for i in order])
        kept = [0] * len(order)
        for k, a, b in segments:
            kept[k] += b - a
        whole = segments == tuple((k, 0, counts[i]) for k, i in enumerate(order))
        return order, tuple(kept), None if whole else segments, ""
    runs, note = _repeated_steps([datasets[i] for i in order], ordered_paths, name, tdim,
                                 select, order.decoded)
    segments, order.time_note = time_order(order.decoded, ordered_paths, runs)
    if segments is None and any(r != ((0, counts[i]),) for r, i in zip(runs, order,
                                                                         strict=True)):
        segments = tuple((k, a, b) for k, rs in enumerate(runs) for a, b in rs)
    return (order, tuple(sum(b - a for a, b in rs) for rs in runs), segments,
            "; ".join(n for n in (note, order.time_note) if n))


def _given_steps(steps: Sequence, paths: list, counts: list) -> tuple:
    """Check a spec's ``steps`` against the files' lengths: ``(file, start, stop)`` runs."""
    out = []
    for run in steps:
        k, a, b = (int(v) for v in run)
        if not 0 <= k < len(paths):
            raise NcreelError(f"setting 'series.steps': run {list(run)} names file {k} of "
                              f"{len(paths)}")
        if not 0 <= a < b <= counts[k]:
            raise NcreelError(f"input '{paths[k]}': has {counts[k]} time steps, the run's "
                              f"plan reads {a}..{b - 1}: the file changed since the run was "
                              "planned; start a new run")
        out.append((k, a, b))
    return tuple(out)


def _repeated_steps(datasets: list, paths: list, name: str, tdim: str, select: dict,
                    decoded: list) -> tuple[list, str]:
    """Drop the steps whose time an earlier file, or an earlier step, has (files in order).

    A step counts as repeated when its decoded date (ISO 8601 in the file's calendar) is
    one an earlier file, or an earlier step of the same file, already has; undecodable
    times never repeat. The data of each repeated step is compared with the kept one's,
    a bounded block of steps at a time.

    Returns
    -------
    kept : list of tuple
        Kept ``(start, stop)`` runs of each file's own time indices.
    note : str
        Which file's steps were dropped and which times (empty when none).

    Raises
    ------
    NcreelError
        A repeated time whose data differ: names both files (or the file) and the times.
    """
    first: dict = {}  # (label, calendar) -> (file, own index) of its first occurrence
    pairs: dict = {}  # (earlier file, later file) -> [(earlier index, later index, label)]
    dropped: list[set] = [set() for _ in datasets]
    for k, (_, dates, _, calendar, _) in enumerate(decoded):
        for i, date in enumerate(dates):
            if date is None:
                continue
            j, i0 = first.setdefault((date.isoformat(), calendar), (k, i))
            if (j, i0) != (k, i):  # also a time repeated inside one file
                pairs.setdefault((j, k), []).append((i0, i, date.isoformat()))
                dropped[k].add(i)
    notes = []
    for (j, k), steps in pairs.items():
        step_bytes = 8 * max(int(np.prod([s for d, s in datasets[j][name].sizes.items()
                                          if d != tdim and d not in select])), 1)
        block = max(1, BLOCK_BYTES // (2 * step_bytes))  # two blocks held: one each file
        differ = []
        for b in range(0, len(steps), block):
            part = steps[b:b + block]
            a = datasets[j][name].isel({tdim: [p[0] for p in part], **select})
            c = datasets[k][name].isel({tdim: [p[1] for p in part], **select})
            a = a.transpose(tdim, ...)
            a, c = a.values.reshape(len(part), -1), c.transpose(*a.dims).values.reshape(
                len(part), -1)
            same = (a == c) | (np.isnan(a) & np.isnan(c)) if a.dtype.kind == "f" else a == c
            differ += [p[2] for p, ok in zip(part, same.all(axis=1), strict=True) if not ok]
        if differ and j == k:
            raise NcreelError(
                f"input '{paths[k]}' holds '{name}' twice at {_times_text(differ)} with "
                "different values: ncreel cannot tell which is right; fix the file")
        if differ:
            raise NcreelError(
                f"input files '{paths[j]}' and '{paths[k]}' both hold '{name}' at "
                f"{_times_text(differ)} with different values: keep one of them (name the "
                "files to use in config key input)")
        source = "itself" if j == k else f"'{paths[j]}'"
        notes.append(f"'{paths[k]}' repeats {_times_text([p[2] for p in steps])} of "
                     f"{source} with equal values of '{name}': kept once, from {source}")
    kept = [_runs(i for i in range(len(d[1])) if i not in gone)
            for d, gone in zip(decoded, dropped, strict=True)]
    for path, runs in zip(paths, kept, strict=True):
        if not runs:
            notes.append(f"'{path}' adds no time step")
    note = "; ".join(notes)
    if note:  # the parse prints it as a note; other callers read Series.note
        log.info("%s", note)
    return kept, note


def _times_text(labels: list) -> str:
    """``1 time 2000-01-05T00:00:00`` or ``3 times 2000-01-05T00:00:00 .. 2000-01-07T00:00:00``."""
    labels = sorted(set(labels))  # ISO 8601 of one calendar: text order is time order
    if len(labels) == 1:
        return f"1 time {labels[0]}"
    return f"{len(labels)} times {labels[0]} .. {labels[-1]}"


