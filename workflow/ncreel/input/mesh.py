"""Unstructured meshes (MPAS, ICON, UGRID, HEALPix, CF cell bounds) read through uxarray.

A variable on the faces of a mesh, ``(time, n_face)``, is seen by the rest of ncreel as a
``(time, 1, n_face)`` grid: one row whose columns are the mesh's faces in the file's
order, so cell id = face index, and statistics, shard planning, the rows, calibration
and the memory model need nothing else. The :class:`ncreel.input.source.MeshSeries` carries the
:class:`Mesh` (face polygons as node indices, node and face-centre longitudes/latitudes)
for drawing (:mod:`ncreel.render.meshdraw`) and for the ``geom`` column; this module finds
and loads meshes, :mod:`ncreel.input.source` reads the series on them.

The topology comes from uxarray's readers (``uxarray.Grid.from_dataset`` for MPAS,
UGRID, ICON grid files, ESMF, SCRIP, FESOM2; ``Grid.from_healpix``;
``Grid.from_face_vertices`` for CF cell bounds as ICON and CDO write them).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ncreel.core.errors import NcreelError
from ncreel.input.cfaxes import wrap_longitude

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Mesh:
    """Faces of an unstructured mesh on the sphere.

    Attributes
    ----------
    kind : str
        Format the mesh was read as (``MPAS``, ``UGRID``, ``ICON``, ``HEALPix``,
        ``CF bounds``, ...).
    face_dim : str
        The file's face dimension (``nCells``, ``ncells``, ``cell``, ...).
    face_lon, face_lat : numpy.ndarray, shape (n_face,), float64, degrees
        Face centres (longitude in [-180, 180)).
    node_lon, node_lat : numpy.ndarray, shape (n_node,), float64, degrees
        Corners of the faces.
    face_nodes : numpy.ndarray, shape (n_face, n_max_face_nodes), int32 (int64 if needed)
        Node index of each face corner in order around the face, -1 after the last.
    """

    kind: str
    face_dim: str
    face_lon: np.ndarray
    face_lat: np.ndarray
    node_lon: np.ndarray
    node_lat: np.ndarray
    face_nodes: np.ndarray

    @property
    def n_face(self) -> int:
        """Number of faces."""
        return int(self.face_nodes.shape[0])

    def shells(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the closed corner rings of every face, padded with the first corner.

        Returns
        -------
        lon, lat : numpy.ndarray, shape (n_face, n_max_face_nodes + 1), float64, degrees
            Longitudes as stored (each may be on either side of the antimeridian).
        """
        fn = self.face_nodes
        first = fn[:, :1]
        closed = np.concatenate([fn, first], axis=1)
        closed = np.where(closed < 0, first, closed)
        return self.node_lon[closed], self.node_lat[closed]


def _ux():
    try:
        import uxarray
    except ImportError as err:  # pragma: no cover - a dependency of ncreel
        raise NcreelError("unstructured meshes need the Python package uxarray "
                          "(pip install uxarray)") from err
    return uxarray


def _attr(var, key: str) -> str:
    return str(getattr(var, "attrs", {}).get(key, "")).strip()


def _ugrid_topology(ds: xr.Dataset, da: xr.DataArray) -> str | None:
    name = _attr(da, "mesh")
    if name and name in ds.variables:
        return name
    found = [str(n) for n, v in ds.variables.items() if _attr(v, "cf_role") == "mesh_topology"]
    return found[0] if len(found) == 1 else None


def _healpix_crs(ds: xr.Dataset, da: xr.DataArray):
    for name in [_attr(da, "grid_mapping"), *map(str, ds.variables)]:
        var = ds.variables.get(name) if name else None
        if var is not None and _attr(var, "grid_mapping_name").lower() == "healpix":
            return var
    return None


