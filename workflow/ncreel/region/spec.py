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
covered fraction and edge distance (:mod:`ncreel.region.polygon`). A box needs a
rectilinear latitude/longitude grid; curvilinear grids and grids in projection x/y with a
CF grid mapping are cut by a polygon to the block of rows and columns round the cells
that intersect it; an unstructured mesh is not cut (:class:`MeshRegionSeries`), its table
keeps the faces that intersect the polygon. Anything else is refused with one line before
any job.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ncreel.core.errors import NcreelError
from ncreel.region.naturalearth import country_box, country_polygon, lon_extent

#: Values of ``region.table``.
TABLE_CHOICES = ("region", "global")
#: ``region.table`` when not given: the table has the cells the movie shows, so both
#: describe the same cells and every job reads only the region's slab of the files.
DEFAULT_TABLE = "region"
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
    key : str
        The config key it was given in, for messages: ``region``, or ``cells.region``
        for the table's own extent.
    """

    west: float
    east: float
    south: float
    north: float
    table: str = "region"
    name: str | None = None
    file: str | None = None
    digest: str | None = None
    key: str = "region"

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
        params = dataclasses.asdict(self)
        if params["key"] == "region":  # the params of runs without cells.region unchanged
            del params["key"]
        return params


def region_from_params(params: Mapping | None) -> Region | None:
    """Rebuild a :class:`Region` from :meth:`Region.to_params` (None: no region)."""
    return None if params is None else Region(**dict(params))


#: Config ``cells.region`` for every cell of the grid, whatever the movie's region.
GLOBAL = "global"


def table_region_from_config(value) -> Region | str | None:
    """Read config ``cells.region``: the table's own extent.

    Parameters
    ----------
    value : None, str or mapping
        As :func:`region_from_config` reads config ``region``, or ``global``.

    Returns
    -------
    Region, GLOBAL or None
        None: the table has the movie's cells (``region``).

    Raises
    ------
    NcreelError
        As :func:`region_from_config`, naming ``cells.region``.
    """
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == GLOBAL:
        return GLOBAL
    return region_from_config(value, key="cells.region")


def region_from_config(value, key: str = "region") -> Region | None:
    """Read config ``region``: null, a country name, ``{lon: [w, e], lat: [s, n]}`` or a file.

    Parameters
    ----------
    value : None, str or mapping
        A mapping may hold ``name`` (a country) or ``file`` (a GeoJSON or shapefile
        polygon, :func:`ncreel.region.polygon.read_polygon_file`) instead of
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
    if key == "region":
        return _region_from_config(value)
    try:
        region = _region_from_config(value)
    except NcreelError as err:  # the same checks, said of the key the value came from
        raise NcreelError(str(err).replace("config 'region", f"config '{key}", 1)) from None
    if "table" in value if isinstance(value, Mapping) else False:
        raise NcreelError(f"config '{key}.table': unknown key (known: lon, lat, name, file)")
    return dataclasses.replace(region, key=key)


def _region_from_config(value) -> Region | None:
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


def region_polygon(file: str | None, name: str | None):
    """Return the polygon of a region given by ``file`` or country ``name`` (None: a box).

    Cached: the per-cell table asks for it in every shard job, the map once. A file is
    read again when it changed (its size or modification time), so a long-lived process
    never keeps an old version of a file rewritten at the same path.

    Raises
    ------
    NcreelError
        As :func:`ncreel.region.polygon.read_polygon_file` and :func:`country_polygon`.
    """
    stamp = None
    if file is not None:
        import os

        try:
            st = os.stat(file)
            stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            stamp = None  # read_polygon_file says what is wrong with it
    return _region_polygon(file, name, stamp)


@functools.lru_cache(maxsize=8)
def _region_polygon(file: str | None, name: str | None, stamp):
    if file is not None:
        from ncreel.region.polygon import read_polygon_file

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
    west, span = lon_extent(xy[:, 0])
    east = west + span
    if span >= 360.0 - 1e-9:
        west, east = -180.0, 180.0
    elif east > 180.0:
        east -= 360.0
    return west, float(east), float(xy[:, 1].min()), float(xy[:, 1].max())


