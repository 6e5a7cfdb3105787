"""Map projections, coastlines and borders for the frames, from geometry shipped with ncreel.

Coastlines and land borders come from Natural Earth (public domain) files in
``ncreel/data/natural_earth`` (TopoJSON, decoded here), never from cartopy's downloader:
compute nodes usually have no network. Coastlines are the rings of the ``land`` object;
land borders are the arcs two different ``countries`` share (as topojson's ``mesh`` with
``a !== b``). The scale follows cartopy's ``AdaptiveScaler`` for its own features: 1:110m,
1:50m when the map spans less than 50 degrees.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ncreel.region.naturalearth import (
    border_lines,
    coastline_lines,
    country_lines,
    split_at_antimeridian,
)

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
    cartopy.crs.Projection or PlainPlateCarree
        PlateCarree with at most a ``central_longitude`` is a :class:`PlainPlateCarree`:
        the same map, drawn on plain matplotlib axes without importing cartopy.

    Raises
    ------
    ValueError
        If `name` is not a cartopy projection or `params` do not fit it.
    """
    if str(name) == "PlateCarree" and set(params or {}) <= {"central_longitude"}:
        return PlainPlateCarree(**dict(params or {}))
    import cartopy.crs as ccrs

    cls = getattr(ccrs, str(name), None)
    if not (isinstance(cls, type) and issubclass(cls, ccrs.Projection)):
        raise ValueError(f"map.projection '{name}' is not a cartopy.crs projection class "
                         "(e.g. PlateCarree, Robinson, Mollweide, LambertConformal)")
    try:
        return cls(**dict(params or {}))
    except (TypeError, ValueError) as err:
        raise ValueError(f"map.projection_params {dict(params or {})} for {name}: {err}") from err


class PlainPlateCarree:
    """Cartopy's ``PlateCarree`` map (x = longitude - central longitude, y = latitude).

    The default projection needs no map library: a render worker that draws it on plain
    matplotlib axes does not import cartopy, pyproj and shapely (18 MiB of its resident
    memory). It offers the parts of a cartopy projection ncreel uses.

    Parameters
    ----------
    central_longitude : float
        Longitude (degrees) at the map's centre; its edge is 180 degrees away.
    """

    def __init__(self, central_longitude: float = 0.0) -> None:
        try:
            self.central_longitude = float(central_longitude)
        except (TypeError, ValueError) as err:
            raise ValueError(f"map.projection_params central_longitude for PlateCarree: "
                             f"{err}") from err
        self.proj4_params = {"proj": "eqc", "lon_0": self.central_longitude}
        self.x_limits = (-180.0, 180.0)
        self.y_limits = (-90.0, 90.0)

    def transform_points(self, src_crs, x, y) -> np.ndarray:
        """Map coordinates of longitudes `x` and latitudes `y` (degrees; `src_crs` ignored).

        Returns
        -------
        numpy.ndarray, shape (*x.shape, 3)
            x in [-180, 180] (longitudes beyond the map's edge wrapped, the edge itself
            kept on its side), y, 0.
        """
        x = self.map_x(x)
        y = np.broadcast_to(np.asarray(y, float), x.shape)
        return np.stack([x, y, np.zeros_like(x)], axis=-1)

    def map_x(self, lon) -> np.ndarray:
        """Map x of longitudes `lon` (degrees, any shape): the x of :meth:`transform_points`."""
        x = np.asarray(lon, float) - self.central_longitude
        out = (x < -180.0) | (x > 180.0)
        if out.any():
            x[out] = (x[out] + 180.0) % 360.0 - 180.0
        return x

    def __eq__(self, other) -> bool:
        return (type(other) is type(self)
                and other.central_longitude == self.central_longitude)

    def __hash__(self) -> int:
        return hash(("PlainPlateCarree", self.central_longitude))

    def __repr__(self) -> str:
        return f"PlainPlateCarree(central_longitude={self.central_longitude:g})"


class MapLines:
    """Lines (coastlines, borders) in longitude/latitude, drawn above the field.

    Parameters
    ----------
    lines : list of numpy.ndarray, each (n, 2)
        (longitude, latitude) vertices, degrees.
    style : mapping
        ``edgecolor``, ``linewidth``, optional ``linestyle``.
    """

    def __init__(self, lines: list[np.ndarray], style: Mapping) -> None:
        self.lines, self.style = lines, dict(style)

    def add_to(self, ax, projection) -> None:
        """Draw the lines on `ax` (a cartopy ``GeoAxes``, or plain axes of a PlainPlateCarree).

        Parameters
        ----------
        ax : matplotlib.axes.Axes
        projection : cartopy.crs.Projection or PlainPlateCarree
            The axes' map projection.
        """
        if not isinstance(projection, PlainPlateCarree):
            import cartopy.crs as ccrs
            from cartopy.feature import ShapelyFeature
            from shapely.geometry import MultiLineString

            ax.add_feature(ShapelyFeature([MultiLineString(self.lines)], ccrs.PlateCarree(),
                                          facecolor="none", **self.style))
            return
        from matplotlib.collections import LineCollection

        parts = []
        for line in self.lines:
            xy = projection.transform_points(None, line[:, 0], line[:, 1])[:, :2]
            # A line crossing the map's edge is cut there, not drawn across the map.
            parts.extend(p for p in split_at_antimeridian(xy) if len(p) > 1)
        style = self.style
        # Cartopy's feature artists draw at zorder 1.5, above the field's mesh.
        ax.add_collection(LineCollection(parts, colors=style["edgecolor"],
                                         linewidths=style["linewidth"],
                                         linestyles=style.get("linestyle", "-"),
                                         zorder=1.5), autolim=False)