def _bounds_coords(ds: xr.Dataset, da: xr.DataArray):
    """CF auxiliary longitude/latitude over one dimension of `da` with cell bounds."""
    found = {}
    names = _attr(da, "coordinates").split() or \
        str(da.encoding.get("coordinates", "")).split()
    for name in [*names, *map(str, ds.variables)]:
        var = ds.variables.get(name)
        if var is None or var.ndim != 1 or var.dims[0] not in da.dims:
            continue
        std, units = _attr(var, "standard_name").lower(), _attr(var, "units").lower()
        kind = ("lon" if std == "longitude" or units.startswith("degrees_e") else
                "lat" if std == "latitude" or units.startswith("degrees_n") else
                "lon" if name in ("clon", "lon") else "lat" if name in ("clat", "lat") else None)
        bname = _attr(var, "bounds")
        if kind and kind not in found and bname in ds.variables \
                and ds[bname].ndim == 2 and ds[bname].dims[0] == var.dims[0] \
                and ds[bname].sizes[ds[bname].dims[1]] >= 3:
            found[kind] = name
    if set(found) == {"lon", "lat"} and ds[found["lon"]].dims == ds[found["lat"]].dims:
        return found["lon"], found["lat"]
    return None


def mesh_kind(ds: xr.Dataset, da: xr.DataArray) -> tuple[str, str, dict] | None:
    """Find the mesh `da` lives on, from the file's markers alone (no data is read).

    Returns
    -------
    (kind, face_dim, other_dims) or None
        ``other_dims`` maps the mesh's node/edge dimensions to ``"node"`` / ``"edge"``
        (a variable on them cannot be drawn as faces). None: `da` is on none of the
        file's mesh dimensions (or the file has no mesh).
    """
    found = _mesh_markers(ds, da)
    if found is None:
        return None
    dims = set(map(str, da.dims))
    return found if found[1] in dims or dims & set(found[2]) else None


def _mesh_markers(ds: xr.Dataset, da: xr.DataArray) -> tuple[str, str, dict] | None:
    dims = set(map(str, da.dims))
    topo = _ugrid_topology(ds, da)
    if topo is not None:
        t = ds[topo]
        fdim = _attr(t, "face_dimension")
        conn = _attr(t, "face_node_connectivity")
        if not fdim and conn in ds.variables:
            fdim = str(ds[conn].dims[0])
        others = {}
        for key, what in (("node_dimension", "node"), ("edge_dimension", "edge")):
            if _attr(t, key):
                others[_attr(t, key)] = what
        nodes = _attr(t, "node_coordinates").split()
        if nodes and nodes[0] in ds.variables:
            others.setdefault(str(ds[nodes[0]].dims[0]), "node")
        location = _attr(da, "location")
        if location in ("node", "edge") and not dims & set(others):
            others.update({d: location for d in dims if d != fdim})
        return "UGRID", fdim, others
    if "verticesOnCell" in ds.variables and {"lonCell", "latCell"} <= set(ds.variables):
        others = {}
        for var, what in (("lonVertex", "node"), ("lonEdge", "edge")):
            if var in ds.variables:
                others[str(ds[var].dims[0])] = what
        others.setdefault("nVertices", "node")
        others.setdefault("nEdges", "edge")
        return "MPAS", str(ds["verticesOnCell"].dims[0]), others
    if {"vertex_of_cell", "clon", "clat", "vlon", "vlat"} <= set(ds.variables):
        others = {str(ds["vlon"].dims[0]): "node"}
        if "elon" in ds.variables:
            others[str(ds["elon"].dims[0])] = "edge"
        return "ICON", str(ds["clon"].dims[0]), others
    crs = _healpix_crs(ds, da)
    if crs is not None:
        # The pixel dimension: by its usual names, else the last (HEALPix output's order).
        face = next((str(d) for d in da.dims if str(d) in ("cell", "cells", "pix", "ncells")),
                    str(da.dims[-1]) if da.dims else "")
        return "HEALPix", face, {}
    found = _bounds_coords(ds, da)
    if found is not None:
        return "CF bounds", str(ds[found[0]].dims[0]), {}
    return None


def _degrees(var) -> np.ndarray:
    values = np.asarray(var.values, np.float64)
    if _attr(var, "units").lower().startswith("radian"):
        values = np.degrees(values)
    return values


