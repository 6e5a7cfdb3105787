"""CF grid mappings: the coordinate reference system of a grid in projection x/y.

CF conventions section 5.6 and Appendix F: a data variable's ``grid_mapping`` attribute
names a variable whose attributes (``grid_mapping_name`` and its parameters, or
``crs_wkt``) describe the CRS its x/y coordinates are in: rotated pole
(``rotated_latitude_longitude``, x/y in degrees), Lambert conformal, polar stereographic,
Mercator, Albers, transverse Mercator… (x/y in metres or other length units). pyproj
(:meth:`pyproj.CRS.from_cf`) builds the CRS; this module turns the grid's x/y into
geographic longitude/latitude of cell centres and corners.

pyproj is imported only here, and only for grids that have a mapping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncreel.core.errors import NcreelError

#: Length units of projection x/y coordinates and their size in metres (UDUNITS spellings).
LENGTH_UNITS = {"m": 1.0, "meter": 1.0, "meters": 1.0, "metre": 1.0, "metres": 1.0,
                "km": 1000.0, "kilometer": 1000.0, "kilometers": 1000.0,
                "kilometre": 1000.0, "kilometres": 1000.0, "100 km": 100000.0,
                "dam": 10.0, "hm": 100.0, "cm": 0.01}
#: Angle units of a geostationary grid's scanning-angle x/y (CF 1.7, radians).
RADIAN_UNITS = {"rad", "radian", "radians"}
#: Angle units of rotated-pole x/y (grid_longitude/grid_latitude).
ANGLE_UNITS = {"degrees", "degree", "degrees_east", "degrees_north", "degree_east",
               "degree_north", "deg", "degrees_e", "degrees_n"}
#: CF standard names of the x/y coordinates a grid mapping applies to.
X_NAMES = {"projection_x_coordinate", "grid_longitude", "projection_x_angular_coordinate"}
Y_NAMES = {"projection_y_coordinate", "grid_latitude", "projection_y_angular_coordinate"}


def parse_grid_mapping(attr: str) -> list[tuple[str, list[str]]]:
    """Split a CF ``grid_mapping`` attribute into (mapping variable, coordinates) pairs.

    Short form ``"crs"`` gives ``[("crs", [])]``; the extended form of CF 1.7
    (``"crsOSGB: x y crsWGS84: lat lon"``) gives one pair per mapping with the
    coordinate variables it applies to.
    """
    text = str(attr or "").strip()
    if not text:
        return []
    if ":" not in text:
        return [(name, []) for name in text.split()]
    out: list[tuple[str, list[str]]] = []
    for token in text.replace(":", ": ").split():
        if token.endswith(":"):
            out.append((token[:-1], []))
        elif out:
            out[-1][1].append(token)
    return out


@dataclass(frozen=True)
class GridMapping:
    """The CRS of a grid's x/y coordinates, picklable (the CRS is kept as WKT).

    Attributes
    ----------
    name : str
        The grid mapping variable.
    wkt : str
        The CRS as WKT2 (pyproj).
    x_scale, y_scale : float
        Factor from the file's x/y values to the CRS's axis units (e.g. 1000 for x in km
        with a CRS in metres; 1 for rotated-pole degrees).
    kind : str
        The CF ``grid_mapping_name`` (e.g. ``rotated_latitude_longitude``), else the CRS's
        name.
    """

    name: str
    wkt: str
    x_scale: float = 1.0
    y_scale: float = 1.0
    kind: str = ""

    def crs(self):
        """Return the :class:`pyproj.CRS`."""
        from pyproj import CRS

        return CRS.from_wkt(self.wkt)

    def to_lonlat(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Geographic longitude/latitude of file x/y values (any equal shapes).

        The CRS's own geographic CRS is the target (its datum: a model's sphere stays a
        sphere), which the table labels EPSG:4326 as model output is usually taken to be.

        Returns
        -------
        lon, lat : numpy.ndarray, float64, degrees
            Longitudes in [-180, 180]; NaN where a point lies outside the projection's
            domain.
        """
        from pyproj import Transformer

        crs = base = self.crs()
        if base.is_bound:
            base = base.source_crs
        # A rotated pole is a derived geographic CRS: its geodetic CRS is itself, the
        # unrotated one is its source.
        target = (base.source_crs if base.is_geographic and base.is_derived
                  and base.source_crs is not None else base.geodetic_crs)
        t = Transformer.from_crs(crs, target, always_xy=True)
        lon, lat = t.transform(np.asarray(x, np.float64) * self.x_scale,
                               np.asarray(y, np.float64) * self.y_scale,
                               errcheck=False)
        lon, lat = np.asarray(lon, np.float64), np.asarray(lat, np.float64)
        bad = ~(np.isfinite(lon) & np.isfinite(lat))
        lon[bad] = np.nan
        lat[bad] = np.nan
        return lon, lat

    def describe(self) -> str:
        """One line for notes: the mapping variable and its kind."""
        return f"'{self.name}' ({self.kind})"


