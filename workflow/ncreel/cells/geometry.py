"""Cell geometry: corners and bounds of the grid cells, as polygons for the table.

Bounds follow the CF conventions, section 7.1 "Cell Boundaries". Every polygon is
written as EPSG:4326 (WGS 84 longitude/latitude, longitudes in -180…180): a cell is moved
by whole turns so its centre lies in [-180, 180), and a cell that then still crosses the
antimeridian (or goes round a pole) is split there into the parts of a valid
``MULTIPOLYGON`` by the ``antimeridian`` package, as GeoJSON (RFC 7946, section 3.1.9)
asks. Grids and meshes share this code (:func:`fold_corners`, :func:`multipolygon_text`,
:func:`split_cells`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ncreel.cells.context import GEOMETRY_COLUMN
from ncreel.core.errors import NcreelError
from ncreel.input.cfaxes import cf_bounds
from ncreel.input.gridmap import edges_1d

#: Index ranges of corner k (lower-left, lower-right, upper-right, upper-left) of every
#: cell in a (ny + 1, nx + 1) corner array.
_CUT = [(slice(0, -1), slice(0, -1)), (slice(0, -1), slice(1, None)),
        (slice(1, None), slice(1, None)), (slice(1, None), slice(0, -1))]


def corners_from_centres(c: np.ndarray) -> np.ndarray:
    """Cell edges from centres: midpoints between neighbours, extrapolated at the ends.

    Parameters
    ----------
    c : numpy.ndarray, shape (n,)
        Cell centres along one axis (n >= 1; a single cell gets edges ±0.5).

    Returns
    -------
    numpy.ndarray, shape (n + 1,), float64
    """
    return edges_1d(c)


def corners_2d(c: np.ndarray) -> np.ndarray:
    """Cell corners of a curvilinear grid: mean of the 4 surrounding (extrapolated) centres.

    Parameters
    ----------
    c : numpy.ndarray, shape (ny, nx)
        Centre latitude or longitude.

    Returns
    -------
    numpy.ndarray, shape (ny + 1, nx + 1), float64
    """
    c = np.asarray(c, dtype=np.float64)
    # Pad by linear extrapolation so edge corners sit half a cell outside the edge centres.
    p = np.pad(c, 1, mode="reflect", reflect_type="odd")
    return (p[:-1, :-1] + p[1:, :-1] + p[:-1, 1:] + p[1:, 1:]) / 4


def bounds_1d(ds, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Lower and upper cell edges of 1-D coordinate `name` from its CF ``bounds`` variable.

    CF conventions section 7.1: ``bounds`` names a ``(n, 2)`` variable. Bounds need not be
    contiguous, so each cell keeps its own pair.

    Returns
    -------
    (lo, hi) : tuple of numpy.ndarray, each shape (n,), float64; or None
        None when the coordinate has no usable ``bounds`` attribute (then use
        :func:`corners_from_centres`).
    """
    b = cf_bounds(ds, name) if name in ds.variables else None
    return None if b is None else (b.min(axis=1), b.max(axis=1))