#: Style of the gridlines (``map.gridlines``): thin dotted grey, above the field.
GRID_STYLE = {"color": "0.25", "linewidth": 0.5, "linestyle": ":"}


def degree_label(value: float, kind: str) -> str:
    """``30°E``, ``120°W``, ``0°``, ``45°N``, ``15°S`` for a longitude or latitude."""
    if kind == "lon":
        value = (value + 180.0) % 360.0 - 180.0
        hemi = "E" if value > 0 else "W" if value < 0 and value != -180.0 else ""
    else:
        hemi = "N" if value > 0 else "S" if value < 0 else ""
    return f"{abs(value):g}°{hemi}"


def add_gridlines(ax, projection) -> None:
    """Gridlines at round longitudes / latitudes, labelled on the left and bottom.

    On a :class:`PlainPlateCarree` map the axes' own ticks and grid (map x is longitude
    minus the central longitude); on a cartopy map its ``Gridliner``. Both are drawn
    above the field (and so composited onto each frame as the coastlines are).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    projection : cartopy.crs.Projection or PlainPlateCarree
    """
    if not isinstance(projection, PlainPlateCarree):
        import cartopy.crs as ccrs

        gl = ax.gridlines(crs=ccrs.PlateCarree(), draw_labels=True, zorder=2.2,
                          **GRID_STYLE)
        gl.top_labels = gl.right_labels = False
        gl.xlabel_style = gl.ylabel_style = {"size": "small"}
        return
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    class DegreeLocator(MaxNLocator):
        # Round degrees, not round map x (x = longitude - offset, and the centre of a
        # regional map is the middle of its grid: -94.6875, say). At most as many labels
        # as fit: matplotlib's tick space allows 3 font sizes per x label and 2 per y
        # label; 175°W side by side takes about 6, 45°N one above another about 2. A
        # narrow map gets fewer, down to the one nearest its middle.
        def __init__(self, offset, per_label):
            super().__init__(nbins=5, steps=[1, 1.5, 2, 2.5, 3, 5, 10])
            self.offset, self.per_label = offset, per_label

        def tick_values(self, vmin, vmax):
            space = 10 if self.axis is None else self.axis.get_tick_space() // self.per_label
            n = max(1, min(5, space - 1))  # intervals: at most `space` ticks
            self.set_params(nbins=n, min_n_ticks=min(n, 2))
            ticks = super().tick_values(vmin + self.offset, vmax + self.offset) - self.offset
            inside = ticks[(ticks >= min(vmin, vmax)) & (ticks <= max(vmin, vmax))]
            if space < 2 and inside.size > 1:
                return inside[[np.argmin(np.abs(inside - 0.5 * (vmin + vmax)))]]
            return ticks

    centre = projection.central_longitude
    ax.xaxis.set_visible(True)
    ax.yaxis.set_visible(True)
    ax.xaxis.set_major_locator(DegreeLocator(centre, 2))
    ax.yaxis.set_major_locator(DegreeLocator(0.0, 1))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: degree_label(x + centre, "lon")))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: degree_label(y, "lat")))
    ax.tick_params(labelsize="small", length=2)
    ax.set_axisbelow(False)  # the grid above the field, as cartopy's gridliner
    ax.grid(True, zorder=2.2, **GRID_STYLE)


def map_xy(projection, lon: float, lat: float) -> tuple[float, float]:
    """Map coordinates of one point (`lon`, `lat` in degrees) in `projection`.

    Parameters
    ----------
    projection : cartopy.crs.Projection or PlainPlateCarree

    Returns
    -------
    x, y : float
        In the projection's units (degrees for PlateCarree, metres for most others).
    """
    if isinstance(projection, PlainPlateCarree):
        src = None
    else:
        import cartopy.crs as ccrs

        src = ccrs.PlateCarree()
    x, y = projection.transform_points(src, np.array([lon], float), np.array([lat], float))[0, :2]
    return float(x), float(y)


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


def map_features(*, coastlines: bool, borders: bool, scale: str = "110m") -> list[MapLines]:
    """Lines (shipped geometry, longitude/latitude) to draw above the field.

    Parameters
    ----------
    coastlines, borders : bool
        Which lines to draw.
    scale : {"110m", "50m"}
        Natural Earth scale of the coastlines (borders are always 1:50m).

    Returns
    -------
    list of MapLines
        Drawn by :meth:`MapLines.add_to` (as cartopy features on a cartopy map).
    """
    features = []
    if coastlines:
        features.append(MapLines(coastline_lines(scale), COASTLINE_STYLE))
    if borders:
        features.append(MapLines(border_lines(), BORDER_STYLE))
    return features


#: Style of a named country's outline (drawn once, above the field).
OUTLINE_STYLE = {"edgecolor": "black", "linewidth": 1.2}


def region_features(region) -> list:
    """Return the static overlays of the region (a country's or polygon's outline) as map lines."""
    if region is None or (region.name is None and region.file is None):
        return []
    if region.file is None:
        return [MapLines(country_lines(region.name), OUTLINE_STYLE)]
    import shapely

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
                lines.extend(p for p in split_at_antimeridian(part) if len(p) > 1)
    return [MapLines(lines, OUTLINE_STYLE)]
