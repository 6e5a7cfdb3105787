"""Cell geometry: corners and bounds of the grid cells, as polygons for the table.

Bounds follow the CF conventions, section 7.1 "Cell Boundaries".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncreel.cells.context import GEOMETRY_COLUMN
from ncreel.cfaxes import cf_bounds, wrap_longitude
from ncreel.errors import NcreelError
from ncreel.gridmap import edges_1d

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


@dataclass(frozen=True)
class CellGeometry:
    """Corner coordinates of every cell, for the optional polygon column.

    Attributes
    ----------
    lon_c, lat_c : tuple of 4 numpy.ndarray, degrees
        Corner k (0: lower-left, 1: lower-right, 2: upper-right, 3: upper-left in index
        space) of every cell. Rectilinear grids store 1-D per-axis edges, shape (nx,) for
        lon and (ny,) for lat; curvilinear grids store shape (ny, nx) arrays.
    rectilinear : bool
    """

    lon_c: tuple
    lat_c: tuple
    rectilinear: bool
    nx: int

    @classmethod
    def from_dataset(cls, ds, *, y_dim: str, x_dim: str, lat: np.ndarray | None,
                     lon: np.ndarray | None) -> CellGeometry:
        """Corners from CF bounds of 1-D ``lat``/``lon`` coordinates, else from centres.

        Rectilinear grids (1-D coordinates) use the coordinates' CF ``bounds`` when
        present, else midpoints between neighbouring centres, extrapolated by half a cell
        at the edges. Curvilinear grids (2-D coordinates) use the mean of the four
        surrounding centres (:func:`corners_2d`).

        Raises
        ------
        NcreelError
            If the grid has no latitude/longitude (a projected x/y grid).
        """
        if lat is None or lon is None:
            raise NcreelError("config key 'cells.geometry': the grid has no latitude/"
                              "longitude coordinates, so cell polygons cannot be built")
        ny, nx = lat.shape
        if np.all(lat == lat[:, :1]) and np.all(lon == lon[:1, :]):
            y_lo, y_hi = _edges(ds, y_dim, lat[:, 0])
            x_lo, x_hi = _edges(ds, x_dim, lon[0, :])
            return cls(lon_c=(x_lo, x_hi, x_hi, x_lo), lat_c=(y_lo, y_lo, y_hi, y_hi),
                       rectilinear=True, nx=nx)
        la, lo = corners_2d(lat), corners_2d(lon)
        return cls(lon_c=tuple(lo[c] for c in _CUT), lat_c=tuple(la[c] for c in _CUT),
                   rectilinear=False, nx=nx)

    @classmethod
    def from_series(cls, series) -> CellGeometry:
        """Corners of the cells of an opened :class:`ncreel.source.Series`, in its orientation.

        A grid with a CF grid mapping (rotated pole, Lambert conformal, polar
        stereographic...) uses its exact corners: the cell edges in projection x/y (CF
        bounds, else midpoints) transformed to longitude/latitude
        (:meth:`ncreel.source.Series.cell_corners`). Otherwise rectilinear grids use the
        CF ``bounds`` of the latitude/longitude coordinates when present, else midpoints
        between neighbouring centres (:func:`corners_from_centres`); curvilinear grids the
        mean of the four surrounding centres (:func:`corners_2d`), computed on longitudes
        unwrapped along the rows. Every longitude corner is then
        taken modulo 360 degrees to lie within 180 degrees of its own cell's centre, so no
        polygon is wider than its cell where longitudes jump (e.g. from 180 to -180).

        Raises
        ------
        NcreelError
            If the grid has no latitude/longitude (a projected x/y grid).
        """
        lat, lon = series.cell_coordinates()
        if lat is None or lon is None:
            raise NcreelError("config key 'cells.geometry': the grid has no latitude/"
                              "longitude coordinates, so cell polygons cannot be built")
        ny, nx = lat.shape
        exact = series.cell_corners()
        if exact is not None:
            lo, la = exact
            # Moved by whole turns only where a corner is over 180 degrees from its centre,
            # so that neighbours keep bit-identical shared corners.
            with np.errstate(invalid="ignore"):
                lon_c = tuple(np.where(np.abs(lo[c] - lon) > 180.0,
                                       lon + wrap_longitude(lo[c] - lon), lo[c]) for c in _CUT)
            return cls(lon_c=lon_c, lat_c=tuple(la[c] for c in _CUT), rectilinear=False,
                       nx=nx)
        _, lon_cont = series.cell_coordinates(continuous=True)
        if np.all(lat == lat[:, :1]) and np.all(lon == lon[:1, :]):
            y_lo, y_hi = series.coordinate_bounds("lat") or _edges(None, "", lat[:, 0])
            x_lo, x_hi = series.coordinate_bounds("lon") or _edges(None, "", lon[0, :])
            x_lo, x_hi = (lon[0] + wrap_longitude(e - lon[0]) for e in (x_lo, x_hi))
            return cls(lon_c=(x_lo, x_hi, x_hi, x_lo), lat_c=(y_lo, y_lo, y_hi, y_hi),
                       rectilinear=True, nx=nx)
        la, lo = corners_2d(lat), corners_2d(lon_cont)
        return cls(lon_c=tuple(lon + wrap_longitude(lo[c] - lon) for c in _CUT),
                   lat_c=tuple(la[c] for c in _CUT), rectilinear=False, nx=nx)

    def polygons(self, cell: np.ndarray):
        """EWKT polygons ``SRID=4326;POLYGON((lon lat, ...))`` of the given flat cells.

        Parameters
        ----------
        cell : numpy.ndarray, shape (n,), int
            Row-major cell ids ``iy * nx + ix``.

        Returns
        -------
        polars.Series of str, length n
            Closed 5-point rings, corners in shortest round-trip decimal form; loads into
            ``text`` or PostGIS ``geometry``. Longitudes are as stored (0–360 stays 0–360).
            Null (NULL in the table) for a cell with a corner outside its grid mapping's
            domain (e.g. beyond a geostationary disk's edge), which has no polygon.
        """
        import polars as pl

        cell = np.asarray(cell, dtype=np.int64)
        iy, ix = np.divmod(cell, self.nx)
        parts: list = [pl.lit("SRID=4326;POLYGON((")]
        for k in (0, 1, 2, 3, 0):
            if self.rectilinear:
                x, y = self.lon_c[k][ix], self.lat_c[k][iy]
            else:
                x, y = self.lon_c[k].reshape(-1)[cell], self.lat_c[k].reshape(-1)[cell]
            # NaN -> null: concat_str then gives the whole ring null.
            parts += [pl.Series(x).fill_nan(None).cast(pl.Utf8), pl.lit(" "),
                      pl.Series(y).fill_nan(None).cast(pl.Utf8), pl.lit(",")]
        parts[-1] = pl.lit("))")
        return pl.select(pl.concat_str(parts).alias(GEOMETRY_COLUMN)).to_series()
