"""Natural Earth coastlines, borders and countries, from the TopoJSON files shipped with ncreel.

The files in ``ncreel/data/natural_earth`` (public domain) are decoded here, never
downloaded: compute nodes usually have no network. Coastlines are the rings of the
``land`` object; land borders are the arcs two different ``countries`` share (as
topojson's ``mesh`` with ``a !== b``); a country is its ``countries`` geometry at 1:50m,
as lines (what a map draws) and as a polygon (what a region's cells are measured
against).
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ncreel.core.errors import NcreelError

#: The shipped Natural Earth files (TopoJSON; see its README).
DATA = Path(__file__).parent.parent / "data" / "natural_earth"


@functools.lru_cache(maxsize=4)
def topology(name: str) -> dict:
    """Return a shipped TopoJSON file (``land-110m.json``, ``countries-50m.json``) parsed."""
    return json.loads((DATA / name).read_text())


def decode_arcs(topo: Mapping) -> list[np.ndarray]:
    """Decode a topology's arcs to (n, 2) arrays of (longitude, latitude) degrees.

    Quantized TopoJSON: each arc is delta-encoded integer positions, then scaled.
    """
    (sx, sy), (tx, ty) = topo["transform"]["scale"], topo["transform"]["translate"]
    out = []
    for arc in topo["arcs"]:
        q = np.cumsum(np.asarray(arc, dtype=float), axis=0)
        out.append(np.column_stack([q[:, 0] * sx + tx, q[:, 1] * sy + ty]))
    return out


def split_at_antimeridian(line: np.ndarray) -> list[np.ndarray]:
    """Cut an (n, 2) longitude/latitude line where it steps across the antimeridian.

    Natural Earth rings run along +-180; a step from +180 to -180 is not a line across
    the map.
    """
    cut = np.flatnonzero(np.abs(np.diff(line[:, 0])) > 180) + 1
    return [part for part in np.split(line, cut) if len(part) > 1]


def arc_ids(geometry: Mapping) -> set[int]:
    """Arc indices of a TopoJSON Polygon or MultiPolygon (``~i``, arc i reversed, as i)."""
    rings = geometry.get("arcs", [])
    if geometry["type"] == "MultiPolygon":
        rings = [ring for polygon in rings for ring in polygon]
    return {i if i >= 0 else ~i for ring in rings for i in ring}


def coastline_lines(scale: str = "110m") -> list[np.ndarray]:
    """Coastlines (rings of Natural Earth ``land``) as (n, 2) arrays of (lon, lat) degrees."""
    topo = topology("land-110m.json" if scale == "110m" else "countries-50m.json")
    arcs = decode_arcs(topo)
    ids = set().union(*(arc_ids(g) for g in topo["objects"]["land"]["geometries"]))
    return [part for i in sorted(ids) for part in split_at_antimeridian(arcs[i])]


def border_lines() -> list[np.ndarray]:
    """Land borders at 1:50m: arcs shared by two different countries, (n, 2) lon/lat arrays."""
    topo = topology("countries-50m.json")
    arcs = decode_arcs(topo)
    users: dict[int, int] = {}
    for g in topo["objects"]["countries"]["geometries"]:
        for i in arc_ids(g):
            users[i] = users.get(i, 0) + 1
    return [part for i in sorted(users) if users[i] > 1
            for part in split_at_antimeridian(arcs[i])]


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

#: A ring of a shipped polygon whose every point lies this close (degrees) to a pole is
#: the pole itself (``geostitch`` closes a polygon cut along the pole with a ring at
#: -89.999).
POLE_RING_DEG = 0.01


def country_polygon(name: str):
    """Outline of a Natural Earth 1:50m country as a shapely (Multi)Polygon (all its parts).

    Raises
    ------
    NcreelError
        If there is no country of that name.
    """
    country_lines(name)  # the error for an unknown name
    geometries = _country_geometries()
    proper = {k.casefold(): k for k in geometries}[str(name).strip().casefold()]
    return topology_polygon(_country_arcs(), geometries[proper])


@functools.lru_cache(maxsize=1)
def _country_arcs() -> list[np.ndarray]:
    # The countries' decoded arcs, once per process (decoding takes 0.1 s).
    return decode_arcs(topology("countries-50m.json"))


def _country_geometries() -> dict[str, Mapping]:
    topo = topology("countries-50m.json")
    return {str(g["properties"]["name"]): g for g in topo["objects"]["countries"]["geometries"]
            if g.get("properties", {}).get("name")}


def country_lines(name: str) -> list[np.ndarray]:
    """Outline of a Natural Earth 1:50m country: its arcs as (n, 2) (lon, lat) arrays.

    Raises
    ------
    NcreelError
        If there is no country of that name (case is ignored).
    """
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
    return [part.copy() for i in sorted(arc_ids(geometries[found]))
            for part in split_at_antimeridian(arcs[i])]


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
    west, span = lon_extent(pts[:, 0])
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


def lon_extent(lon: np.ndarray) -> tuple[float, float]:
    """West edge and width (degrees) of the shortest arc of longitude holding all `lon`.

    The complement of the widest gap between them: ``(170, 20)`` for longitudes
    170...180 and -180...-170.
    """
    lon = np.unique(np.mod(np.asarray(lon, float) + 180.0, 360.0) - 180.0)
    gaps = np.diff(np.concatenate([lon, [lon[0] + 360.0]]))
    k = int(np.argmax(gaps))  # the widest gap runs from lon[k] eastwards
    return float(lon[(k + 1) % lon.size]), 360.0 - float(gaps[k])


def topology_polygon(arcs: list, geometry: Mapping):
    """Build a shapely geometry from a TopoJSON (Multi)Polygon, split at the antimeridian.

    The shipped countries are spherical polygons (d3-geo's, as ``geostitch`` writes them):
    a ring may step across the antimeridian (179.98 to -180: a few kilometres east, not
    360 degrees west) and a ring may circle a pole (Antarctica's coast). Each ring is
    turned into the area it encloses on the sphere, as polygons with straight edges in
    longitude/latitude within -180...180, and a polygon is the area inside an odd number
    of its rings (:func:`ncreel.region.polygon.sphere_polygon`): its outer ring less its
    holes, and Antarctica's coast (a ring circling the south pole) less nothing. A ring lying
    within :data:`POLE_RING_DEG` of a pole is where ``geostitch`` closed a polygon cut
    along the pole, and stands for the pole itself: Antarctica reaches -90.

    Parameters
    ----------
    arcs : list of numpy.ndarray, each shape (n, 2)
        The topology's decoded arcs (longitude, latitude).
    geometry : mapping
        A TopoJSON ``Polygon`` or ``MultiPolygon`` object (arc indices; ``~i`` reversed).

    Returns
    -------
    shapely.Polygon or shapely.MultiPolygon
        Longitudes in -180...180; no edge spans more than 180 degrees of longitude.
    """
    import shapely

    from ncreel.region.polygon import sphere_polygon

    def ring(ids):
        return np.concatenate([arcs[i] if i >= 0 else arcs[~i][::-1] for i in ids])

    polygons = geometry["arcs"] if geometry["type"] == "MultiPolygon" else [geometry["arcs"]]
    rings = [[r for r in map(ring, polygon) if np.abs(r[:, 1]).min() < 90.0 - POLE_RING_DEG]
             for polygon in polygons]
    return shapely.union_all([sphere_polygon(r) for r in rings])