def _edges(ds, name: str, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    found = bounds_1d(ds, name) if ds is not None else None
    if found is not None:
        return found
    e = corners_from_centres(centres)
    return np.minimum(e[:-1], e[1:]), np.maximum(e[:-1], e[1:])


#: Decimal places kept of a longitude moved by whole turns (1e-10 degree is about 11
#: micrometres): ``224.06 - 360`` is ``-135.94000000000003`` in binary floating point; rounded,
#: it is written ``-135.94``. Longitudes that are not moved are written exactly as stored.
TURN_DECIMALS = 10


def fold_longitude(lon: np.ndarray) -> np.ndarray:
    """Longitudes moved by whole turns into [-180, 180) degrees (EPSG:4326's range).

    Parameters
    ----------
    lon : array_like, any shape, degrees
        E.g. a file's 0…360 cell centres.

    Returns
    -------
    numpy.ndarray, same shape, float64
        ``lon - 360 k``; values already in [-180, 180) are returned unchanged (bit for
        bit), moved ones rounded to :data:`TURN_DECIMALS` places. NaN stays NaN.
    """
    lon = np.asarray(lon, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        turns = np.floor((lon + 180.0) / 360.0)
        moved = lon - 360.0 * turns
        return np.where(turns != 0, np.round(moved, TURN_DECIMALS), lon)


def fold_corners(corner_lon: np.ndarray, centre_lon: np.ndarray) -> np.ndarray:
    """Cell corners moved by whole turns to within 180 degrees of the folded cell centre.

    Each corner is moved by its own whole number of turns so it lies within 180 degrees
    of :func:`fold_longitude` of its cell's centre; corners of neighbouring cells stored
    with the same value and moved by the same turns stay bit-identical.

    Parameters
    ----------
    corner_lon : numpy.ndarray, shape (n, m), degrees
        Corners of n cells (any turn).
    centre_lon : numpy.ndarray, shape (n,), degrees
        Cell centres (any turn).

    Returns
    -------
    numpy.ndarray, shape (n, m), float64
        May leave [-180, 180] for a cell crossing the antimeridian (see
        :func:`needs_split`).
    """
    c = np.asarray(corner_lon, dtype=np.float64)
    ref = fold_longitude(centre_lon)[:, None]
    with np.errstate(invalid="ignore"):
        turns = np.round((ref - c) / 360.0)
        return np.where(turns != 0, np.round(c + 360.0 * turns, TURN_DECIMALS), c)


def at_pole(corner_lat: np.ndarray) -> np.ndarray:
    """Which corners are on a pole (latitude +-90), where longitude has no meaning.

    Returns
    -------
    numpy.ndarray of bool, same shape as `corner_lat`
    """
    return np.abs(np.asarray(corner_lat)) >= 90.0


def encloses_pole(corner_lon: np.ndarray, corner_lat: np.ndarray) -> np.ndarray:
    """Whether each closed ring of corners goes round a pole (its longitudes wind a turn).

    Corners on the pole itself are left out: a cell with a corner on the pole touches it
    but does not go round it.

    Parameters
    ----------
    corner_lon, corner_lat : numpy.ndarray, shape (n, m), degrees
        Corners in ring order; a ring shorter than m repeats its first corner to the end.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
    """
    lon = np.where(at_pole(corner_lat), np.nan, corner_lon)
    closed = np.concatenate([lon, lon[:, :1]], axis=1)
    step = (np.diff(closed, axis=1) + 180.0) % 360.0 - 180.0
    return np.abs(np.nansum(step, axis=1)) > 180.0


def needs_split(folded_lon: np.ndarray) -> np.ndarray:
    """Whether a cell's folded corners (:func:`fold_corners`) cross the antimeridian.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
    """
    # fmin/fmax skip NaN corners (no polygon) without a warning for all-NaN rows.
    with np.errstate(invalid="ignore"):
        return ((np.fmin.reduce(folded_lon, axis=1) < -180.0)
                | (np.fmax.reduce(folded_lon, axis=1) > 180.0))


def multipolygon_text(parts: list):
    """EWKT ``SRID=4326;MULTIPOLYGON(((x y,...,x0 y0)),...)`` of cells given corner by corner.

    The fast path for cells without shapely: one polars string expression over all
    cells, corners in shortest round-trip decimal form.

    Parameters
    ----------
    parts : list of (xs, ys)
        The polygons of every cell, the same number for each: xs and ys are lists of
        numpy.ndarray, each shape (n,), degrees, corner k of every cell in ring order
        (k = 0 … m - 1); the ring is closed here. A NaN corner makes that cell's text null.

    Returns
    -------
    polars.Series of str (nullable), length n
    """
    import polars as pl

    text: list = [pl.lit("SRID=4326;MULTIPOLYGON(")]
    for xs, ys in parts:
        text.append(pl.lit("(("))
        for k in [*range(len(xs)), 0]:
            # NaN -> null: concat_str then gives the whole text null.
            text += [pl.Series(xs[k]).fill_nan(None).cast(pl.Utf8), pl.lit(" "),
                     pl.Series(ys[k]).fill_nan(None).cast(pl.Utf8), pl.lit(",")]
        text[-1] = pl.lit(")),")
    text[-1] = pl.lit(")))")
    return pl.select(pl.concat_str(text).alias(GEOMETRY_COLUMN)).to_series()


def split_cells(lon: np.ndarray, lat: np.ndarray, count: np.ndarray, centre_lat: np.ndarray,
                pole: np.ndarray) -> list[str]:
    """EWKT MultiPolygons of cells that cross the antimeridian or go round a pole.

    A corner on a pole becomes an edge along the pole, from its neighbours' longitudes
    (the pole is a line in longitude/latitude). Each ring is then handed to
    ``antimeridian.fix_polygon`` (which splits at +-180 degrees, closes a ring round a
    pole along the antimeridian to that pole, and winds the result counter-clockwise);
    the result is made a ``MULTIPOLYGON`` without parts of zero area (and repaired by
    ``make_valid`` if it is still not valid).

    Parameters
    ----------
    lon, lat : numpy.ndarray, shape (n, m), degrees
        Corners in ring order (not closed); any turn of longitude.
    count : numpy.ndarray of int, shape (n,)
        Number of corners used of each row (the rest is padding).
    centre_lat : numpy.ndarray, shape (n,)
        Cell-centre latitude (which pole a pole cell goes round).
    pole : numpy.ndarray of bool, shape (n,)
        Cells going round a pole (:func:`encloses_pole`).

    Returns
    -------
    list of str, length n
    """
    import antimeridian
    import shapely

    out = []
    for i in range(len(lon)):
        k = int(count[i])
        x, y = _pole_edges(lon[i, :k], lat[i, :k])
        poly = shapely.Polygon(np.column_stack([fold_longitude(x), y]))
        north = bool(pole[i] and centre_lat[i] > 0)
        south = bool(pole[i] and centre_lat[i] <= 0)
        # Edges are straight in longitude/latitude (PostGIS geometry is planar), so the
        # crossing latitude is interpolated linearly, not along a great circle.
        fixed = antimeridian.fix_polygon(poly, force_north_pole=north,
                                         force_south_pole=south, fix_winding=True,
                                         great_circle=False)
        # A corner on both the pole and +-180 can leave a part of zero area (a line
        # along the antimeridian); it is not part of the cell.
        parts = [p for p in getattr(fixed, "geoms", [fixed]) if p.area > 0]
        fixed = shapely.MultiPolygon(parts)
        out.append(_ewkt(fixed) if fixed.is_valid else _valid_text(fixed))
    return out


def _ewkt(geom) -> str:
    """``SRID=4326;MULTIPOLYGON(...)`` text of a shapely (Multi)Polygon.

    Written as the fast path writes it (shortest round-trip numbers, no space after the
    type).
    """
    import shapely

    if geom.geom_type == "Polygon":
        geom = shapely.MultiPolygon([geom])
    wkt = shapely.to_wkt(geom, rounding_precision=-1, trim=True)
    return "SRID=4326;" + wkt.replace("MULTIPOLYGON (", "MULTIPOLYGON(", 1).replace(", ", ",")


def _pole_edges(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One ring's corners, each corner on a pole replaced by two at its neighbours' longitudes."""
    pole = at_pole(y)
    if not pole.any():
        return x, y
    xs, ys = [], []
    n = len(x)
    for j in range(n):
        # Two corners on the pole in a row already are such an edge.
        if pole[j] and not pole[j - 1] and not pole[(j + 1) % n]:
            xs += [x[j - 1], x[(j + 1) % n]]
            ys += [y[j], y[j]]
        else:
            xs.append(x[j])
            ys.append(y[j])
    return np.asarray(xs), np.asarray(ys)


def repair_invalid(text: np.ndarray) -> int:
    """Replace, in place, cells whose polygon is not valid (OGC) by ``make_valid``'s areas.

    A curvilinear grid's corners (averages of centres) can fold a cell over itself where
    the grid is strongly distorted; such a ring is self-intersecting, which PostGIS's
    ``ST_IsValid`` rejects and which breaks area and overlay queries.

    Parameters
    ----------
    text : numpy.ndarray of object, shape (n,)
        EWKT strings (None for cells without a polygon).

    Returns
    -------
    int
        Number of cells repaired.
    """
    import shapely

    have = np.flatnonzero(np.array([t is not None for t in text], dtype=bool))
    if not have.size:
        return 0
    geoms = shapely.from_wkt([text[i].split(";", 1)[1] for i in have])
    bad = have[~shapely.is_valid(geoms)]
    for i, g in zip(bad, geoms[~shapely.is_valid(geoms)], strict=True):
        text[i] = _valid_text(g)
    return int(bad.size)


def _strictly_convex(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether each ring of corners (shape (n, m)) turns the same way at every corner."""
    dx, dy = np.roll(x, -1, axis=1) - x, np.roll(y, -1, axis=1) - y
    cross = dx * np.roll(dy, -1, axis=1) - dy * np.roll(dx, -1, axis=1)
    return (cross > 0).all(axis=1) | (cross < 0).all(axis=1)


def _valid_text(geom) -> str | None:
    """EWKT of the areas of ``shapely.make_valid(geom)`` (None if it has no area)."""
    import shapely

    fixed = shapely.make_valid(geom)
    polys = [p for p in getattr(fixed, "geoms", [fixed]) if p.geom_type in
             ("Polygon", "MultiPolygon")]
    parts = [q for p in polys for q in getattr(p, "geoms", [p])]
    return _ewkt(shapely.MultiPolygon(parts)) if parts else None


#: Why a grid without latitude/longitude has no cell polygons, and what to do.
NO_LAT_LON_GEOMETRY = ("config key 'cells.geometry': the grid has no latitude/longitude "
                       "coordinates, so cell polygons cannot be built: set cells.geometry: "
                       "none, or name the file's latitude/longitude with lat=NAME lon=NAME")


@dataclass
class CellGeometry:
    """Corner coordinates of every cell, for the optional polygon column.

    Attributes
    ----------
    lon_c, lat_c : tuple of 4 numpy.ndarray, degrees
        Corner k (0: lower-left, 1: lower-right, 2: upper-right, 3: upper-left in index
        space) of every cell, longitudes folded (:func:`fold_corners`), latitudes within
        [-90, 90]. Rectilinear grids store 1-D per-axis edges, shape (nx,) for lon and
        (ny,) for lat; curvilinear grids store shape (ny, nx) arrays.
    rectilinear : bool
    nx : int
    split : dict of int to str
        Curvilinear grids: EWKT of every cell that crosses the antimeridian, touches or
        goes round a pole, or had to be repaired (:func:`repair_invalid`), by cell id.
    split_columns : numpy.ndarray of bool, shape (nx,); or None
        Rectilinear grids: columns whose cells cross the antimeridian (their two parts
        are written per call, which needs no shapely).
    """

    lon_c: tuple
    lat_c: tuple
    rectilinear: bool
    nx: int
    split: dict = field(default_factory=dict)
    split_columns: np.ndarray | None = None

    @classmethod
    def _rectilinear(cls, x_lo, x_hi, y_lo, y_hi, centre_lon, nx) -> CellGeometry:
        # Sorted after folding: bounds given as (5, 355) round a centre at 0 are -5…5.
        lo = np.sort(fold_corners(np.column_stack([x_lo, x_hi]), centre_lon), axis=1)
        y_lo, y_hi = (np.clip(e, -90.0, 90.0) for e in (y_lo, y_hi))
        return cls(lon_c=(lo[:, 0], lo[:, 1], lo[:, 1], lo[:, 0]),
                   lat_c=(y_lo, y_lo, y_hi, y_hi), rectilinear=True, nx=nx,
                   split_columns=needs_split(lo))

    @classmethod
    def _curvilinear(cls, lon_c, lat_c, centre_lon, centre_lat, nx) -> CellGeometry:
        import shapely

        shape = np.shape(centre_lon)
        lon = np.stack([np.asarray(c, np.float64).reshape(-1) for c in lon_c], axis=1)
        lat = np.clip(np.stack([np.asarray(c, np.float64).reshape(-1) for c in lat_c],
                               axis=1), -90.0, 90.0)
        folded = fold_corners(lon, np.asarray(centre_lon).reshape(-1))
        pole = encloses_pole(lon, lat)
        split = np.flatnonzero(pole | needs_split(folded) | at_pole(lat).any(axis=1))
        texts = {}
        if split.size:
            n = np.full(split.size, 4)
            texts = dict(zip(split.tolist(), split_cells(
                lon[split], lat[split], n, np.asarray(centre_lat).reshape(-1)[split],
                pole[split]), strict=True))
        geometry = cls(lon_c=tuple(folded[:, k].reshape(shape) for k in range(4)),
                       lat_c=tuple(lat[:, k].reshape(shape) for k in range(4)),
                       rectilinear=False, nx=nx, split=texts)
        # Validity of the other quads, once for the grid: a strictly convex quad is valid;
        # shapely checks only the others (few on a usual grid).
        plain = np.setdiff1d(np.arange(folded.shape[0]), split)
        plain = plain[np.isfinite(folded[plain]).all(axis=1) & np.isfinite(lat[plain]).all(axis=1)]
        plain = plain[~_strictly_convex(folded[plain], lat[plain])]
        quads = shapely.polygons(np.stack([folded[plain], lat[plain]], axis=-1))
        bad = ~shapely.is_valid(quads)
        geometry.split.update((int(i), _valid_text(q)) for i, q in zip(plain[bad], quads[bad],
                                                                        strict=True))
        return geometry

    @classmethod
    def from_dataset(cls, ds, *, y_dim: str, x_dim: str, lat: np.ndarray | None,
                     lon: np.ndarray | None) -> CellGeometry:
        """Corners from CF bounds of 1-D ``lat``/``lon`` coordinates, else from centres.

        Rectilinear grids (1-D coordinates) use the coordinates' CF ``bounds`` when
        present, else midpoints between neighbouring centres, extrapolated by half a cell
        at the edges. Curvilinear grids (2-D coordinates) use the mean of the four
        surrounding centres (:func:`corners_2d`). Longitudes are then folded into
        EPSG:4326's range as the module docstring describes.

        Raises
        ------
        NcreelError
            If the grid has no latitude/longitude (a projected x/y grid).
        """
        if lat is None or lon is None:
            raise NcreelError(NO_LAT_LON_GEOMETRY)
        ny, nx = lat.shape
        if np.all(lat == lat[:, :1]) and np.all(lon == lon[:1, :]):
            y_lo, y_hi = _edges(ds, y_dim, lat[:, 0])
            x_lo, x_hi = _edges(ds, x_dim, lon[0, :])
            return cls._rectilinear(x_lo, x_hi, y_lo, y_hi, lon[0], nx)
        la, lo = corners_2d(lat), corners_2d(lon)
        return cls._curvilinear(tuple(lo[c] for c in _CUT), tuple(la[c] for c in _CUT),
                                lon, lat, nx)

    @classmethod
    def from_series(cls, series) -> CellGeometry:
        """Corners of the cells of an opened :class:`~ncreel.input.source.Series`, as it is ordered.

        A grid with a CF grid mapping (rotated pole, Lambert conformal, polar
        stereographic...) uses its exact corners: the cell edges in projection x/y (CF
        bounds, else midpoints) transformed to longitude/latitude
        (:meth:`ncreel.input.source.Series.cell_corners`). Otherwise rectilinear grids use the
        CF ``bounds`` of the latitude/longitude coordinates when present, else midpoints
        between neighbouring centres (:func:`corners_from_centres`); curvilinear grids the
        mean of the four surrounding centres (:func:`corners_2d`), computed on longitudes
        unwrapped along the rows. Every longitude corner is then
        taken modulo 360 degrees to lie within 180 degrees of its own cell's centre, so no
        polygon is wider than its cell where longitudes jump (e.g. from 180 to -180), and
        the cell is folded into EPSG:4326's range and split at the antimeridian as the
        module docstring describes. Latitudes are clipped to [-90, 90] (edges
        extrapolated past a pole).

        Raises
        ------
        NcreelError
            If the grid has no latitude/longitude (a projected x/y grid).
        """
        lat, lon = series.cell_coordinates()
        if lat is None or lon is None:
            raise NcreelError(NO_LAT_LON_GEOMETRY)
        ny, nx = lat.shape
        exact = series.cell_corners()
        if exact is not None:
            # Corners are moved by whole turns only (fold_corners), so that neighbours
            # keep bit-identical shared corners.
            lo, la = exact
            return cls._curvilinear(tuple(lo[c] for c in _CUT), tuple(la[c] for c in _CUT),
                                    lon, lat, nx)
        _, lon_cont = series.cell_coordinates(continuous=True)
        if np.all(lat == lat[:, :1]) and np.all(lon == lon[:1, :]):
            y_lo, y_hi = series.coordinate_bounds("lat") or _edges(None, "", lat[:, 0])
            # Edges between continuous centres: a box stored across 0/360 (355.5, 0.5)
            # has neighbours 5 degrees apart, not 355.
            x_lo, x_hi = (series.coordinate_bounds("lon")
                          or _edges(None, "", lon_cont[0, :]))
            return cls._rectilinear(x_lo, x_hi, y_lo, y_hi, lon[0], nx)
        la, lo = corners_2d(lat), corners_2d(lon_cont)
        return cls._curvilinear(tuple(lo[c] for c in _CUT), tuple(la[c] for c in _CUT),
                                lon, lat, nx)

    def _plain(self, cell: np.ndarray):
        iy, ix = np.divmod(cell, self.nx)
        if self.rectilinear:
            xs = [self.lon_c[k][ix] for k in range(4)]
            ys = [self.lat_c[k][iy] for k in range(4)]
        else:
            xs = [self.lon_c[k].reshape(-1)[cell] for k in range(4)]
            ys = [self.lat_c[k].reshape(-1)[cell] for k in range(4)]
        return multipolygon_text([(xs, ys)])

    def polygons(self, cell: np.ndarray):
        """EWKT multipolygons ``SRID=4326;MULTIPOLYGON(((lon lat, ...)))`` of the given cells.

        Parameters
        ----------
        cell : numpy.ndarray, shape (n,), int
            Row-major cell ids ``iy * nx + ix``.

        Returns
        -------
        polars.Series of str, length n
            One closed 5-point ring per cell (more parts for a cell split at the
            antimeridian), corners in shortest round-trip decimal form, longitudes in
            -180…180; loads into ``text`` or PostGIS ``geometry``. Null (NULL in the
            table) for a cell with a corner outside its grid mapping's domain (e.g.
            beyond a geostationary disk's edge), which has no polygon.
        """
        import polars as pl

        cell = np.asarray(cell, dtype=np.int64)
        text = self._plain(cell)
        if self.rectilinear:
            hit = np.flatnonzero(self.split_columns[cell % self.nx])
            if not hit.size:
                return text
            # A rectangle crossing +-180: its part east of the antimeridian (up to 180)
            # and its part west of it (from -180), the other part moved by one turn.
            iy, ix = np.divmod(cell[hit], self.nx)
            lo, hi = self.lon_c[0][ix], self.lon_c[1][ix]
            east_lo = np.where(lo < -180.0, np.round(lo + 360.0, TURN_DECIMALS), lo)
            west_hi = np.where(hi > 180.0, np.round(hi - 360.0, TURN_DECIMALS), hi)
            y0, y1 = self.lat_c[0][iy], self.lat_c[2][iy]
            e, w = np.full(hit.size, 180.0), np.full(hit.size, -180.0)
            fixed = multipolygon_text([([east_lo, e, e, east_lo], [y0, y0, y1, y1]),
                                       ([w, west_hi, west_hi, w], [y0, y0, y1, y1])])
            return text.scatter(hit, fixed)
        if not self.split:
            return text
        hit = np.flatnonzero(np.isin(cell, np.fromiter(self.split, np.int64)))
        if not hit.size:
            return text
        return text.scatter(hit, pl.Series([self.split[int(c)] for c in cell[hit]],
                                           dtype=pl.Utf8))


class MeshGeometry:
    """Face polygons of a mesh for the ``geom`` column (as ``CellGeometry`` for grids).

    Each face is ``SRID=4326;MULTIPOLYGON(((lon lat, ...)))`` with its corners in order
    and longitudes in [-180, 180]; a face crossing the antimeridian (or round a pole) is
    split there by the ``antimeridian`` package into several parts (or closed along the
    pole), with the same functions as grids (:mod:`ncreel.cells.geometry`). The text of
    all faces is built once.

    Parameters
    ----------
    mesh : ncreel.input.mesh.Mesh
    """

    def __init__(self, mesh) -> None:
        self.mesh = mesh
        self._wkt = None

    def _build(self):
        import polars as pl

        from ncreel.pg.types import GEOMETRY_COLUMN

        mesh = self.mesh
        lon, lat = mesh.shells()  # (n, m + 1), closed
        count = (mesh.face_nodes >= 0).sum(axis=1)
        # Corners within 180 degrees of the face centre, by whole turns: a face whose
        # corners are then all in [-180, 180] needs no split (a corner stored as -180 next
        # to 170 is 180); shared nodes moved by the same turns stay bit-identical.
        u = fold_corners(lon, mesh.face_lon)
        pole = encloses_pole(lon[:, :-1], lat[:, :-1])
        split = pole | needs_split(u) | at_pole(lat).any(axis=1)
        parts = []
        for j in range(lon.shape[1]):
            valid = j <= count  # slot == count closes the ring with the first corner
            x = pl.Series(u[:, j]).cast(pl.Utf8)
            y = pl.Series(lat[:, j]).cast(pl.Utf8)
            parts.append(pl.when(pl.lit(pl.Series(valid))).then(
                pl.concat_str([pl.lit(x), pl.lit(" "), pl.lit(y)])).otherwise(None))
        ring = pl.concat_str(parts, separator=",", ignore_nulls=True)
        wkt = pl.select(pl.concat_str([pl.lit("SRID=4326;MULTIPOLYGON((("), ring,
                                       pl.lit(")))")])
                        .alias(GEOMETRY_COLUMN)).to_series().to_numpy().astype(object)
        plain = np.flatnonzero(~split)
        text = wkt[plain]
        repair_invalid(text)
        wkt[plain] = text
        faces = np.flatnonzero(split)
        if faces.size:
            wkt[faces] = split_cells(lon[faces, :-1], lat[faces, :-1], count[faces],
                                     mesh.face_lat[faces], pole[faces])
        self._wkt = wkt

    def polygons(self, cell: np.ndarray):
        """EWKT polygons of the given faces (cell ids = face indices).

        Parameters
        ----------
        cell : numpy.ndarray, shape (n,), int

        Returns
        -------
        polars.Series of str, length n
        """
        import polars as pl

        from ncreel.pg.types import GEOMETRY_COLUMN

        if self._wkt is None:
            self._build()
        return pl.Series(GEOMETRY_COLUMN, self._wkt[np.asarray(cell, np.int64)],
                         dtype=pl.Utf8)
