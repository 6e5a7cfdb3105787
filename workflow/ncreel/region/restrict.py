"""The grid cut to a region: a series that *is* the region's cells.

:func:`restrict` applies a :class:`~ncreel.region.spec.Region` where the series is
opened, so the statistics, the frames and (when ``region.table`` is ``region``) the
per-cell table see only its cells, and every read takes only the slab of the file that
holds them. A box keeps the cells whose centre lies in it; a polygon region is cut to the
polygon's bounds, keeping every cell whose extent reaches them, and its per-cell table
keeps the cells that intersect the polygon (:func:`cell_shapes`,
:mod:`ncreel.region.polygon`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ncreel.core.errors import NcreelError
from ncreel.input.source import MeshSeries, Series, stacked
from ncreel.region.spec import EDGE_TOLERANCE_DEG, Region


def _runs(index: np.ndarray) -> list[tuple[slice, bool]]:
    # Maximal runs of consecutive file indices (step +1 or -1): each is read as one slice
    # (netCDF reads an index array one element at a time: 50x slower measured).
    out, a = [], 0
    n = index.size
    while a < n:
        b = a + 1
        step = int(index[b] - index[a]) if b < n else 1
        if step not in (1, -1):
            step = 1
        while b < n and index[b] - index[b - 1] == step:
            b += 1
        lo, hi = sorted((int(index[a]), int(index[b - 1])))
        out.append((slice(lo, hi + 1), step == -1))
        a = b
    return out


@dataclass
class RegionSeries(Series):
    """A :class:`~ncreel.input.source.Series` cut to a region's cells; build with :func:`restrict`.

    Every dataset the series opens is seen through the cut (coordinates, bounds, other
    variables), rows south to north and columns in continuous longitude order; the data
    are read as a few contiguous slabs (:meth:`read`).
    """

    region: Region | None = None
    y_file: np.ndarray | None = None
    x_file: np.ndarray | None = None
    edges: dict | None = None
    _cut: dict = field(default_factory=dict, repr=False)
    #: :func:`ncreel.region.polygon.covered_cells`, computed once.
    _cover: tuple | None = field(default=None, repr=False)

    def covered_cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the region polygon's cells (:func:`ncreel.region.polygon.cover_cells`, once).

        Cells are the polygons the table writes (:mod:`ncreel.cells.geometry`, the same
        text PostGIS reads), so the kept cells are those ``ST_Intersects`` finds.

        Returns
        -------
        keep, covered_fraction, edge_distance_m : numpy.ndarray, each shape (k,)
            ``keep`` are row-major cell ids ``iy * nx + ix`` of this series.
        """
        if self._cover is None:
            self._cover = _cover(self)
        return self._cover

    def coordinate_bounds(self, kind: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Lower and upper edges of the region's cells, from the whole grid.

        CF bounds where the file has them, else midpoints between the *whole* grid's
        centres: the region's outer cells (and a region one cell wide) keep their true
        extent, not one extrapolated from the cut.
        """
        if self.edges is None:
            return super().coordinate_bounds(kind)
        lo, hi = self.edges[kind]
        return np.array(lo, float), np.array(hi, float)

    def spec(self) -> dict:
        """:meth:`Series.spec` plus the region's parameters."""
        return {**super().spec(), "region": self.region.to_params()}

    def _dataset(self, i: int):
        if i not in self._cut:
            # A single ascending run as a slice: netCDF then reads it in one piece.
            cut = {}
            for dim, index in ((self.y_dim, self.y_file), (self.x_dim, self.x_file)):
                runs = _runs(index)
                cut[dim] = runs[0][0] if len(runs) == 1 and not runs[0][1] else index
            self._cut[i] = super()._dataset(i).isel(cut)
        return self._cut[i]

    def _variable(self, i: int, name: str | None = None):
        # The whole file's variable: read() takes only the slabs holding the region
        # (_values), one per contiguous run of rows and columns (two column runs for a
        # box across the file's longitude seam), chunk-aware as every series.
        return super()._dataset(i)[name or self.variable]

    def _values(self, da) -> np.ndarray:
        return self._slab(da)

    def read_variable(self, name: str, start: int, stop: int) -> np.ndarray:
        """Another variable on the region's cells (see :meth:`Series.read_variable`).

        A variable with time is read as slabs, as :meth:`read` reads the series.
        """
        ds = super()._dataset(0)
        da = ds[name] if name in ds.variables else None
        sel = {} if da is None else {d: i for d, i in self.select.items() if d in da.dims}
        if da is None or set(da.dims) - set(sel) != {self.time_dim, self.y_dim, self.x_dim}:
            return super().read_variable(name, start, stop)  # its checks and messages
        parts = []
        for i, _, run in self._time_parts(start, stop):
            values = self._read_run(i, self._variable(i, name), run, name, sel)
            parts.append(np.asarray(values, np.float64))
        return stacked(parts, (0, self.ny, self.nx))

    def _slab(self, da) -> np.ndarray:
        rows = []
        for ys, flip_y in _runs(self.y_file):
            cols = []
            for xs, flip_x in _runs(self.x_file):
                v = da.isel({self.y_dim: ys, self.x_dim: xs}).transpose(
                    self.time_dim, self.y_dim, self.x_dim).values
                cols.append(v[..., ::-1] if flip_x else v)
            v = cols[0] if len(cols) == 1 else np.concatenate(cols, axis=2)
            rows.append(v[:, ::-1] if flip_y else v)
        return rows[0] if len(rows) == 1 else np.concatenate(rows, axis=1)

    def cell_coordinates(self, continuous: bool = False):
        """As :meth:`Series.cell_coordinates`; `continuous` longitudes run on across 180."""
        lat, lon = super().cell_coordinates(continuous)
        if continuous and lon is not None:
            from ncreel.input.gridmap import unwrap_rows

            lon = unwrap_rows(lon)
        return lat, lon

    def close(self) -> None:
        """Close every file this series opened."""
        self._cut.clear()
        super().close()


def restrict(series: Series, region: Region | None) -> Series:
    """Cut `series` to `region`'s cells (return `series` itself when `region` is None).

    Parameters
    ----------
    series : Series
        An opened series (a grid or a mesh).
    region : Region or None

    Returns
    -------
    RegionSeries or MeshRegionSeries
        Sharing `series`' open files (a mesh: the whole mesh); shape
        ``(n_time, ny', nx')``: on a rectilinear grid the cells whose centres lie in the
        box (whose extent reaches a polygon file's bounds); on a curvilinear or projected
        grid the block of rows and columns round the cells that intersect the polygon,
        one cell wider on each side.

    Raises
    ------
    NcreelError
        Before any job: a grid in plain indices; a box on a mesh or a grid without 1-D
        latitude/longitude; no cell centre in the box; a polygon that covers no cell.
    """
    if region is None:
        return series
    what = f"'{series.variable}' in '{series.paths[0]}'"
    if isinstance(series, MeshSeries):
        return _mesh_region(series, region, what)
    if type(series) is not Series:
        raise NcreelError(f"config '{region.key}': not supported for "
                          f"{type(series).__name__} "
                          f"({what}); remove region")
    ds = series._dataset(0)
    y_order = np.arange(series.ny) if series.y_index is None else np.asarray(series.y_index)
    x_order = np.arange(series.nx) if series.x_index is None else np.asarray(series.x_index)
    if series.lat_name is None or series.lon_name is None or \
            ds[series.lat_name].dims != (series.y_dim,) or \
            ds[series.lon_name].dims != (series.x_dim,):
        return _restrict_by_cells(series, region, what, y_order, x_order)
    lat_v, lon_v = ds[series.lat_name], ds[series.lon_name]
    lat = np.asarray(lat_v.values, float)[y_order]
    lon = np.asarray(lon_v.values, float)[x_order]
    # Cell edges of the whole grid (CF bounds, else midpoints between the whole grid's
    # centres): a cut's outer cells keep their true extent (a one-cell region too).
    y_lo, y_hi = _axis_edges(ds, series.lat_name, lat_v.values, y_order)
    x_lo, x_hi = _axis_edges(ds, series.lon_name, lon_v.values, x_order)
    tol = EDGE_TOLERANCE_DEG
    if region.by_extent:
        # Every cell whose extent reaches the polygon's bounds (touching counts, as in
        # ST_Intersects): all cells that can intersect the polygon.
        rows = np.flatnonzero((y_hi >= region.south - tol) & (y_lo <= region.north + tol))
        offset = np.mod(x_lo - region.west, 360.0)
        width = x_hi - x_lo
        cols = np.flatnonzero((offset <= region.lon_span + tol)
                              | (offset + width >= 360.0 - tol))
    else:
        rows = np.flatnonzero((lat >= region.south - tol) & (lat <= region.north + tol))
        cols = np.flatnonzero(region.contains_lon(lon))
    if rows.size == 0 or cols.size == 0:
        held = "reaches no cell" if region.by_extent else "holds no cell centre"
        raise NcreelError(
            f"config '{region.key}': {region.describe()} {held} of {what} (its "
            f"latitudes {np.nanmin(lat):g}..{np.nanmax(lat):g}, longitudes "
            f"{np.nanmin(lon):g}..{np.nanmax(lon):g}); choose a region inside the grid")
    # Columns from the box's west edge eastwards: continuous across the file's seam.
    # (A cell reaching the box from the west sorts by its east edge.)
    first = x_hi[cols] if region.by_extent else lon[cols]
    cols = cols[np.argsort(np.mod(first - region.west + tol, 360.0), kind="stable")]
    cut = _cut(series, region, y_order[rows], x_order[cols],
               edges={"lat": (y_lo[rows], y_hi[rows]), "lon": (x_lo[cols], x_hi[cols])})
    if region.polygon is not None and region.table == "region":
        if cut.covered_cells()[0].size == 0:
            cut.close()
            raise NcreelError(
                f"config '{region.key}': {region.describe()} covers no cell of {what} (its "
                f"latitudes {np.nanmin(lat):g}..{np.nanmax(lat):g}, longitudes "
                f"{np.nanmin(lon):g}..{np.nanmax(lon):g}): the polygon lies between or "
                "beside the grid's cells; check the polygon and the grid")
    return cut


def _restrict_by_cells(series: Series, region: Region, what: str, y_order: np.ndarray,
                       x_order: np.ndarray) -> RegionSeries:
    # A curvilinear grid or one in projection x/y with a CF grid mapping: cut to the
    # index rectangle of the cells whose polygons intersect the region's polygon, one cell
    # wider on each side, so that the kept cells' corners (from their neighbours' centres
    # or the projection's midpoints) are the same in the cut as in the whole grid.
    if series.lat_name is None and series.lon_name is None and series.mapping is None:
        kind = "grids in plain indices (no latitude/longitude, no grid mapping)"
    elif series.mapping is not None and series.lat_name is None:
        kind = f"projected grids ({series.mapping.kind}) given a box"
    else:
        kind = "curvilinear grids (2-D latitude/longitude) given a box"
    lat, lon = series.cell_coordinates()
    if region.polygon is None or lat is None:
        hint = ("give the region as a polygon file or a country name" if lat is not None
                else "remove region")
        raise NcreelError(f"config '{region.key}': not supported for {kind} ({what}); "
                          f"{hint}")
    from ncreel.region.polygon import intersecting

    ny, nx = series.ny, series.nx
    keep = intersecting(region.polygon, cell_shapes(series))
    if keep.size == 0:
        raise NcreelError(
            f"config '{region.key}': {region.describe()} covers no cell of {what} (its latitudes "
            f"{np.nanmin(lat):g}..{np.nanmax(lat):g}, longitudes {np.nanmin(lon):g}.."
            f"{np.nanmax(lon):g}); check the polygon and the grid")
    iy, ix = np.divmod(keep, nx)
    rows = np.arange(max(int(iy.min()) - 1, 0), min(int(iy.max()) + 2, ny))
    cols = np.arange(max(int(ix.min()) - 1, 0), min(int(ix.max()) + 2, nx))
    return _cut(series, region, y_order[rows], x_order[cols])


@dataclass
class MeshRegionSeries(MeshSeries):
    """A mesh series with a polygon region: the whole mesh, its table limited to the region.

    Meshes are not cut (the movie shows the whole mesh, with the region's outline); the
    per-cell table keeps the faces that intersect the polygon
    (:meth:`covered_cells`), as on grids.
    """

    region: Region | None = None
    _cover: tuple | None = field(default=None, repr=False)

    def spec(self) -> dict:
        """:meth:`MeshSeries.spec` plus the region's parameters."""
        return {**super().spec(), "region": self.region.to_params()}

    def covered_cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the faces intersecting the polygon (see :meth:`RegionSeries.covered_cells`)."""
        if self._cover is None:
            self._cover = _cover(self)
        return self._cover


def _mesh_region(series: MeshSeries, region: Region, what: str) -> MeshRegionSeries:
    if region.polygon is None:
        raise NcreelError(f"config '{region.key}': not supported for unstructured meshes "
                          "given a "
                          f"box ({what}); give the region as a polygon file or a country "
                          "name (the table then keeps the faces that intersect it)")
    values = {f.name: getattr(series, f.name) for f in dataclasses.fields(MeshSeries)
              if f.init}
    out = MeshRegionSeries(**values, region=region)
    out.mesh = series.mesh  # set after construction, as open_mesh_series does
    if region.table == "region" and out.covered_cells()[0].size == 0:
        raise NcreelError(f"config '{region.key}': {region.describe()} covers no face of {what}; "
                          "check the polygon and the mesh")
    return out


def _cover(series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # cover_cells for the cells of a region's series.
    from ncreel.region.polygon import cover_cells

    lat, lon = series.cell_coordinates()
    return cover_cells(series.region.polygon, cell_shapes(series), lon.reshape(-1),
                       lat.reshape(-1))


def _cut(series: Series, region: Region, y_file: np.ndarray, x_file: np.ndarray,
         edges: dict | None = None) -> RegionSeries:
    # `series` seen through the file rows `y_file` and columns `x_file`, sharing its files.
    values = {f.name: getattr(series, f.name) for f in dataclasses.fields(Series)
              if f.init}
    # The whole grid's cached longitudes/latitudes (of a grid mapping) are not the cut's.
    values.update(ny=int(y_file.size), nx=int(x_file.size), y_index=None, x_index=None,
                  _time=series._time, _lonlat=None)
    return RegionSeries(**values, region=region, y_file=y_file, x_file=x_file, edges=edges)


def cell_shapes(series: Series) -> np.ndarray:
    """Polygons of every cell of `series` exactly as the table's ``geom`` writes them.

    Parameters
    ----------
    series : Series
        A grid with latitude/longitude (:class:`ncreel.cells.geometry.CellGeometry`).

    Returns
    -------
    numpy.ndarray of shapely (Multi)Polygon or None, shape (ny * nx,)
        By row-major cell id; parsed from the same EWKT text (so the same numbers that
        PostGIS reads); None for a cell without a polygon.
    """
    import shapely

    from ncreel.cells.geometry import CellGeometry, MeshGeometry

    ids = np.arange(series.ny * series.nx, dtype=np.int64)
    mesh = getattr(series, "mesh", None)
    geometry = MeshGeometry(mesh) if mesh is not None else CellGeometry.from_series(series)
    text = geometry.polygons(ids)
    return shapely.from_wkt(text.str.strip_prefix("SRID=4326;").to_numpy().astype(object))


def _axis_edges(ds, name: str, centres, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Lower and upper edge of each cell of a whole 1-D axis, in `order`.
    from ncreel.input.cfaxes import cf_bounds
    from ncreel.input.gridmap import edges_1d

    b = cf_bounds(ds, name)
    if b is not None:
        b = np.asarray(b, float)[order]
        return b.min(axis=1), b.max(axis=1)
    e = edges_1d(np.asarray(centres, float))
    lo, hi = np.minimum(e[:-1], e[1:]), np.maximum(e[:-1], e[1:])
    return lo[order], hi[order]
