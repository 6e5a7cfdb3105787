"""A region of the grid: a longitude/latitude box, a polygon file or a named country.

The region is applied where the series is opened (:func:`restrict`): the series then *is*
the region's cells, so the statistics, the frames and (when ``region.table`` is
``region``) the per-cell table see only them, and every read takes only the slab of the
file that holds them. A box whose west longitude is east of its east longitude crosses the
antimeridian (``lon: [170, -170]`` is the 20 degrees around 180); its cells are put in
continuous longitude order whether the file stores longitudes in 0...360 or -180...180,
so the map shows them as one piece.

A box (``{lon: [w, e], lat: [s, n]}``) keeps the cells whose centre lies in it (edges
included). A polygon region (``{file: fields.geojson}``, a GeoJSON or shapefile) is cut
to the polygon's bounds, keeping every cell whose extent reaches them; a named country is
cut to its box (:func:`country_box`). For both, the per-cell table then keeps only the
cells that intersect the polygon (the country's full Natural Earth outline), with their
covered fraction and edge distance (:mod:`ncreel.regionpolygon`). A box needs a
rectilinear latitude/longitude grid; curvilinear grids and grids in projection x/y with a
CF grid mapping are cut by a polygon to the block of rows and columns round the cells
that intersect it; an unstructured mesh is not cut (:class:`MeshRegionSeries`), its table
keeps the faces that intersect the polygon. Anything else is refused with one line before
any job.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ncreel.errors import NcreelError
from ncreel.source import MeshSeries, Series, stacked

#: Values of ``region.table``.
TABLE_CHOICES = ("region", "global")
#: ``region.table`` when not given: the table has the cells the movie shows, so both
#: describe the same cells and every job reads only the region's slab of the files.
DEFAULT_TABLE = "region"
#: A named country's box is its outline's extent widened by this share of its span on
#: each side (at least :data:`COUNTRY_MARGIN_MIN_DEG`), so the outline is not cut at the
#: map's edge.
COUNTRY_MARGIN = 0.05
COUNTRY_MARGIN_MIN_DEG = 0.5
#: A country's polygons this close (degrees) to its largest one, or to a polygon already
#: in its box, belong to its box: Corsica to France, Sicily to Italy, Okinawa's chain of
#: islands to Japan, not Alaska (9 degrees from Washington state) to the 48 contiguous
#: United States.
COUNTRY_NEAR_DEG = 5.0
#: Style of a named country's outline (drawn once, above the field).
OUTLINE_STYLE = {"edgecolor": "black", "linewidth": 1.2}
#: A cell centre this close (degrees, about 10 m) outside the box's edge is on the edge:
#: float32 coordinates are off by up to 2e-5 degrees near 360 (float32(0.3) < 0.3).
EDGE_TOLERANCE_DEG = 1e-4


@dataclass(frozen=True)
class Region:
    """A longitude/latitude box, optionally a named country's.

    Attributes
    ----------
    west, east : float
        Longitudes (degrees east) of the box's edges; ``west > east`` crosses the
        antimeridian.
    south, north : float
        Latitudes (degrees north), ``south < north``.
    table : str
        ``region``: the per-cell table has the region's cells; ``global``: all cells.
    name : str or None
        The Natural Earth country the box was taken from.
    file : str or None
        Absolute path of the polygon file (GeoJSON or shapefile) the box is the bounds of.
    digest : str or None
        SHA-256 of the polygon file (and a shapefile's .shx, .dbf, .prj): part of every
        job's parameters, so an edited polygon reruns the run.
    """

    west: float
    east: float
    south: float
    north: float
    table: str = "region"
    name: str | None = None
    file: str | None = None
    digest: str | None = None

    @property
    def polygon(self):
        """The region's polygon (shapely, WGS 84 longitude/latitude); None for a box."""
        return region_polygon(self.file, self.name)

    @property
    def by_extent(self) -> bool:
        """Whether cells are kept when their extent reaches the box (polygon files)."""
        return self.file is not None

    @property
    def lon_span(self) -> float:
        """Width of the box in degrees of longitude (0 < span <= 360)."""
        span = (self.east - self.west) % 360.0
        return 360.0 if span == 0.0 else span

    def contains_lon(self, lon: np.ndarray) -> np.ndarray:
        """Whether each longitude (degrees, any convention) lies in the box, edges included."""
        tol = EDGE_TOLERANCE_DEG
        offset = np.mod(np.asarray(lon, float) - self.west + tol, 360.0)
        return offset <= self.lon_span + 2 * tol

    def describe(self) -> str:
        """Describe the region for messages: ``'Fiji' (lon 174..-178, lat -22..-12)``."""
        box = (f"lon {self.west:g}..{self.east:g}, lat {self.south:g}..{self.north:g}")
        if self.file:
            return f"'{self.file}' ({box})"
        return f"'{self.name}' ({box})" if self.name else box

    def to_params(self) -> dict:
        """Plain dict that :func:`region_from_params` reads back."""
        return dataclasses.asdict(self)


def region_from_params(params: Mapping | None) -> Region | None:
    """Rebuild a :class:`Region` from :meth:`Region.to_params` (None: no region)."""
    return None if params is None else Region(**dict(params))


def region_from_config(value) -> Region | None:
    """Read config ``region``: null, a country name, ``{lon: [w, e], lat: [s, n]}`` or a file.

    Parameters
    ----------
    value : None, str or mapping
        A mapping may hold ``name`` (a country) or ``file`` (a GeoJSON or shapefile
        polygon, :func:`ncreel.regionpolygon.read_polygon_file`) instead of
        ``lon``/``lat``, and ``table`` (``region``, the default, or ``global``). A
        file's box is the polygon's bounds (``west > east`` across the antimeridian).

    Returns
    -------
    Region or None

    Raises
    ------
    NcreelError
        Naming the key: an unknown country (with the closest names), longitudes outside
        -180..360 or equal, latitudes outside -90..90 or not south < north; naming the
        file: a polygon file that is missing, holds no polygons, is invalid or in an
        unknown CRS.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, Mapping):
        raise NcreelError(f"config 'region': must be a country name or {{lon: [west, east], "
                          f"lat: [south, north]}}, got {value!r}")
    unknown = sorted(set(map(str, value)) - {"lon", "lat", "name", "file", "table"})
    if unknown:
        raise NcreelError(f"config 'region.{unknown[0]}': unknown key (known: lon, lat, "
                          "name, file, table)")
    if sum(k in value for k in ("name", "file")) + ("lon" in value or "lat" in value) > 1:
        raise NcreelError("config 'region': give one of name, file or lon/lat")
    # The schema has no nested defaults (and the top-level `table` is another setting).
    table = value["table"] if "table" in value else DEFAULT_TABLE
    if table not in TABLE_CHOICES:
        raise NcreelError(f"config 'region.table': must be region or global, got {table!r}")
    if "file" in value:
        import os

        if not isinstance(value["file"], str) or not value["file"].strip():
            raise NcreelError(f"config 'region.file': must be the path of a GeoJSON or "
                              f"shapefile polygon file, got {value['file']!r}")
        path = os.path.abspath(value["file"])
        west, east, south, north = polygon_box(region_polygon(path, None))
        return Region(west, east, south, north, table=table, file=path,
                      digest=_file_digest(path))
    name = value.get("name")
    if name is not None:
        west, east, south, north, name = country_box(name)
        return Region(west, east, south, north, table=table, name=name)
    for key in ("lon", "lat"):
        pair = value.get(key)
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(
                isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v)
                for v in pair)):
            raise NcreelError(f"config 'region.{key}': must be two numbers "
                              f"[{'west, east' if key == 'lon' else 'south, north'}], got "
                              f"{pair!r}")
    (west, east), (south, north) = map(float, value["lon"]), map(float, value["lat"])
    if not all(-180.0 <= v <= 360.0 for v in (west, east)) or west == east:
        raise NcreelError(f"config 'region.lon': [{west:g}, {east:g}] must be two different "
                          "longitudes in -180..360 (west > east crosses the antimeridian)")
    if not (-90.0 <= south < north <= 90.0):
        raise NcreelError(f"config 'region.lat': [{south:g}, {north:g}] must be south < north, "
                          "both in -90..90")
    return Region(west, east, south, north, table=table)


def _file_digest(path: str) -> str:
    # The polygon file and a shapefile's companions that change what it holds.
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    p = Path(path)
    parts = [p]
    if p.suffix.lower() == ".shp":
        parts += [p.with_suffix(s) for s in (".shx", ".dbf", ".prj")]
    for part in parts:
        if part.is_file():
            h.update(part.name.encode() + b"\0" + part.read_bytes())
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def region_polygon(file: str | None, name: str | None):
    """Return the polygon of a region given by ``file`` or country ``name`` (None: a box).

    Cached: the per-cell table asks for it in every shard job, the map once.

    Raises
    ------
    NcreelError
        As :func:`ncreel.regionpolygon.read_polygon_file` and :func:`country_polygon`.
    """
    if file is not None:
        from ncreel.regionpolygon import read_polygon_file

        return read_polygon_file(file)
    if name is not None:
        return country_polygon(name)
    return None


def polygon_box(polygon) -> tuple[float, float, float, float]:
    """Bounds ``(west, east, south, north)`` of a longitude/latitude polygon, degrees.

    The longitude extent is the shortest arc holding its vertices, so a polygon split at
    the antimeridian (parts at 170...180 and -180...-170) gives ``west > east``.
    """
    import shapely

    xy = shapely.get_coordinates(polygon)
    west, span = _extent(xy[:, 0])
    east = west + span
    if span >= 360.0 - 1e-9:
        west, east = -180.0, 180.0
    elif east > 180.0:
        east -= 360.0
    return west, float(east), float(xy[:, 1].min()), float(xy[:, 1].max())


def country_polygon(name: str):
    """Outline of a Natural Earth 1:50m country as a shapely (Multi)Polygon (all its parts).

    Raises
    ------
    NcreelError
        If there is no country of that name.
    """
    from ncreel.regionpolygon import topology_polygon

    country_lines(name)  # the error for an unknown name
    geometries = _country_geometries()
    proper = {k.casefold(): k for k in geometries}[str(name).strip().casefold()]
    return topology_polygon(_country_arcs(), geometries[proper])


@functools.lru_cache(maxsize=1)
def _country_arcs() -> list[np.ndarray]:
    # The countries' decoded arcs, once per process (decoding takes 0.1 s).
    from ncreel.render.maps import _arcs, _topology

    return _arcs(_topology("countries-50m.json"))


def _country_geometries() -> dict[str, Mapping]:
    from ncreel.render.maps import _topology

    topo = _topology("countries-50m.json")
    return {str(g["properties"]["name"]): g for g in topo["objects"]["countries"]["geometries"]
            if g.get("properties", {}).get("name")}


def country_lines(name: str) -> list[np.ndarray]:
    """Outline of a Natural Earth 1:50m country: its arcs as (n, 2) (lon, lat) arrays.

    Raises
    ------
    NcreelError
        If there is no country of that name (case is ignored).
    """
    from ncreel.render.maps import _arc_ids, _split_at_antimeridian

    geometries = _country_geometries()
    found = {k.casefold(): k for k in geometries}.get(str(name).strip().casefold())
    if found is None:
        close = difflib.get_close_matches(str(name), list(geometries), n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(close)}?)" if close else (
            " (a Natural Earth 1:50m country name, e.g. France, Japan, United States of "
            "America)")
        raise NcreelError(f"config 'region': no country named '{name}'{hint}")
    arcs = _country_arcs()
    # Copies: the decoded arcs are shared by every call.
    return [part.copy() for i in sorted(_arc_ids(geometries[found]))
            for part in _split_at_antimeridian(arcs[i])]


def country_box(name: str) -> tuple[float, float, float, float, str]:
    """Box around a Natural Earth country: ``(west, east, south, north, name)``, degrees.

    The box holds the country's largest polygon and every other polygon of it within
    :data:`COUNTRY_NEAR_DEG` of it or of a polygon so held (a chain of islands), which is
    what a map of the country usually shows: France is metropolitan France with Corsica,
    not French Guiana and Reunion; the United States are the 48 contiguous states, without
    Alaska and Hawaii; Spain is without the Canary Islands, Ecuador without the Galapagos. (The
    per-cell table takes the cells of this box that intersect the country's full
    outline.) The longitude extent is the shortest arc holding those vertices
    (the complement of the widest gap between their longitudes), so a country across the
    antimeridian (Fiji, Russia) gets ``west > east``; widened by :data:`COUNTRY_MARGIN`.

    Raises
    ------
    NcreelError
        If there is no such country.
    """
    country_lines(name)  # the error for an unknown name
    geometries = _country_geometries()
    proper = {k.casefold(): k for k in geometries}[str(name).strip().casefold()]
    geometry = geometries[proper]
    arcs = _country_arcs()
    polygons = geometry["arcs"] if geometry["type"] == "MultiPolygon" else [geometry["arcs"]]
    parts = [np.concatenate([arcs[i] if i >= 0 else arcs[~i][::-1] for i in polygon[0]])
             for polygon in polygons]
    # Shoelace area in degrees squared: enough to tell the main polygon.
    area = [abs(np.sum(p[:-1, 0] * p[1:, 1] - p[1:, 0] * p[:-1, 1])) for p in parts]
    near = [parts[i] for i in sorted(_near_parts(parts, int(np.argmax(area))))]
    pts = np.concatenate(near)
    west, span = _extent(pts[:, 0])
    south, north = float(pts[:, 1].min()), float(pts[:, 1].max())
    pad_x = max(COUNTRY_MARGIN * span, COUNTRY_MARGIN_MIN_DEG)
    pad_y = max(COUNTRY_MARGIN * (north - south), COUNTRY_MARGIN_MIN_DEG)
    total = min(span + 2 * pad_x, 360.0)
    west = float(np.mod(west - pad_x + 180.0, 360.0) - 180.0)
    east = west + total
    if total >= 360.0:
        west, east = -180.0, 180.0
    elif east > 180.0:  # across the antimeridian: west > east
        east -= 360.0
    return west, east, max(south - pad_y, -90.0), min(north + pad_y, 90.0), proper


def _near_parts(parts: list[np.ndarray], main: int) -> set[int]:
    # Indices of the parts within COUNTRY_NEAR_DEG of `main`, directly or through other
    # such parts; distances in degrees, across the antimeridian too.
    import shapely

    rings = np.array([shapely.Polygon(p) if len(p) >= 4 else shapely.LineString(p)
                      for p in parts], dtype=object)
    moved = [shapely.transform(rings, lambda xy, k=k: xy + [k, 0.0]) for k in (-360.0, 360.0)]
    held, todo = {main}, [main]
    while todo:
        g = rings[todo.pop()]
        d = np.minimum.reduce([shapely.distance(g, r) for r in (rings, *moved)])
        for i in np.flatnonzero(d <= COUNTRY_NEAR_DEG):
            if int(i) not in held:
                held.add(int(i))
                todo.append(int(i))
    return held


def _extent(lon: np.ndarray) -> tuple[float, float]:
    # West edge and width of the shortest arc holding all `lon`: the complement of the
    # widest gap between them.
    lon = np.unique(np.mod(np.asarray(lon, float) + 180.0, 360.0) - 180.0)
    gaps = np.diff(np.concatenate([lon, [lon[0] + 360.0]]))
    k = int(np.argmax(gaps))  # the widest gap runs from lon[k] eastwards
    return float(lon[(k + 1) % lon.size]), 360.0 - float(gaps[k])


def region_features(region: Region | None) -> list:
    """Return the static overlays of the region (a country's or polygon's outline) as map lines."""
    if region is None or (region.name is None and region.file is None):
        return []
    from ncreel.render.maps import MapLines

    if region.file is None:
        return [MapLines(country_lines(region.name), OUTLINE_STYLE)]
    import shapely

    from ncreel.render.maps import _split_at_antimeridian

    lines = []
    # Densified: its edges are straight in longitude/latitude (as the table's cells see
    # them), which is a curve on most map projections.
    for ring in shapely.get_parts(shapely.segmentize(region.polygon.boundary, 0.5)):
        xy = shapely.get_coordinates(ring)
        # Edges along the antimeridian, where the polygon was split, are no outline.
        seam = np.abs(xy[:, 0]) >= 180.0 - 1e-9
        cut = np.flatnonzero(seam[:-1] & seam[1:]) + 1
        for part in np.split(xy, cut):
            if len(part) > 1:
                lines.extend(p for p in _split_at_antimeridian(part) if len(p) > 1)
    return [MapLines(lines, OUTLINE_STYLE)]


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
    """A :class:`~ncreel.source.Series` cut to a region's cells; build with :func:`restrict`.

    Every dataset the series opens is seen through the cut (coordinates, bounds, other
    variables), rows south to north and columns in continuous longitude order; the data
    are read as a few contiguous slabs (:meth:`read`).
    """

    region: Region | None = None
    y_file: np.ndarray | None = None
    x_file: np.ndarray | None = None
    edges: dict | None = None
    _cut: dict = field(default_factory=dict, repr=False)
    #: :func:`ncreel.regionpolygon.covered_cells`, computed once.
    _cover: tuple | None = field(default=None, repr=False)

    def covered_cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the region polygon's cells (:func:`ncreel.regionpolygon.cover_cells`, once).

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

    def read(self, start: int, stop: int) -> np.ndarray:
        """Read time steps ``start:stop`` of the region's cells (see :meth:`Series.read`).

        Only the slabs of the file holding the region are read: one per contiguous run of
        rows and columns (two column runs for a box across the file's longitude seam).
        """
        if not 0 <= start <= stop <= self.n_time:
            raise ValueError(f"time slice {start}:{stop} outside 0:{self.n_time}")
        parts = []
        for i, _, part in self._time_parts(start, stop):
            da = super()._dataset(i)[self.variable].isel({self.time_dim: part, **self.select})
            try:
                parts.append(self._slab(da))
            except (RuntimeError, OSError) as err:
                raise NcreelError(
                    f"input '{self.paths[i]}': variable '{self.variable}': cannot read "
                    f"time steps {part.start}..{part.stop - 1} of this file ({err}); "
                    "the file is corrupt: replace it with a good copy") from err
        block = stacked(parts, (0, self.ny, self.nx), self.dtype)
        if not np.issubdtype(block.dtype, np.floating):
            block = block.astype(np.float64)
        return block

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
            part = super()._dataset(i)[name].isel({self.time_dim: run, **sel})
            parts.append(np.asarray(self._slab(part), np.float64))
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
            from ncreel.gridmap import unwrap_rows

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
        raise NcreelError(f"config 'region': not supported for {type(series).__name__} "
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
            f"config 'region': {region.describe()} {held} of {what} (its "
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
                f"config 'region': {region.describe()} covers no cell of {what} (its "
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
        raise NcreelError(f"config 'region': not supported for {kind} ({what}); {hint}")
    from ncreel.regionpolygon import intersecting

    ny, nx = series.ny, series.nx
    keep = intersecting(region.polygon, cell_shapes(series))
    if keep.size == 0:
        raise NcreelError(
            f"config 'region': {region.describe()} covers no cell of {what} (its latitudes "
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
        raise NcreelError(f"config 'region': not supported for unstructured meshes given a "
                          f"box ({what}); give the region as a polygon file or a country "
                          "name (the table then keeps the faces that intersect it)")
    values = {f.name: getattr(series, f.name) for f in dataclasses.fields(MeshSeries)
              if f.init}
    out = MeshRegionSeries(**values, region=region)
    out.mesh = series.mesh  # set after construction, as open_mesh_series does
    if region.table == "region" and out.covered_cells()[0].size == 0:
        raise NcreelError(f"config 'region': {region.describe()} covers no face of {what}; "
                          "check the polygon and the mesh")
    return out


def _cover(series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # cover_cells for the cells of a region's series.
    from ncreel.regionpolygon import cover_cells

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
    from ncreel.cfaxes import cf_bounds
    from ncreel.gridmap import edges_1d

    b = cf_bounds(ds, name)
    if b is not None:
        b = np.asarray(b, float)[order]
        return b.min(axis=1), b.max(axis=1)
    e = edges_1d(np.asarray(centres, float))
    lo, hi = np.minimum(e[:-1], e[1:]), np.maximum(e[:-1], e[1:])
    return lo[order], hi[order]
