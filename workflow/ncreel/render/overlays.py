"""Per-frame overlays on the map: contour lines of a second variable, vectors from u/v.

Both are ordinary matplotlib artists on the frame's axes, so a full redraw
(``FrameRenderer(blit=False)``) draws them as matplotlib would. On the fast path they are
hidden while the background and the index image are made, and each frame draws only them
with Agg, on top of the blitted field (:meth:`ncreel.render.frame.FrameRenderer.draw`).
Their cost is bounded by the frame, not the grid: contours are traced (contourpy, the
tracer behind ``Axes.contour``) on the field taken every ``k``-th cell (and the last row
and column) so that it has at most about one cell per :data:`CONTOUR_PIXELS_PER_CELL`
pixels of the frame, and vectors are drawn at a fixed number of grid points (``density``
arrows across the map). Contour levels and the vectors' scale come from the statistics
pass, so they are the same in every frame.
"""

from __future__ import annotations

import math

import numpy as np

#: Frame pixels per traced cell, at least (the tracing's cost falls with its square).
#: Measured at 1920 x 1080 on a 0.25 degree global grid (every 3rd cell traced, 3.7 map
#: pixels per traced cell): lines within 0.02 pixels of those traced on every cell on a
#: smooth field, within 1.4 pixels (99 % within 0.8) with 2 degree bumps; docs/movies.md.
CONTOUR_PIXELS_PER_CELL = 4.0
#: Stacking of the overlays: above coastlines (1.5) and the field, below the axes' spines.
CONTOUR_ZORDER = 2.3
VECTOR_ZORDER = 2.35
#: Longest arrow (the movie's largest speed) as a share of the distance between arrows.
ARROW_FILL = 0.9


def _geo(projection):
    from ncreel.render.maps import PlainPlateCarree

    return None if isinstance(projection, PlainPlateCarree) else projection


def _centred(lon: np.ndarray, projection) -> np.ndarray:
    # Longitudes within 180 degrees of the map's centre, so lines are traced where the map
    # shows them (a line is never drawn across the map's edge).
    centre = float(projection.proj4_params.get("lon_0", 0.0))
    return centre + np.mod(np.asarray(lon, float) - centre + 180.0, 360.0) - 180.0