def read_grid_mapping(ds, mapping: str, *, x_var, y_var, where: str,
                      variable: str) -> GridMapping:
    """Build the :class:`GridMapping` of variable `mapping` for coordinates `x_var`/`y_var`.

    Parameters
    ----------
    ds : xarray.Dataset
    mapping : str
        Name of the grid mapping variable (from the data variable's ``grid_mapping``).
    x_var, y_var : xarray.DataArray
        The 1-D x and y coordinate variables; their ``units`` give the scale to the CRS's.
    where, variable : str
        The file and the data variable, for messages.

    Raises
    ------
    NcreelError
        One line naming the file, variable and grid mapping when pyproj cannot read the
        mapping, or when the x/y units cannot be converted to the CRS's.
    """
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    attrs = {str(k): (v.item() if hasattr(v, "item") and np.ndim(v) == 0 else v)
             for k, v in ds[mapping].attrs.items()}
    try:
        crs = CRS.from_cf(attrs)
    except (CRSError, KeyError, TypeError, ValueError) as err:
        why = (f"attribute {err} missing" if isinstance(err, KeyError)
               else (str(err).splitlines() or [type(err).__name__])[0])
        raise NcreelError(
            f"{where}: variable '{variable}': grid_mapping '{mapping}' "
            f"(grid_mapping_name={attrs.get('grid_mapping_name')!r}) cannot be read by "
            f"pyproj ({why}); fix its attributes (CF Appendix F), or "
            "set lat=NAME lon=NAME to 2-D latitude/longitude variables") from None
    scales = []
    for var in (x_var, y_var):
        units = str(var.attrs.get("units", "")).strip().lower()
        if crs.is_geographic:  # rotated pole: x/y are (rotated) degrees
            if units and units not in ANGLE_UNITS:
                raise NcreelError(f"{where}: variable '{variable}': coordinate '{var.name}' "
                                  f"has units {units!r}; grid_mapping '{mapping}' needs "
                                  "degrees")
            scales.append(1.0)
            continue
        axis_m = crs.axis_info[0].unit_conversion_factor if crs.axis_info else 1.0
        if units in RADIAN_UNITS and attrs.get("grid_mapping_name") == "geostationary" \
                and "perspective_point_height" in attrs:
            # Scanning angle -> PROJ's geos metres: angle times the satellite's height.
            scales.append(float(attrs["perspective_point_height"]) / axis_m)
        elif not units:
            scales.append(1.0 / axis_m)
        elif units in LENGTH_UNITS:
            scales.append(LENGTH_UNITS[units] / axis_m)
        else:
            raise NcreelError(f"{where}: variable '{variable}': coordinate '{var.name}' of "
                              f"grid_mapping '{mapping}' has units {units!r}, not a length "
                              f"(m, km); fix the units attribute")
    kind = str(attrs.get("grid_mapping_name") or crs.name)
    return GridMapping(name=mapping, wkt=crs.to_wkt(), x_scale=scales[0], y_scale=scales[1],
                       kind=kind)


def edges_1d(centres: np.ndarray, bounds: np.ndarray | None = None) -> np.ndarray:
    """Cell edges along one axis: from CF bounds where given, else midpoints.

    Parameters
    ----------
    centres : numpy.ndarray, shape (n,)
        Increasing or decreasing cell centres.
    bounds : numpy.ndarray, shape (n, 2), optional
        CF bounds (section 7.1) in the same order as `centres`.

    Returns
    -------
    numpy.ndarray, shape (n + 1,), float64
        Edge k between cells k-1 and k; the outer edges extrapolated by half a cell (or
        the bounds' outer values). Bounds of neighbours that do not touch are averaged.
    """
    c = np.asarray(centres, np.float64)
    if bounds is not None:
        b = np.asarray(bounds, np.float64)
        up = c[-1] >= c[0]
        lo, hi = (b.min(axis=1), b.max(axis=1)) if up else (b.max(axis=1), b.min(axis=1))
        return np.concatenate([[lo[0]], (hi[:-1] + lo[1:]) / 2, [hi[-1]]])
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[:-1] + c[1:]) / 2
    return np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])


def unwrap_rows(lon: np.ndarray) -> np.ndarray:
    """Longitudes made continuous: unwrapped along rows, each row by whole turns onto the last.

    Parameters
    ----------
    lon : numpy.ndarray, shape (ny, nx), degrees

    Returns
    -------
    numpy.ndarray, shape (ny, nx), float64
        Equal to `lon` modulo 360 degrees; NaN stays NaN.
    """
    lon = np.array(lon, np.float64)
    ok = np.isfinite(lon)
    if not ok.all():  # np.unwrap spreads NaN: unwrap the finite ones in each row
        for i in range(lon.shape[0]):
            r = ok[i]
            if r.any():
                lon[i, r] = np.unwrap(lon[i, r], period=360)
    else:
        lon = np.unwrap(lon, period=360, axis=1)
    # Median over the row: robust where a tripolar grid folds and single columns jump.
    for i in range(1, lon.shape[0]):
        with np.errstate(all="ignore"):
            d = lon[i] - lon[i - 1]
            turns = np.round(np.nanmedian(d) / 360.0) if np.isfinite(d).any() else 0.0
        if np.isfinite(turns) and turns:
            lon[i] -= 360.0 * turns
    return lon
