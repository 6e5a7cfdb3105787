"""One shard's result rows, the table's columns and the normalised ``cells`` settings."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ncreel.cells.context import GEOMETRY_COLUMN, CellContext
from ncreel.cells.etr import ETR_DEFAULTS, _check_etr
from ncreel.cells.geometry import NO_LAT_LON_GEOMETRY, CellGeometry, fold_longitude
from ncreel.cells.registry import ResolvedModel, check_columns, resolve_model
from ncreel.config.configcheck import schema_defaults
from ncreel.config.settings import COPY_SUFFIXES, CellsSettings
from ncreel.core.errors import NcreelError
from ncreel.pg.types import GEOMETRY_TYPES, REGION_COLUMNS, value_type


@dataclass
class ShardRows:
    """Computes and writes the COPY rows of one shard's blocks with the configured model.

    Attributes
    ----------
    model : ResolvedModel
    ctx : CellContext
    columns : list of (str, str)
        Declared columns plus the geometry column when enabled.
    geometry : CellGeometry or None
    cover : tuple of numpy.ndarray or None
        A polygon region's cells (:func:`region_cover`): ``(keep, covered_fraction,
        edge_distance_m)``, each shape (ny * nx,), by cell id; rows of other cells are
        left out.
    window : (int, int, int) or None
        The steps of the whole input series the series shows
        (:attr:`ncreel.input.source.Series.window`): the model's ``time_index`` (the
        series' step) is written as the step's index in the whole series.
    """

    model: ResolvedModel
    ctx: CellContext
    columns: list
    geometry: CellGeometry | None = None
    cover: tuple | None = None
    window: tuple | None = None

    @classmethod
    def for_series(cls, series, *, cell_mean: np.ndarray, cells: CellsSettings,
                   state: Mapping | None = None) -> ShardRows:
        """Set up the configured model for an opened :class:`ncreel.input.source.Series`.

        Parameters
        ----------
        series : ncreel.input.source.Series
        cell_mean : numpy.ndarray, shape (ny, nx)
            Per-cell mean from the statistics rule.
        cells : ncreel.config.settings.CellsSettings
            Uses its ``model``, ``params`` and ``geometry``.
        state : mapping, optional
            Pre-pass results for the model (:attr:`CellContext.state`).
        """
        lat, lon = series.cell_coordinates()
        ctx = CellContext(time=series.time_axis(), cell_mean=cell_mean, lat=lat,
                          lon=None if lon is None else fold_longitude(lon), lon_raw=lon,
                          value_type=value_type(series.dtype), variable=series.variable,
                          read_variable=series.read_variable, state=dict(state or {}))
        model = resolve_model(cells.model, cells.params)
        geometry = None
        mesh = getattr(series, "mesh", None)
        if cells.geometry != "none":
            if mesh is not None:  # an unstructured mesh: its face polygons
                from ncreel.cells.geometry import MeshGeometry

                geometry = MeshGeometry(mesh)
            else:
                geometry = CellGeometry.from_series(series)
        cover = region_cover(series)
        return cls(model=model, ctx=ctx,
                   columns=table_columns(model, ctx, geometry=cells.geometry,
                                         mesh=mesh is not None, region=cover is not None),
                   geometry=geometry, cover=cover, window=getattr(series, "window", None))

    #: Rows formatted per write call when the polygon column is on: its text (~150 bytes
    #: per row) is built per slice, so it adds a bounded amount of memory, not per block.
    geometry_chunk_rows: int = 250_000

    def rows(self, t0: int, block: np.ndarray) -> dict[str, object]:
        """Return the checked, coerced model columns of one block (without ``geom``).

        With a polygon region, only the rows of cells that intersect it, with
        ``covered_fraction`` and ``edge_distance_m`` after the model's columns. With a
        :attr:`window`, ``time_index`` is the step's index in the whole input series.
        """
        declared = self.columns[:-1] if self.geometry is not None else self.columns
        if self.cover is not None:
            declared = declared[:-len(REGION_COLUMNS)]
        out = check_columns(self.model.name, declared, self.model(block, t0, self.ctx))
        if self.window is not None and "time_index" in out:
            first, _, every = self.window
            out["time_index"] = (first + every * np.asarray(out["time_index"], np.int64)
                                 ).astype(np.int32)
        if (self.geometry is not None or self.cover is not None) and "cell_id" not in out:
            need = "cells.geometry" if self.cover is None else "a polygon region"
            raise NcreelError(f"cell model '{self.model.name}': {need} needs a "
                              "'cell_id' column (row-major iy * nx + ix)")
        if self.cover is not None:
            keep, fraction, distance = self.cover
            cell = np.asarray(out["cell_id"], np.int64)
            rows = np.flatnonzero(keep[cell])
            out = {k: _take(v, rows) for k, v in out.items()}
            out["covered_fraction"] = fraction[cell[rows]]
            out["edge_distance_m"] = distance[cell[rows]]
        return out

    def write(self, fh, t0: int, block: np.ndarray) -> int:
        """Append one block's rows to `fh` in COPY text format; returns rows written."""
        from ncreel.pg.copytext import write_copy_rows

        out = self.rows(t0, block)
        if self.geometry is None:
            return write_copy_rows(fh, out)
        n = len(out["cell_id"])
        step = self.geometry_chunk_rows
        for a in range(0, n, step):
            part = {k: v[a:a + step] for k, v in out.items()}
            part[GEOMETRY_COLUMN] = self.geometry.polygons(np.asarray(part["cell_id"]))
            write_copy_rows(fh, part)
        return n