def _to_map(projection, lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    geo = _geo(projection)
    if geo is None:
        return lon - projection.central_longitude, np.asarray(lat, float)
    import cartopy.crs as ccrs

    pts = geo.transform_points(ccrs.PlateCarree(), np.asarray(lon, float),
                               np.asarray(lat, float))
    return pts[..., 0], pts[..., 1]


class _GridOverlay:
    """Cell centres of a latitude/longitude grid, ordered as the map shows them."""

    def _layout(self, lon, lat, shape, projection) -> tuple[np.ndarray, np.ndarray]:
        ny, nx = shape
        if projection is None:
            raise ValueError("overlays need a grid with latitude/longitude")
        lon, lat = np.asarray(lon, float), np.asarray(lat, float)
        if lon.shape not in ((nx,), (ny, nx)):
            raise ValueError("overlays are not supported yet on grids given by cell corners")
        self._cols = None
        if lon.ndim == 1:
            lon = _centred(lon, projection)
            order = np.argsort(lon, kind="stable")
            if (order != np.arange(nx)).any():
                self._cols = order
                lon = lon[order]
            lon, lat = np.meshgrid(lon, lat)
        else:
            lon = _centred(lon, projection)
        return lon, lat


class ContourOverlay(_GridOverlay):
    """Contour lines of a field at fixed levels, traced each frame.

    Parameters
    ----------
    levels : sequence of float
        Values of the lines, in the overlaid variable's units (the same in every frame).
    color : str
        Line colour.
    linewidth : float
        Line width in points.
    """

    def __init__(self, levels, *, color: str = "black", linewidth: float = 0.8) -> None:
        self.levels = [float(v) for v in levels]
        self.color, self.linewidth = color, float(linewidth)
        self.artist = None

    def attach(self, ax, lon, lat, shape, projection, size) -> None:
        """Add the (empty) line artist to `ax` and lay out the traced grid.

        Parameters
        ----------
        ax : matplotlib.axes.Axes
            The frame's map axes.
        lon, lat : numpy.ndarray
            Cell-centre longitudes / latitudes (degrees): 1-D ``(nx,)``, ``(ny,)`` or 2-D
            ``(ny, nx)``.
        shape : (int, int)
            Grid shape ``(ny, nx)``.
        projection : cartopy.crs.Projection or ncreel.render.maps.PlainPlateCarree
        size : (int, int)
            Frame size in pixels ``(width, height)``: bounds the traced grid.

        Raises
        ------
        ValueError
            Without a map projection, or for a grid given by cell corners.
        """
        from matplotlib.lines import Line2D

        lon, lat = self._layout(lon, lat, shape, projection)
        ny, nx = shape
        k = max(1, math.ceil(max(nx / (size[0] / CONTOUR_PIXELS_PER_CELL),
                                 ny / (size[1] / CONTOUR_PIXELS_PER_CELL))))
        self._k = k
        # Every k-th row and column and always the last: lines reach the grid's edge
        # (without it a line ending in the last k - 1 columns stopped short of the map's
        # edge, by up to 12 pixels at 1920 x 1080 where it ran along that edge).
        self._rows, self._cols_k = _every(ny, k), _every(nx, k)
        self._lon = np.ascontiguousarray(lon[np.ix_(self._rows, self._cols_k)])
        self._lat = np.ascontiguousarray(lat[np.ix_(self._rows, self._cols_k)])
        # Columns in the map's order, then every k-th: one gather per frame.
        self._take = (self._cols_k if self._cols is None else self._cols[self._cols_k])
        self._projection = projection
        # One line, its pieces separated by NaN: one Agg path per frame, simplified as
        # Line2D paths are (measured 25 % faster to draw than a LineCollection).
        self.artist = Line2D([], [], color=self.color, linewidth=self.linewidth,
                             zorder=CONTOUR_ZORDER)
        ax.add_line(self.artist)

    def vertices(self, field: np.ndarray) -> np.ndarray:
        """Contour lines of `field` (ny, nx) in map coordinates.

        Returns
        -------
        numpy.ndarray, shape (n, 2)
            x, y of every line's vertices, lines separated by a row of NaN.
        """
        import contourpy

        if len(self._rows) < 2 or len(self._take) < 2 or not self.levels:
            return np.empty((0, 2))
        # The traced cells only, gathered in one contiguous float64 array; masked only
        # when a cell has no value (a masked array costs a copy and a pass more).
        z = np.asarray(field).take(self._rows, 0).take(self._take, 1).astype(float,
                                                                              copy=False)
        if not np.isfinite(z).all():
            z = np.ma.masked_invalid(z)
            if z.mask.all():
                return np.empty((0, 2))
        # Levels outside this frame's values draw nothing, but each costs contourpy a pass
        # over every cell (a tenth of the tracing per level of ten).
        lo, hi = float(z.min()), float(z.max())
        levels = [v for v in self.levels if lo <= v <= hi]
        if not levels:
            return np.empty((0, 2))
        gen = contourpy.contour_generator(self._lon, self._lat, z, name="serial",
                                          line_type=contourpy.LineType.ChunkCombinedNan)
        parts = [p for chunks in gen.multi_lines(levels) for p in chunks[0]
                 if p is not None and len(p)]
        if not parts:
            return np.empty((0, 2))
        gap = np.full((1, 2), np.nan)
        pts = np.concatenate([q for p in parts for q in (p, gap)][:-1])
        x, y = _to_map(self._projection, pts[:, 0], pts[:, 1])
        xy = np.column_stack([x, y])
        xy[~np.isfinite(xy).all(axis=1)] = np.nan  # outside a projection: a gap
        return xy

    def lines(self, field: np.ndarray) -> list[np.ndarray]:
        """Contour lines of `field` (ny, nx) in map coordinates, one (n, 2) array each."""
        xy = self.vertices(field)
        cut = np.flatnonzero(np.isnan(xy[:, 0]))
        pieces = (p[np.isfinite(p[:, 0])] for p in np.split(xy, cut))
        return [p for p in pieces if len(p) > 1]

    def update(self, field: np.ndarray) -> None:
        """Trace `field` (ny, nx; NaN: no data) into the artist."""
        xy = self.vertices(field)
        self.artist.set_data(xy[:, 0], xy[:, 1])


def _every(n: int, k: int) -> np.ndarray:
    # 0, k, 2k, ... and n - 1.
    idx = np.arange(0, n, k)
    return idx if idx[-1] == n - 1 else np.append(idx, n - 1)


class VectorOverlay(_GridOverlay):
    """Arrows of a u/v pair at a fixed subset of the cells, at a fixed scale.

    Parameters
    ----------
    speed : float
        The speed drawn as the longest arrow (:data:`ARROW_FILL` of the distance between
        arrows): the movie's largest, from the statistics pass, in the variables' units.
    density : int
        Arrows across the map's width (every ``ceil(nx / density)``-th cell in each
        direction).
    color : str
        Arrow colour.
    """

    def __init__(self, speed: float, *, density: int = 20, color: str = "black") -> None:
        self.speed = float(speed) if speed and np.isfinite(speed) and speed > 0 else 1.0
        self.density, self.color = max(1, int(density)), color
        self.artist = None

    def attach(self, ax, lon, lat, shape, projection, size) -> None:
        """Add the arrows (none yet) to `ax`; arguments as :meth:`ContourOverlay.attach`."""
        from matplotlib.patches import PathPatch
        from matplotlib.path import Path
        from matplotlib.transforms import IdentityTransform

        lon, lat = self._layout(lon, lat, shape, projection)
        ny, nx = shape
        step = max(1, math.ceil(nx / self.density))
        self._rows = slice(step // 2, ny, step)
        self._colsel = slice(step // 2, nx, step)
        self._plon, self._plat = lon[self._rows, self._colsel], lat[self._rows, self._colsel]
        # The arrows' cells of the field as read: only they are gathered each frame (the
        # whole field reordered to the map's columns is a frame-sized copy per variable).
        cols = np.arange(nx)[self._colsel]
        self._take_rows = np.arange(ny)[self._rows]
        self._take_cols = cols if self._cols is None else self._cols[cols]
        self._projection = projection
        x, y = _to_map(projection, self._plon, self._plat)
        self._xy = np.column_stack([np.ravel(x), np.ravel(y)])
        #: Arrows drawn (grid points of the subset).
        self.n_arrows = len(self._xy)
        self._spacing = step / nx  # of the axes' width
        self._ax = ax
        # All arrows as one filled path in pixels: one Agg fill per frame (a Quiver of
        # 1800 arrows draws 1800 paths, about 10x slower).
        self.artist = PathPatch(Path(np.zeros((1, 2))), facecolor=self.color,
                                edgecolor="none", linewidth=0, zorder=VECTOR_ZORDER,
                                transform=IdentityTransform())
        ax.add_artist(self.artist)

    def update(self, u: np.ndarray, v: np.ndarray) -> None:
        """Set the arrows from `u`, `v` (ny, nx; eastward and northward; NaN: no arrow)."""
        from matplotlib.path import Path

        uu, vv = (np.asarray(a).take(self._take_rows, 0).take(self._take_cols, 1)
                  .astype(float, copy=False) for a in (u, v))
        geo = _geo(self._projection)
        if geo is not None:  # east/north to the map's directions, same length
            import cartopy.crs as ccrs

            uu, vv = geo.transform_vectors(ccrs.PlateCarree(), self._plon, self._plat, uu, vv)
        uu, vv = np.ravel(uu), np.ravel(vv)
        speed = np.hypot(uu, vv)
        ok = np.isfinite(speed) & (speed > 0) & np.isfinite(self._xy).all(axis=1)
        self.artist.set_path(Path(arrow_polygons(
            self._ax.transData.transform(self._xy[ok]), uu[ok] / speed[ok],
            vv[ok] / speed[ok], speed[ok] / self.speed * ARROW_FILL * self._spacing
            * self._ax.bbox.width), _arrow_codes(int(ok.sum()))))


def _arrow_codes(n: int) -> np.ndarray:
    from matplotlib.path import Path

    one = np.array([Path.MOVETO] + [Path.LINETO] * 6 + [Path.CLOSEPOLY], Path.code_type)
    return np.tile(one, max(n, 0)) if n else np.array([Path.MOVETO], Path.code_type)


def arrow_polygons(centre: np.ndarray, dx: np.ndarray, dy: np.ndarray,
                   length: np.ndarray) -> np.ndarray:
    """Vertices of arrows centred on `centre`, pointing along (`dx`, `dy`), in pixels.

    Each arrow is a closed 7-point polygon (shaft and head, 8 vertices with the closing
    one): shaft width ``w`` (a tenth of the longest arrow, 1 to 3 pixels), head 3 ``w``
    wide and 4 ``w`` long; an arrow shorter than its head is scaled down whole.

    Parameters
    ----------
    centre : numpy.ndarray, shape (n, 2)
        Display coordinates (pixels) of each arrow's middle.
    dx, dy : numpy.ndarray, shape (n,)
        Unit direction on the screen.
    length : numpy.ndarray, shape (n,)
        Lengths in pixels.

    Returns
    -------
    numpy.ndarray, shape (8 n, 2)
        With :func:`_arrow_codes` a :class:`matplotlib.path.Path`; one vertex when n is 0.
    """
    n = len(centre)
    if n == 0:
        return np.zeros((1, 2))
    w = np.clip(0.1 * length.max(), 1.0, 3.0)
    ww = np.minimum(w, length / 4.0)  # short arrows: all of it scaled down
    hl, hw = 4.0 * ww, 3.0 * ww
    half = length / 2.0
    # Along the arrow (a) and across it (b), tip first, anticlockwise; closing vertex last.
    a = np.stack([half, half - hl, half - hl, -half, -half, half - hl, half - hl, half], 1)
    b = np.stack([0 * ww, hw / 2, ww / 2, ww / 2, -ww / 2, -ww / 2, -hw / 2, 0 * ww], 1)
    x = centre[:, :1] + a * dx[:, None] - b * dy[:, None]
    y = centre[:, 1:] + a * dy[:, None] + b * dx[:, None]
    return np.column_stack([x.ravel(), y.ravel()])


#: Settings of ``contours`` / ``vectors`` not given (the schema holds no nested defaults
#: under a null-able key: Snakemake would set them on null).
CONTOUR_DEFAULTS = {"levels": 10, "colour": "black", "linewidth": 0.8}
VECTOR_DEFAULTS = {"density": 20, "colour": "black"}


def overlay_settings(contours, vectors) -> tuple[dict | None, dict | None]:
    """Config ``contours`` and ``vectors`` with the settings not given filled in.

    Returns
    -------
    contours, vectors : dict or None
        None where the config has none.
    """
    return ({**CONTOUR_DEFAULTS, **contours} if contours else None,
            {**VECTOR_DEFAULTS, **vectors} if vectors else None)


def overlay_variables(contours, vectors) -> list[tuple[str, ...]]:
    """Variables each overlay reads, in drawing order: ``[(c,), (u, v)]``."""
    out = []
    if contours:
        out.append((contours["variable"],))
    if vectors:
        out.append((vectors["u"], vectors["v"]))
    return out


def check_overlays(series, contours, vectors) -> None:
    """Stop before any job when the overlays cannot be drawn on `series`.

    Parameters
    ----------
    series : ncreel.input.source.Series
        The movie's series (after its region cut).
    contours, vectors : mapping or None
        Config ``contours`` / ``vectors``.

    Raises
    ------
    NcreelError
        One line: overlays on a mesh or a grid without latitude/longitude (not supported
        yet), an unknown colour or variable, or a variable whose dimensions are not the
        series' grid.
    """
    from ncreel.core.errors import NcreelError

    names = overlay_variables(contours, vectors)
    if not names:
        return
    key = "contours" if contours else "vectors"
    if getattr(series, "mesh", None) is not None:
        raise NcreelError(f"config '{key}': overlays are not supported yet on unstructured "
                          f"meshes ('{series.paths[0]}'); remove {key}")
    if not series.has_lat_lon:
        raise NcreelError(f"config '{key}': overlays need a grid with latitude/longitude "
                          f"cell centres ('{series.paths[0]}' has none); remove {key}")
    if series.cell_corners() is not None:
        raise NcreelError(f"config '{key}': overlays are not supported yet on grids in "
                          f"projection x/y with a CF grid mapping ('{series.paths[0]}', e.g. "
                          f"rotated pole or Lambert); remove {key}")
    from matplotlib.colors import is_color_like

    for which, settings in (("contours", contours), ("vectors", vectors)):
        if settings and not is_color_like(settings["colour"]):
            raise NcreelError(f"config '{which}.colour': '{settings['colour']}' is not a "
                              "matplotlib colour (e.g. black, white, '#336699')")
    for group, what in zip(names, ["contours.variable"] * bool(contours)
                           + ["vectors.u/v"] * bool(vectors), strict=True):
        for name in group:
            try:
                series.read_variable(name, 0, min(1, series.n_time))
            except NcreelError as err:
                raise NcreelError(f"config '{what}': {err}") from None


def read_overlay_fields(series, contours, vectors, start: int, stop: int) -> list:
    """Each overlay's arrays for time steps ``start:stop``: ``[(c,), (u, v)]``.

    Returns
    -------
    list of tuple of numpy.ndarray
        Each array of shape (stop - start, ny, nx) (a variable without time repeated).
    """
    out = []
    for group in overlay_variables(contours, vectors):
        arrays = []
        for name in group:
            a = series.read_variable(name, start, stop)
            if a.ndim == 2:
                a = np.broadcast_to(a, (stop - start, *a.shape))
            arrays.append(a)
        out.append(tuple(arrays))
    return out


def overlay_limits(series, contours, vectors, *, max_block_bytes: int = 32 * 2**20,
                   n_time: int | None = None, warn: bool = True) -> dict:
    """Contour levels and the vectors' largest speed over the whole series (one pass).

    Parameters
    ----------
    series : ncreel.input.source.Series
    contours : mapping or None
        ``variable``; ``levels``: a count (that many round values between the variable's
        smallest and largest value, :class:`matplotlib.ticker.MaxNLocator`) or the list
        of values.
    vectors : mapping or None
        ``u`` and ``v``.
    n_time : int, optional
        Only the first `n_time` steps (None: all).
    warn : bool
        Say which levels no frame reaches (False for a probe of a few steps).

    Returns
    -------
    dict
        ``contour_levels`` (list of float) and / or ``vector_speed`` (the largest
        ``hypot(u, v)``, the variables' units); empty without overlays. Only finite
        values count (NaN and ±inf cells draw no line or arrow).
    """
    if not (contours or vectors):
        return {}
    lo, hi, speed = np.inf, -np.inf, 0.0
    frame_lo, frame_hi = [], []  # each frame's finite range: which levels draw a line
    n = max(1, int(max_block_bytes // max(series.ny * series.nx * 8 * 3, 1)))
    stop = series.n_time if n_time is None else min(n_time, series.n_time)
    for t0 in range(0, stop, n):
        fields = read_overlay_fields(series, contours, vectors, t0, min(t0 + n, stop))
        # Finite values only, as the colour limits: one inf cell would leave no
        # contour level, or shrink every arrow to nothing.
        if contours:
            c = fields[0][0]
            ok = np.isfinite(c)
            frame_lo.append(np.where(ok, c, np.inf).min(axis=(1, 2)))
            frame_hi.append(np.where(ok, c, -np.inf).max(axis=(1, 2)))
            c = c[ok]
            if c.size:
                lo, hi = min(lo, float(c.min())), max(hi, float(c.max()))
        if vectors:
            u, v = fields[-1]
            s = np.hypot(u, v)
            s = s[np.isfinite(s)]
            if s.size:
                speed = max(speed, float(s.max()))
    out = {}
    if contours:
        levels = contours["levels"]
        if isinstance(levels, int):
            from matplotlib.ticker import MaxNLocator

            ticks = MaxNLocator(levels + 1).tick_values(lo, hi) if lo < hi else [lo]
            levels = [float(v) for v in ticks if lo <= v <= hi] if np.isfinite(lo) else []
        out["contour_levels"] = [float(v) for v in levels]
        if warn:
            _say_unreached_levels(contours["variable"], out["contour_levels"], lo, hi,
                                  np.concatenate([np.empty(0), *frame_lo]),
                                  np.concatenate([np.empty(0), *frame_hi]))
    if vectors:
        out["vector_speed"] = speed
    return out


def _say_unreached_levels(variable: str, levels: list, lo: float, hi: float,
                          frame_lo: np.ndarray, frame_hi: np.ndarray) -> list:
    # A level draws a line in a frame only where the frame has values on both sides of it
    # (a frame reaching it only at its minimum or maximum draws at most a point). Levels no
    # frame reaches are said once, in the statistics log: a movie without the contour
    # lines asked for must not look as if there were none to draw.
    import logging

    log = logging.getLogger(__name__)
    levels_ = np.asarray(levels, float)
    reached = ((frame_lo[:, None] < levels_[None, :])
               & (levels_[None, :] < frame_hi[:, None])).any(axis=0)
    missing = [float(v) for v in levels_[~reached]]
    span = (f"its values over the run are {lo:.6g}..{hi:.6g}" if np.isfinite(lo)
            else "it has no finite value in any frame")
    if not levels:
        log.warning("contours: no levels for '%s' (%s): no contour line is drawn",
                    variable, span)
    elif len(missing) == len(levels):
        log.warning("contours: no frame of '%s' crosses any of the levels %s (%s): no "
                    "contour line is drawn in any frame; set contours.levels within that "
                    "range", variable, _short(missing), span)
    elif missing:
        log.warning("contours: no frame of '%s' crosses the levels %s (%s): those lines are "
                    "never drawn", variable, _short(missing), span)
    return missing


def _short(values: list) -> str:
    text = ", ".join(f"{v:.6g}" for v in values[:8])
    return f"[{text}{', ...' if len(values) > 8 else ''}]"


def make_overlays(contours, vectors, limits: dict | None) -> list:
    """Build the overlays of config ``contours`` / ``vectors`` at the statistics' `limits`."""
    limits = limits or {}
    out = []
    if contours:
        out.append(ContourOverlay(limits.get("contour_levels", []), color=contours["colour"],
                                  linewidth=contours["linewidth"]))
    if vectors:
        out.append(VectorOverlay(limits.get("vector_speed", 1.0), density=vectors["density"],
                                 color=vectors["colour"]))
    return out