def _radians(var) -> np.ndarray:
    # MPAS and ICON store longitudes/latitudes in radians, with or without units.
    return np.degrees(np.asarray(var.values, np.float64))


def load_mesh(ds: xr.Dataset, da: xr.DataArray, kind: str, face_dim: str,
              where: str) -> Mesh:
    """Read the mesh of `da` (found by :func:`mesh_kind`) with uxarray.

    Raises
    ------
    NcreelError
        When uxarray cannot read the mesh, or its face count is not the variable's.
    """
    ux = _ux()
    n = int(da.sizes[face_dim])
    face_lon = face_lat = None
    try:
        if kind == "HEALPix":
            try:
                import healpix  # noqa: F401 (uxarray's HEALPix reader needs it)
            except ImportError as err:
                raise NcreelError("HEALPix meshes need the Python package healpix (pip "
                                  "install healpix)") from err
            crs = _healpix_crs(ds, da)
            nside = int(crs.attrs.get("healpix_nside", 0))
            zoom = int(round(math.log2(nside))) if nside > 0 else -1
            if zoom < 0 or 2**zoom != nside or 12 * nside**2 != n:
                raise NcreelError(f"{where}: HEALPix '{crs.name}' has healpix_nside={nside} "
                                  f"but '{da.name}' has {face_dim}={n} cells (need "
                                  "12 * nside**2, a power-of-two nside, the whole sphere)")
            order = _attr(crs, "healpix_order").lower() or "nest"
            if order not in ("nest", "nested", "ring"):
                raise NcreelError(f"{where}: HEALPix healpix_order {order!r}: need nest or ring")
            grid = ux.Grid.from_healpix(zoom, pixels_only=False, nest=order != "ring")
        elif kind == "CF bounds":
            lon_name, lat_name = _bounds_coords(ds, da)
            lon_b = _degrees(ds[_attr(ds[lon_name], "bounds")].assign_attrs(
                units=_attr(ds[lon_name], "units")))
            lat_b = _degrees(ds[_attr(ds[lat_name], "bounds")].assign_attrs(
                units=_attr(ds[lat_name], "units")))
            grid = ux.Grid.from_face_vertices(np.stack([wrap_longitude(lon_b), lat_b], axis=-1))
            face_lon, face_lat = _degrees(ds[lon_name]), _degrees(ds[lat_name])
        else:
            try:
                grid = ux.Grid.from_dataset(ds)
            except KeyError:
                # uxarray's MPAS/ICON readers want every connectivity (cellsOnVertex;
                # ICON's edge tables); faces need only the corners of each cell.
                grid = _minimal_topology(ux, ds, kind)
                if grid is None:
                    raise
            if kind == "UGRID":
                face_lon, face_lat = _ugrid_face_centres(ds, _ugrid_topology(ds, da))
            elif kind == "ICON":
                face_lon, face_lat = _radians(ds["clon"]), _radians(ds["clat"])
        face_nodes = np.asarray(grid.face_node_connectivity.values, np.int64)
        node_lon = np.asarray(grid.node_lon.values, np.float64)
        node_lat = np.asarray(grid.node_lat.values, np.float64)
        if face_lon is None:
            face_lon = np.asarray(grid.face_lon.values, np.float64)
            face_lat = np.asarray(grid.face_lat.values, np.float64)
    except NcreelError:
        raise
    except Exception as err:  # uxarray's readers raise many types on a malformed mesh
        raise NcreelError(f"{where}: cannot read the {kind} mesh of '{da.name}' with "
                          f"uxarray ({type(err).__name__}: {err}); the file may lack the "
                          "mesh variables: merge the model's grid file into it") from err
    if face_nodes.shape[0] != n:
        raise NcreelError(f"{where}: the {kind} mesh has {face_nodes.shape[0]} faces but "
                          f"'{da.name}' has {face_dim}={n}")
    face_nodes[face_nodes < 0] = -1
    if face_nodes.size and int(face_nodes.max()) < 2**31 - 1:
        face_nodes = face_nodes.astype(np.int32)  # half the memory of uxarray's int64
    return Mesh(kind=kind, face_dim=face_dim, face_lon=wrap_longitude(face_lon),
                face_lat=np.asarray(face_lat, np.float64), node_lon=wrap_longitude(node_lon),
                node_lat=node_lat, face_nodes=face_nodes)