def _take(values, rows: np.ndarray):
    # A column (numpy array, polars Series or list) at the given rows.
    if hasattr(values, "gather"):
        return values.gather(rows)
    if isinstance(values, np.ndarray):
        return values[rows]
    return [values[i] for i in rows]


def region_cover(series) -> tuple | None:
    """Per-cell lookups of a polygon region's cells for the table, or None.

    Parameters
    ----------
    series : ncreel.input.source.Series
        The table's series: a :class:`ncreel.region.restrict.RegionSeries` cut to a region with
        a polygon (a file or a named country) gives lookups; any other series None.

    Returns
    -------
    (keep, covered_fraction, edge_distance_m) or None
        numpy arrays of shape (ny * nx,) indexed by cell id: bool, float64 (NaN where not
        kept), float64 metres (:meth:`ncreel.region.restrict.RegionSeries.covered_cells`).
    """
    region = getattr(series, "region", None)
    if region is None or region.table != "region" or region.polygon is None:
        return None
    ids, fraction, distance = series.covered_cells()
    n = series.ny * series.nx
    keep = np.zeros(n, bool)
    keep[ids] = True
    f, d = np.full(n, np.nan), np.full(n, np.nan)
    f[ids], d[ids] = fraction, distance
    return keep, f, d


def table_columns(model: ResolvedModel, ctx: CellContext, *,
                  geometry: str = "none", mesh: bool = False,
                  region: bool = False) -> list[tuple[str, str]]:
    """Return the COPY file's columns: the model's declaration plus region and ``geom`` columns.

    With a polygon `region`, :data:`REGION_COLUMNS` follow the model's columns.
    ``geom`` (last) is a MultiPolygon on every grid kind, meshes (`mesh`) included
    (:data:`ncreel.pg.types.GEOMETRY_TYPES`).
    """
    cols = model.columns(ctx)
    if region:
        cols.extend(REGION_COLUMNS)
    if geometry != "none":
        cols.append((GEOMETRY_COLUMN, GEOMETRY_TYPES[geometry]))
    return cols


def upgrade_cells_config(cells: Mapping) -> tuple[dict, str | None]:
    """Move the deprecated ``cells.etr`` into ``cells.params``, the one key of model parameters.

    Parameters
    ----------
    cells : mapping
        Config ``cells`` as given (before or after schema defaults).

    Returns
    -------
    cells : dict
        A copy without ``etr``; for ``etr_risk`` its keys are merged into ``params``.
    note : str or None
        One-line deprecation note to show the user, or None when ``etr`` was not given.

    Raises
    ------
    NcreelError
        When a key is given in both ``cells.etr`` and ``cells.params``, or ``cells.etr``
        is given for a model other than ``etr_risk``.
    """
    cells = dict(cells)
    etr = dict(cells.pop("etr", None) or {})
    if not etr:
        return cells, None
    if cells.get("model") != "etr_risk":
        model = cells.get("model") or schema_defaults("properties", "cells")["model"]
        raise NcreelError("config key 'cells.etr' holds etr_risk settings but cells.model is "
                          f"{model!r}: set cells.model to etr_risk and give its settings in "
                          "cells.params")
    params = dict(cells.get("params") or {})
    both = sorted(set(params) & set(etr))
    if both:
        raise NcreelError(f"config keys 'cells.params' and 'cells.etr' both set "
                          f"{', '.join(both)}: give etr_risk settings in cells.params only")
    cells["params"] = {**params, **etr}
    return cells, ("config key 'cells.etr' is deprecated: move "
                   f"{', '.join(sorted(etr))} to cells.params")


