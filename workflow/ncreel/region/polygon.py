"""Polygon regions: read a GeoJSON or shapefile outline, and measure cells against it.

A region's polygon (config ``region: {file: ...}`` or a Natural Earth country's outline)
is held as a shapely (Multi)Polygon in WGS 84 longitude/latitude, longitudes in
-180...180, parts split at the antimeridian (RFC 7946, section 3.1.9). Its edges are
straight in longitude/latitude, as PostGIS ``geometry`` edges are, so a cell the table
keeps is exactly a cell for which ``ST_Intersects(geom, region)`` holds on the loaded
geometry.

Per kept cell, :func:`cover_cells` gives

- ``covered_fraction``: area of (cell ∩ region) / area of cell, both on the WGS 84
  ellipsoid. Areas are taken in the cylindrical equal-area projection on the ellipsoid
  (``+proj=cea +ellps=WGS84``, Snyder 1987, *Map Projections: A Working Manual*, eq.
  3-12): it maps meridians and parallels to straight lines and keeps areas, so a grid
  cell bounded by two meridians and two parallels has its exact ellipsoidal area; other
  edges are first densified to :data:`DENSIFY_DEG`. A geodesic area
  (``pyproj.Geod``) would instead join a cell's corners by geodesics, which are not the
  parallels the cell is bounded by.
- ``edge_distance_m``: distance in metres on the WGS 84 ellipsoid (geodesics,
  ``pyproj.Geod``, Karney 2013) from the cell centre to the nearest point of the region's
  boundary, **positive when the centre is inside the region, negative when outside**.
  The boundary is densified to points at most :data:`BOUNDARY_STEP_DEG` apart (about 110 m)
  and the distance is to the nearest of them, so it is at most about 55 m too long for a
  centre right at the edge and less than 1 m too long for a centre 2 km or more away.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ncreel.core.errors import NcreelError

#: Edge length (degrees) region and cell edges are densified to before their areas are
#: taken (an edge that is not a meridian or parallel is curved in the equal-area map).
DENSIFY_DEG = 0.05
#: Spacing (degrees) of the points of the region's boundary distances are measured to.
BOUNDARY_STEP_DEG = 0.001
#: Nearest boundary points (by straight-line distance in 3-D) whose geodesic distance is
#: computed for each centre; the nearest geodesically is among them.
NEAREST_CANDIDATES = 8
#: Suffixes read as polygon files.
FILE_KINDS = {".geojson": "GeoJSON", ".json": "GeoJSON", ".shp": "shapefile"}

log = logging.getLogger(__name__)


def read_polygon_file(path: str | os.PathLike) -> object:
    """Read a GeoJSON (RFC 7946) or shapefile region as one WGS 84 (Multi)Polygon.

    All polygon features are merged (their union). A shapefile in another CRS (its
    ``.prj``) is reprojected with pyproj; one without ``.prj`` is read as WGS 84
    longitude/latitude when its coordinates fit, with a logged note. GeoJSON is WGS 84 by
    RFC 7946; an old-style ``crs`` member naming another CRS is honoured.

    Parameters
    ----------
    path : str or path-like
        ``.geojson``/``.json`` or ``.shp`` (with its ``.shx``/``.dbf`` beside it).

    Returns
    -------
    shapely.MultiPolygon or shapely.Polygon
        Longitudes in -180...180, latitudes in -90...90.

    Raises
    ------
    NcreelError
        One line naming the file: missing, unreadable, no polygons (points or lines
        only), invalid polygons (self-intersecting), an unknown CRS, or coordinates that
        are not longitude/latitude.
    """
    import shapely

    path = Path(path)
    where = f"config 'region.file': '{path}'"
    kind = FILE_KINDS.get(path.suffix.lower())
    if kind is None:
        raise NcreelError(f"{where}: not a polygon file (give a .geojson or .shp file)")
    if not path.is_file():
        raise NcreelError(f"{where}: no such file")
    if kind == "GeoJSON":
        geoms, crs = _geojson_geometries(path, where)
    else:
        geoms, crs = _shapefile_geometries(path, where)
    polys = [g for g in geoms if g is not None and not g.is_empty
             and g.geom_type in ("Polygon", "MultiPolygon")]
    if not polys:
        found = sorted({g.geom_type for g in geoms if g is not None}) or ["nothing"]
        raise NcreelError(f"{where}: holds no polygons (found {', '.join(found)}); a region "
                          "needs an area: give a file of Polygon or MultiPolygon features")
    crossing = [] if crs is not None or not all(_lonlat_bounds(g.bounds) for g in polys) \
        else [i for i, g in enumerate(polys) if _crosses_antimeridian(g)]  # else refused below
    if crossing:
        # An edge over more than half the globe is almost always one written across the
        # antimeridian (170 to -170), not split as RFC 7946 asks; read literally it would
        # run the other way round the globe. Said, as it is a guess. Split before the
        # check: read literally, a ring round a pole crosses itself.
        log.warning("%s: polygon %d has an edge spanning more than 180 degrees of "
                    "longitude: read as crossing the antimeridian and split there (RFC "
                    "7946, section 3.1.9); if it really spans more than half the globe, "
                    "add points so that no edge does", where, crossing[0] + 1)
        polys = [_split_antimeridian(g) if i in crossing else g for i, g in enumerate(polys)]
    bad = [i for i, g in enumerate(polys) if not g.is_valid]
    if bad:
        reason = shapely.is_valid_reason(polys[bad[0]])
        raise NcreelError(f"{where}: polygon {bad[0] + 1} is not valid ({reason}); repair it "
                          "(e.g. QGIS 'Fix geometries' or shapely.make_valid)")
    if crs is not None:
        polys = [_to_wgs84(g, crs, where) for g in polys]
    region = shapely.union_all(polys)
    xmin, ymin, xmax, ymax = region.bounds
    if not _lonlat_bounds(region.bounds):
        raise NcreelError(
            f"{where}: coordinates {xmin:g}..{xmax:g}, {ymin:g}..{ymax:g} are not WGS 84 "
            "longitude/latitude in -180..180, -90..90 (a projected file needs its CRS: a "
            ".prj beside a shapefile; a polygon across the antimeridian must be split "
            "there, RFC 7946 section 3.1.9)")
    if region.geom_type not in ("Polygon", "MultiPolygon") or region.area == 0.0:
        raise NcreelError(f"{where}: its polygons have no area")
    return region


def _lonlat_bounds(bounds) -> bool:
    """Whether (xmin, ymin, xmax, ymax) fit longitude -180...180, latitude -90...90."""
    xmin, ymin, xmax, ymax = bounds
    return xmin >= -180.0 - 1e-9 and xmax <= 180.0 + 1e-9 and ymin >= -90.0 - 1e-9 \
        and ymax <= 90.0 + 1e-9


def _geojson_geometries(path: Path, where: str) -> tuple[list, object]:
    import shapely.errors
    import shapely.geometry

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise NcreelError(f"{where}: cannot be read as GeoJSON ({err})") from err
    crs = None
    if isinstance(doc, Mapping) and isinstance(doc.get("crs"), Mapping):
        name = (doc["crs"].get("properties") or {}).get("name")
        crs = _crs(name, where) if name else None
    objs = []

    def walk(obj):
        kind = obj.get("type") if isinstance(obj, Mapping) else None
        if kind == "FeatureCollection":
            for f in obj.get("features") or []:
                walk(f)
        elif kind == "Feature":
            if obj.get("geometry") is not None:
                walk(obj["geometry"])
        elif kind == "GeometryCollection":
            for g in obj.get("geometries") or []:
                walk(g)
        elif kind is not None:
            objs.append(obj)
        else:
            raise NcreelError(f"{where}: not GeoJSON (an object without a GeoJSON 'type')")

    walk(doc)
    try:
        geoms = [shapely.geometry.shape(o) for o in objs]
    except (ValueError, TypeError, KeyError, IndexError, AttributeError,
            shapely.errors.ShapelyError) as err:  # e.g. GeometryTypeError: type 'Foo'
        raise NcreelError(f"{where}: a geometry cannot be read ({err})") from err
    return geoms, crs


def _shapefile_geometries(path: Path, where: str) -> tuple[list, object]:
    import shapefile
    import shapely.geometry

    try:
        with shapefile.Reader(str(path)) as shp:
            geoms = [None if s.shapeType == shapefile.NULL else
                     shapely.geometry.shape(s.__geo_interface__) for s in shp.shapes()]
    except Exception as err:  # noqa: BLE001 - pyshp raises what its parsing hits
        # On a corrupt file pyshp fails with whatever its parsing meets (KeyError on an
        # unknown shape type, struct.error, ShapefileException, ...).
        raise NcreelError(f"{where}: cannot be read as a shapefile ({type(err).__name__}: "
                          f"{err})") from err
    prj = path.with_suffix(".prj")
    if not prj.is_file():
        prj = path.with_suffix(".PRJ")
    if prj.is_file():
        return geoms, _crs(prj.read_text(errors="replace"), f"{where} (its .prj)")
    log.warning("%s has no .prj: read as WGS 84 longitude/latitude", path)
    return geoms, None


def _crs(text: str, where: str):
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        crs = CRS.from_user_input(text)
    except CRSError as err:
        raise NcreelError(f"{where}: unknown coordinate reference system ({err}); give "
                          "the file in WGS 84 (EPSG:4326) or with a CRS pyproj reads") from err
    wgs84 = CRS.from_epsg(4326)
    if crs.is_geographic and crs.ellipsoid is not None and crs.datum == wgs84.datum:
        return None  # already WGS 84 longitude/latitude (axis order is x=lon in files)
    if crs.to_epsg() in (4326, None) and crs.name in ("WGS 84", "WGS84"):
        return None
    return crs


def _to_wgs84(geom, crs, where: str):
    import shapely
    from pyproj import Transformer

    tr = Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
    # Densified first: a straight edge in a projection is curved in longitude/latitude.
    step = max(np.ptp(np.asarray(geom.bounds).reshape(2, 2), axis=0).max() / 200.0, 1e-9)

    def move(xy):
        x, y = tr.transform(xy[:, 0], xy[:, 1])
        return np.column_stack([x, y])

    out = shapely.transform(shapely.segmentize(geom, step), move)
    if not np.isfinite(np.asarray(out.bounds)).all():
        raise NcreelError(f"{where}: its coordinates are outside its CRS's area "
                          f"({crs.name}); check the .prj")
    if _crosses_antimeridian(out):
        # A projected polygon over the antimeridian (a Pacific CRS) comes back with
        # longitudes jumping from 180 to -180: split there, before any repair.
        out = _split_antimeridian(out)
    return shapely.make_valid(out) if not out.is_valid else out


def _crosses_antimeridian(geom) -> bool:
    """Whether a ring of `geom` has an edge spanning more than 180 degrees of longitude.

    Edges with both ends on the antimeridian (a cap's edge from -180 to 180 along a
    parallel) do not count.
    """
    import shapely

    return any(_steps_across(shapely.get_coordinates(ring)[:, 0]).any()
               for ring in shapely.get_rings(shapely.get_parts(geom)))


def _steps_across(x: np.ndarray) -> np.ndarray:
    """Which steps of longitudes `x` (n,) cross the antimeridian: (n - 1,) booleans.

    A step of more than 180 degrees, unless both its ends lie on the antimeridian (a step
    along it, or a cap's edge from -180 to 180).
    """
    seam = np.abs(x) >= 180.0 - 1e-9
    return (np.abs(np.diff(x)) > 180.0) & ~(seam[:-1] & seam[1:])


def ring_area(xy: np.ndarray):
    """Return the area a closed ring on the sphere encloses, split at the antimeridian.

    A step of more than 180 degrees of longitude between two points of the ring is taken
    the short way, across the antimeridian (179.9 to -179.9 is 0.2 degrees east), as on
    the sphere. A ring whose longitudes so turn once round the globe circles a pole: the
    one on the side of the equator its mean latitude lies (Antarctica's coast circles the
    south pole); the area is closed along that pole. ``antimeridian.fix_polygon`` with
    straight edges in longitude/latitude does the splitting.

    Parameters
    ----------
    xy : numpy.ndarray, shape (n, 2)
        The ring's longitude, latitude (degrees; longitudes in -180...180), closed or not,
        wound either way.

    Returns
    -------
    shapely.Polygon or shapely.MultiPolygon
        Longitudes in -180...180, no edge spanning more than 180 degrees (edges along the
        antimeridian or a pole aside); empty if the ring encloses no area; invalid if a
        ring across the antimeridian crosses itself on the sphere (not repaired).
    """
    import antimeridian
    import shapely

    xy = np.asarray(xy, dtype=np.float64)
    if not _steps_across(xy[:, 0]).any():
        out = shapely.make_valid(shapely.Polygon(xy))
    else:
        step = np.diff(np.append(xy[:, 0], xy[0, 0]))
        turns = round(float(np.sum(step - 360.0 * np.round(step / 360.0))) / 360.0)
        south = turns != 0 and float(np.mean(xy[:, 1])) < 0.0
        # Not repaired: a ring that crosses itself on the sphere stays invalid, for the
        # caller to refuse.
        return antimeridian.fix_polygon(shapely.Polygon(xy), fix_winding=True,
                                        great_circle=False, force_south_pole=south,
                                        force_north_pole=turns != 0 and not south)
    areas = [g for g in shapely.get_parts(out) if g.geom_type == "Polygon" and g.area > 0]
    return shapely.union_all(areas) if areas else shapely.Polygon()


def _split_antimeridian(geom):
    """Split a (Multi)Polygon whose edges cross the antimeridian into parts in -180...180.

    Each polygon as :func:`sphere_polygon` reads its rings (wound either way: shapefiles
    wind outer rings clockwise).
    """
    import shapely

    return shapely.union_all([
        sphere_polygon([shapely.get_coordinates(r) for r in shapely.get_rings(p)])
        for p in shapely.get_parts(geom)])


def sphere_polygon(rings: list[np.ndarray]):
    """Return a polygon on the sphere as parts with straight edges in longitude/latitude.

    The area inside an odd number of its rings, each ring's area taken on the sphere
    (:func:`ring_area`): an outer ring less its holes, and also a polygon whose outer ring
    circles a pole.

    Parameters
    ----------
    rings : list of numpy.ndarray, each shape (n, 2)
        Longitude, latitude (degrees) of each ring; the outer one first or not.

    Returns
    -------
    shapely.Polygon or shapely.MultiPolygon
        Longitudes in -180...180; possibly empty; invalid where a ring across the
        antimeridian crosses itself on the sphere.
    """
    import shapely

    areas = [ring_area(r) for r in rings]
    if len(areas) == 1:
        return areas[0]  # as it is, valid or not
    out = functools.reduce(shapely.symmetric_difference, areas, shapely.Polygon())
    # Only areas (a ring running along itself leaves lines).
    parts = [g for g in shapely.get_parts(out) if g.geom_type == "Polygon"]
    return shapely.union_all(parts) if parts else shapely.Polygon()


def cea_area(geoms: np.ndarray) -> np.ndarray:
    """Ellipsoidal areas (m²) of longitude/latitude geometries with straight edges.

    Parameters
    ----------
    geoms : numpy.ndarray of shapely geometries, shape (n,)
        Longitude/latitude in degrees, edges straight in those coordinates.

    Returns
    -------
    numpy.ndarray, shape (n,), float64, m²
        Area in the WGS 84 cylindrical equal-area projection after densifying edges to
        :data:`DENSIFY_DEG` (exact for edges along meridians and parallels).
    """
    import shapely
    from pyproj import Transformer

    tr = Transformer.from_crs("EPSG:4326", "+proj=cea +ellps=WGS84 +lat_ts=0", always_xy=True)

    def move(xy):
        x, y = tr.transform(xy[:, 0], np.clip(xy[:, 1], -90.0, 90.0))
        return np.column_stack([x, y])

    dense = shapely.segmentize(np.asarray(geoms, dtype=object), DENSIFY_DEG)
    return shapely.area(shapely.transform(dense, move))


def _ecef(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    from pyproj import Transformer

    tr = Transformer.from_crs("EPSG:4326", "EPSG:4978", always_xy=True)
    x, y, z = tr.transform(lon, lat, np.zeros_like(lon))
    return np.column_stack([x, y, z])


def boundary_points(region) -> np.ndarray:
    """Return the region's boundary as points at most :data:`BOUNDARY_STEP_DEG` apart, (m, 2).

    Segments along the antimeridian, where the region was split, and along a pole, where
    a polar cap was closed, are left out: neither is an edge of the region on the sphere.
    """
    import shapely

    rings = shapely.get_parts(region.boundary)
    keep = []
    for line in rings:
        pts = shapely.get_coordinates(shapely.segmentize(line, BOUNDARY_STEP_DEG))
        cut = (np.abs(pts[:, 0]) >= 180.0 - 1e-9) | (np.abs(pts[:, 1]) >= 90.0 - 1e-9)
        # A segment is on the cut when both its ends are: drop points whose both
        # neighbours are on it too (the interior of a run along the seam or a pole).
        inner = cut & np.roll(cut, 1) & np.roll(cut, -1)
        keep.append(pts[~inner])
    out = np.concatenate(keep) if keep else np.empty((0, 2))
    return out if len(out) else shapely.get_coordinates(region.boundary)


def edge_distance(region, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Signed geodesic distance (m, WGS 84) from points to the region's boundary.

    Parameters
    ----------
    region : shapely.Polygon or shapely.MultiPolygon
        Longitude/latitude degrees.
    lon, lat : numpy.ndarray, shape (n,), degrees
        Cell centres.

    Returns
    -------
    numpy.ndarray, shape (n,), float64, metres
        Positive inside the region, negative outside, 0 on the boundary; accuracy as the
        module docstring states (nearest of the densified boundary points).
    """
    import shapely
    from pyproj import Geod
    from scipy.spatial import cKDTree

    lon = np.asarray(lon, np.float64)
    lat = np.asarray(lat, np.float64)
    if lon.size == 0:
        return np.empty(0)
    pts = boundary_points(region)
    # Unbalanced, uncompacted nodes: a boundary is a curve in 3-D, for which the median
    # split of a balanced tree makes queries from far inside 5x slower (measured).
    tree = cKDTree(_ecef(pts[:, 0], pts[:, 1]), balanced_tree=False, compact_nodes=False)
    k = min(NEAREST_CANDIDATES, len(pts))
    _, idx = tree.query(_ecef(lon, lat), k=k)
    idx = np.asarray(idx).reshape(lon.size, k)
    geod = Geod(ellps="WGS84")
    _, _, dist = geod.inv(np.repeat(lon, k), np.repeat(lat, k),
                          pts[idx.reshape(-1), 0], pts[idx.reshape(-1), 1])
    d = np.asarray(dist).reshape(lon.size, k).min(axis=1)
    # On the boundary counts as inside: a centre on the antimeridian seam of a split
    # region is inside it (the seam is no edge).
    shapely.prepare(region)
    inside = shapely.intersects_xy(region, lon, lat)
    return np.where(inside, d, -d)


def intersecting(region, cells: np.ndarray) -> np.ndarray:
    """Return the indices (ascending) of the cells that intersect `region` (touching counts).

    Parameters
    ----------
    region : shapely.Polygon or shapely.MultiPolygon
    cells : numpy.ndarray of shapely geometries (or None), shape (n,)

    Returns
    -------
    numpy.ndarray of int, shape (k,)
    """
    import shapely

    cells = np.asarray(cells, dtype=object)
    have = np.flatnonzero(~shapely.is_missing(cells))
    tree = shapely.STRtree(cells[have])
    return np.unique(have[tree.query(region, predicate="intersects")])


def cover_cells(region, cells: np.ndarray, centre_lon: np.ndarray, centre_lat: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which cells intersect the region, their covered fraction and edge distance.

    Parameters
    ----------
    region : shapely.Polygon or shapely.MultiPolygon
        Longitude/latitude degrees, -180...180.
    cells : numpy.ndarray of shapely geometries (or None), shape (n,)
        Cell polygons in the same coordinates (:mod:`ncreel.cells.geometry`).
    centre_lon, centre_lat : numpy.ndarray, shape (n,), degrees
        Cell centres (any longitude turn).

    Returns
    -------
    keep : numpy.ndarray of int, shape (k,)
        Indices of the cells that intersect the region (touching counts, as in
        ``ST_Intersects``), ascending.
    covered_fraction : numpy.ndarray, shape (k,), float64
        In [0, 1]; exactly 1 for a cell inside the region.
    edge_distance_m : numpy.ndarray, shape (k,), float64
        See :func:`edge_distance`.
    """
    import shapely

    cells = np.asarray(cells, dtype=object)
    keep = intersecting(region, cells)
    if not keep.size:
        return keep, np.empty(0), np.empty(0)
    mine = cells[keep]
    shapely.prepare(region)
    inside = shapely.contains(region, mine)
    fraction = np.ones(keep.size)
    part = np.flatnonzero(~inside)
    if part.size:
        cut = shapely.intersection(mine[part], region)
        with np.errstate(invalid="ignore", divide="ignore"):
            f = cea_area(cut) / cea_area(mine[part])
        fraction[part] = np.clip(np.nan_to_num(f), 0.0, 1.0)
    lon = (np.asarray(centre_lon, np.float64)[keep] + 180.0) % 360.0 - 180.0
    dist = edge_distance(region, lon, np.asarray(centre_lat, np.float64)[keep])
    return keep, fraction, dist