def _minimal_topology(ux, ds: xr.Dataset, kind: str):
    """Build a uxarray Grid from the cells' corners alone (MPAS or ICON), or None."""
    if kind == "MPAS" and {"lonVertex", "latVertex"} <= set(ds.variables):
        conn = np.asarray(ds["verticesOnCell"].values, np.int64) - 1  # 1-based, 0: none
        if "nEdgesOnCell" in ds.variables:
            count = np.asarray(ds["nEdgesOnCell"].values, np.int64)
            conn[np.arange(conn.shape[1])[None, :] >= count[:, None]] = -1
        lon, lat = _radians(ds["lonVertex"]), _radians(ds["latVertex"])
    elif kind == "ICON":
        conn = np.asarray(ds["vertex_of_cell"].values, np.int64).T - 1  # (nv, cell), 1-based
        lon, lat = _radians(ds["vlon"]), _radians(ds["vlat"])
    else:
        return None
    conn[conn < 0] = -1
    return ux.Grid.from_topology(wrap_longitude(lon), lat, conn, fill_value=-1)


def _ugrid_face_centres(ds: xr.Dataset, topo: str):
    names = _attr(ds[topo], "face_coordinates").split()
    if len(names) != 2 or not all(n in ds.variables for n in names):
        return None, None
    a, b = names
    if _attr(ds[a], "standard_name") == "latitude" or \
            _attr(ds[a], "units").lower().startswith("degrees_n"):
        a, b = b, a
    return _degrees(ds[a]), _degrees(ds[b])


def _point_coordinate(var, kind: str) -> bool:
    std, units = _attr(var, "standard_name").lower(), _attr(var, "units").lower()
    word = "latitude" if kind == "lat" else "longitude"
    return std == word or units.startswith("degrees_n" if kind == "lat" else "degrees_e")


def check_not_points(ds: xr.Dataset, da: xr.DataArray, tdim: str, spatial: list[str],
                     where: str) -> None:
    """Stop on a variable over unstructured cells the file gives no mesh for.

    Called for variables :func:`mesh_kind` did not recognise: when latitude and longitude
    are both 1-D along the same dimension of `da` (cells or points, not a y/x grid), the
    variable cannot be drawn as a grid.

    Raises
    ------
    NcreelError
        Extra dims beside the cells (with a ``select`` example), or cells without
        corners (no CF bounds, no MPAS/UGRID/ICON mesh variables): what to add.
    """
    along: dict[str, dict] = {}
    for name, var in ds.variables.items():
        if var.ndim == 1 and str(var.dims[0]) in spatial:
            for kind in ("lat", "lon"):
                if _point_coordinate(var, kind):
                    along.setdefault(str(var.dims[0]), {})[kind] = str(name)
    cells = [d for d, kinds in along.items() if set(kinds) == {"lat", "lon"}]
    if len(cells) != 1:
        return
    (cell,) = cells
    extra = [d for d in spatial if d != cell]
    if extra:
        raise NcreelError(
            f"{where}: variable '{da.name}' on unstructured cells ({cell}) has extra dims "
            f"{', '.join(extra)} (sizes {', '.join(f'{d}={da.sizes[d]}' for d in extra)}); "
            f"pick one index of each with config key select, e.g. "
            f"--config 'select={{{extra[0]}: 0}}'")
    lat, lon = along[cell]["lat"], along[cell]["lon"]
    raise NcreelError(
        f"{where}: variable '{da.name}' is on unstructured cells ({cell}, centres {lat}/"
        f"{lon}) but the file has no cell corners: ncreel draws and tables the cells' "
        f"polygons, so add CF bounds to {lat} and {lon} (e.g. from the model's grid file "
        "with 'cdo setgrid,GRIDFILE in.nc out.nc'), or the model's mesh variables (MPAS "
        "verticesOnCell, UGRID mesh_topology)")
