"""Map projections, coastlines and borders for the frames, from geometry shipped with ncreel.

Coastlines and land borders come from Natural Earth (public domain) files in
``ncreel/data/natural_earth`` (TopoJSON, decoded here), never from cartopy's downloader:
compute nodes usually have no network. Coastlines are the rings of the ``land`` object;
land borders are the arcs two different ``countries`` share (as topojson's ``mesh`` with
``a !== b``). The scale follows cartopy's ``AdaptiveScaler`` for its own features: 1:110m,
1:50m when the map spans less than 50 degrees.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent.parent / "data" / "natural_earth"
#: Map span (degrees, larger of longitude and latitude) below which 1:50m is drawn.
SCALE_50M_BELOW_DEG = 50.0
#: A grid spanning at least this many degrees of longitude is global: maps centre on 0.
GLOBAL_SPAN_DEG = 330.0
#: Line width (points) and colour of coastlines and borders.
COASTLINE_STYLE = {"edgecolor": "black", "linewidth": 0.6}
BORDER_STYLE = {"edgecolor": "0.25", "linewidth": 0.4, "linestyle": "-"}


def map_projection(name: str = "PlateCarree", params: Mapping | None = None):
    """Build a cartopy projection from its class name and keyword parameters.

    Parameters
    ----------
    name : str
        Name of a :class:`cartopy.crs.Projection` subclass, e.g. ``PlateCarree``,
        ``Robinson``, ``Mollweide``, ``Orthographic``, ``LambertConformal``,
        ``NorthPolarStereo``.
    params : mapping, optional
        Keyword arguments of that class (e.g. ``central_longitude``).

    Returns
    -------
    cartopy.crs.Projection

    Raises
    ------
    ValueError
        If `name` is not a cartopy projection or `params` do not fit it.
    """
    import cartopy.crs as ccrs

    cls = getattr(ccrs, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, ccrs.Projection)):
        raise ValueError(f"map.projection '{name}' is not a cartopy.crs projection class "
                         "(e.g. PlateCarree, Robinson, Mollweide, LambertConformal)")
    try:
        return cls(**dict(params or {}))
    except (TypeError, ValueError) as err:
        raise ValueError(f"map.projection_params {dict(params or {})} for {name}: {err}") from err


def central_longitude(lon: np.ndarray) -> float | None:
    """Longitude (degrees, in [-180, 180)) to centre a regional map on, None for a global grid.

    A grid that does not go round the globe is drawn centred on itself, so one that crosses
    the map's edge meridian (a Pacific grid across 180 degrees, say) stays one piece instead
    of being split to both edges of a world-wide strip. `lon` are continuous cell-centre
    longitudes (no jump of 360 along a row), 1-D or 2-D.
    """
    lon = np.asarray(lon, float)
    lo, hi = float(np.nanmin(lon)), float(np.nanmax(lon))
    if hi - lo >= GLOBAL_SPAN_DEG:
        return None
    return float((0.5 * (lo + hi) + 180.0) % 360.0 - 180.0)


def map_scale(lon: np.ndarray, lat: np.ndarray) -> str:
    """``"110m"`` or ``"50m"`` from the span (degrees) of the grid's longitudes and latitudes."""
    lon, lat = np.asarray(lon, float), np.asarray(lat, float)
    span = max(np.nanmax(lon) - np.nanmin(lon), np.nanmax(lat) - np.nanmin(lat))
    return "50m" if span < SCALE_50M_BELOW_DEG else "110m"


@functools.lru_cache(maxsize=4)
def _topology(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _arcs(topo: Mapping) -> list[np.ndarray]:
    # Quantized TopoJSON: each arc is delta-encoded integer positions, then scaled.
    (sx, sy), (tx, ty) = topo["transform"]["scale"], topo["transform"]["translate"]
    out = []
    for arc in topo["arcs"]:
        q = np.cumsum(np.asarray(arc, dtype=float), axis=0)
        out.append(np.column_stack([q[:, 0] * sx + tx, q[:, 1] * sy + ty]))
    return out


def _split_at_antimeridian(line: np.ndarray) -> list[np.ndarray]:
    # Natural Earth rings run along +-180; a step from +180 to -180 is not a line across
    # the map.
    cut = np.flatnonzero(np.abs(np.diff(line[:, 0])) > 180) + 1
    return [part for part in np.split(line, cut) if len(part) > 1]


def _arc_ids(geometry: Mapping) -> set[int]:
    # Arc indices of a Polygon / MultiPolygon; ~i means arc i reversed.
    rings = geometry.get("arcs", [])
    if geometry["type"] == "MultiPolygon":
        rings = [ring for polygon in rings for ring in polygon]
    return {i if i >= 0 else ~i for ring in rings for i in ring}


def coastline_lines(scale: str = "110m") -> list[np.ndarray]:
    """Coastlines (rings of Natural Earth ``land``) as (n, 2) arrays of (lon, lat) degrees."""
    topo = _topology("land-110m.json" if scale == "110m" else "countries-50m.json")
    arcs = _arcs(topo)
    ids = set().union(*(_arc_ids(g) for g in topo["objects"]["land"]["geometries"]))
    return [part for i in sorted(ids) for part in _split_at_antimeridian(arcs[i])]


def border_lines() -> list[np.ndarray]:
    """Land borders at 1:50m: arcs shared by two different countries, (n, 2) lon/lat arrays."""
    topo = _topology("countries-50m.json")
    arcs = _arcs(topo)
    users: dict[int, int] = {}
    for g in topo["objects"]["countries"]["geometries"]:
        for i in _arc_ids(g):
            users[i] = users.get(i, 0) + 1
    return [part for i in sorted(users) if users[i] > 1
            for part in _split_at_antimeridian(arcs[i])]


def map_features(*, coastlines: bool, borders: bool, scale: str = "110m") -> list:
    """Cartopy features (shipped geometry, PlateCarree) to draw above the field.

    Parameters
    ----------
    coastlines, borders : bool
        Which lines to draw.
    scale : {"110m", "50m"}
        Natural Earth scale of the coastlines (borders are always 1:50m).

    Returns
    -------
    list of cartopy.feature.ShapelyFeature
    """
    import cartopy.crs as ccrs
    from cartopy.feature import ShapelyFeature
    from shapely.geometry import MultiLineString

    features = []
    if coastlines:
        features.append(ShapelyFeature([MultiLineString(coastline_lines(scale))],
                                       ccrs.PlateCarree(), facecolor="none",
                                       **COASTLINE_STYLE))
    if borders:
        features.append(ShapelyFeature([MultiLineString(border_lines())], ccrs.PlateCarree(),
                                       facecolor="none", **BORDER_STYLE))
    return features