def cells_settings(cells: Mapping) -> dict:
    """Normalise config ``cells`` into what the jobs need.

    Parameters
    ----------
    cells : mapping
        Config ``cells``: ``model``, ``params``, ``geometry``, ``compression``,
        ``compression_level`` (missing keys take the schema's defaults); a deprecated
        ``etr`` is moved into ``params`` with a logged warning (:func:`upgrade_cells_config`).

    Returns
    -------
    dict
        ``model`` (name), ``params`` (merged over :data:`ETR_DEFAULTS` for ``etr_risk``,
        as given for a user model, none for ``field``), ``geometry``, ``compression``,
        ``compression_level``, ``suffix`` (file-name suffix of the COPY files: ``.copy``,
        ``.copy.gz``, ``.copy.zst``), ``layout`` (``wide`` or ``normalised``).

    Raises
    ------
    NcreelError
        For unknown or invalid ``etr_risk`` parameters and the cases of
        :func:`upgrade_cells_config`.
    """
    if "suffix" in cells:  # already normalised (rule params pass this dict on)
        return dict(cells)
    cells, note = upgrade_cells_config(cells)
    if note:
        logging.getLogger(__name__).warning(note)
    cells = {**schema_defaults("properties", "cells"), **cells}
    name = cells["model"]
    if name == "etr_risk":
        params = {**ETR_DEFAULTS, **cells["params"]}
        _check_etr(params)
    elif name == "field":
        if cells["params"]:
            raise NcreelError(f"config key 'cells.params' ({', '.join(sorted(cells['params']))})"
                              ": cells.model 'field' takes no parameters; remove cells.params "
                              "or set cells.model (etr_risk or package.module:function)")
        params = {}
    else:
        params = dict(cells["params"])
    compression = cells["compression"]
    return {"model": name, "params": params, "geometry": cells["geometry"],
            "compression": compression, "compression_level": cells["compression_level"],
            "suffix": COPY_SUFFIXES[compression], "layout": cells["layout"]}


#: The model a probe of the rows (the table-only calibration, the disk check) writes in
#: place of one that needs the degradation pre-pass, which has not run yet: its rows'
#: text, and so its cost and size, are much the same.
PROBE_MODEL = "field"


def probe_settings(cells: CellsSettings) -> CellsSettings:
    """`cells` as a probe of the rows writes them before any job (:data:`PROBE_MODEL`).

    Parameters
    ----------
    cells : CellsSettings

    Returns
    -------
    CellsSettings
        `cells`, or with model :data:`PROBE_MODEL` and no parameters when its model needs
        the degradation pre-pass (:func:`ncreel.cells.soil.needs_prepass`).
    """
    import dataclasses

    from ncreel.cells.soil import needs_prepass

    if needs_prepass(cells.to_params()):
        return dataclasses.replace(cells, model=PROBE_MODEL, params={})
    return cells


def series_columns(series, cells: Mapping) -> list[tuple[str, str]]:
    """Columns of the run's COPY file, from the series header only (parse time).

    Resolves (imports) the model, so a bad ``cells.model`` fails before any job runs.

    Raises
    ------
    NcreelError
        A bad model; ``cells.geometry`` on a grid without latitude/longitude (the shard
        jobs could not build its polygons).
    """
    if cells["geometry"] != "none" and not series.has_lat_lon:
        raise NcreelError(NO_LAT_LON_GEOMETRY)
    ctx = CellContext(time=series.time_axis(), cell_mean=np.empty(0),
                      lat=None, lon=None, value_type=value_type(series.dtype),
                      variable=series.variable)
    region = getattr(series, "region", None)
    polygon = region is not None and region.table == "region" and (
        region.file is not None or region.name is not None)
    return table_columns(resolve_model(cells["model"], cells["params"]), ctx,
                         geometry=cells["geometry"], mesh=getattr(series, "mesh", None) is not None,
                         region=polygon)
