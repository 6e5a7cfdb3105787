"""Small unstructured-mesh NetCDF files for the tests (and the mesh benchmark).

The meshes are built by uxarray (a spherical Voronoi mesh from points, HEALPix) and written
in the forms models write: MPAS (``nCells``, ``lonCell``/``latCell`` in radians,
``verticesOnCell`` 1-based and zero-padded, ``nEdgesOnCell``), UGRID 1.0 (a
``mesh_topology`` variable, ``face_node_connectivity``) and ICON output (``ncells``,
``clon``/``clat`` in radians with ``clon_bnds``/``clat_bnds``), and HEALPix (``cell`` with a
``crs`` of ``grid_mapping_name: healpix``).
"""

from __future__ import annotations

import numpy as np
import xarray as xr


def fibonacci_points(n: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` quasi-uniform points on the sphere (longitude, latitude in degrees)."""
    i = np.arange(n) + 0.5
    lat = np.degrees(np.arcsin(1 - 2 * i / n))
    lon = (np.degrees(np.pi * (1 + 5**0.5) * i) + 180.0) % 360.0 - 180.0
    return lon, lat


def voronoi_mesh(n: int):
    """A spherical Voronoi mesh of `n` cells (uxarray), with its generating points.

    Returns
    -------
    face_nodes : (n, m) int64, -1 padded (0-based)
    node_lon, node_lat : (n_node,) degrees
    lon, lat : (n,) degrees, the cell generators (MPAS's cell centres)
    """
    import uxarray as ux

    lon, lat = fibonacci_points(n)
    g = ux.Grid.from_points((lon, lat), method="spherical_voronoi")
    fn = np.asarray(g.face_node_connectivity.values, np.int64)
    fn = np.where(fn < 0, -1, fn)
    return fn, np.asarray(g.node_lon.values), np.asarray(g.node_lat.values), lon, lat


def field_values(lon: np.ndarray, lat: np.ndarray, nt: int) -> np.ndarray:
    """A smooth field (time, cell) that differs from cell to cell and step to step."""
    t = np.arange(nt)[:, None]
    return (280.0 + 20.0 * np.cos(np.radians(lat))[None, :]
            + 5.0 * np.sin(np.radians(lon)[None, :] * 2 + 0.3 * t)
            + 0.01 * np.arange(lon.size)[None, :] / max(lon.size, 1)).astype(np.float32)


def write_mpas(path, mesh, nt: int = 3, *, levels: int = 0, values=None,
               day0: int = 0) -> np.ndarray:
    """Write an MPAS-like file: ``temperature(Time, nCells[, nVertLevels])``.

    Returns the values written, shape (nt, nCells) (level 0 when `levels`).
    """
    fn, node_lon, node_lat, lon, lat = mesh
    n, m = fn.shape
    n_edges = (fn >= 0).sum(axis=1)
    voc = np.where(fn >= 0, fn + 1, 0).astype(np.int32)  # MPAS: 1-based, 0 padding
    data = field_values(lon, lat, nt) if values is None else values
    # cellsOnVertex (vertexDegree 3 on a Voronoi mesh; 0 where fewer): 1-based cells.
    face, slot = np.nonzero(fn >= 0)
    node = fn[face, slot]
    order = np.argsort(node, kind="stable")
    node, face = node[order], face[order]
    rank = np.arange(node.size) - np.searchsorted(node, node)
    degree = max(int(rank.max()) + 1, 3)
    cov = np.zeros((node_lon.size, degree), np.int32)
    cov[node, rank] = face + 1
    ds = xr.Dataset({
        "lonCell": ("nCells", np.radians(lon % 360.0), {"units": "radians"}),
        "latCell": ("nCells", np.radians(lat), {"units": "radians"}),
        "lonVertex": ("nVertices", np.radians(node_lon % 360.0), {"units": "radians"}),
        "latVertex": ("nVertices", np.radians(node_lat), {"units": "radians"}),
        "verticesOnCell": (("nCells", "maxEdges"), voc),
        "nEdgesOnCell": ("nCells", n_edges.astype(np.int32)),
        "cellsOnVertex": (("nVertices", "vertexDegree"), cov),
        # MPAS: times as 64-character strings (char arrays in the file).
        "xtime": ("Time", np.array([f"2000-01-{d + 1:02d}_00:00:00".ljust(64)
                                    for d in range(day0, day0 + nt)], dtype="S64")),
    }, attrs={"on_a_sphere": "YES", "sphere_radius": 1.0, "mesh_spec": "1.0"})
    if levels:
        full = np.repeat(data[:, :, None], levels, axis=2) + np.arange(levels)[None, None, :]
        ds["temperature"] = (("Time", "nCells", "nVertLevels"), full.astype(np.float32),
                             {"units": "K", "long_name": "temperature"})
    else:
        ds["temperature"] = (("Time", "nCells"), data, {"units": "K",
                                                       "long_name": "temperature"})
    ds["vertex_value"] = (("Time", "nVertices"),
                          np.zeros((nt, node_lon.size), np.float32))
    ds.to_netcdf(path, unlimited_dims=["Time"])
    return data


def write_ugrid(path, mesh, nt: int = 3) -> np.ndarray:
    """Write a UGRID 1.0 file: ``sst(time, nMesh2_face)`` on ``Mesh2``; returns the values."""
    fn, node_lon, node_lat, lon, lat = mesh
    data = field_values(lon, lat, nt)
    ds = xr.Dataset({
        "Mesh2": ((), 0, {"cf_role": "mesh_topology", "topology_dimension": 2,
                          "node_coordinates": "Mesh2_node_x Mesh2_node_y",
                          "face_node_connectivity": "Mesh2_face_nodes",
                          "face_coordinates": "Mesh2_face_x Mesh2_face_y",
                          "face_dimension": "nMesh2_face"}),
        "Mesh2_node_x": ("nMesh2_node", node_lon, {"standard_name": "longitude",
                                                   "units": "degrees_east"}),
        "Mesh2_node_y": ("nMesh2_node", node_lat, {"standard_name": "latitude",
                                                   "units": "degrees_north"}),
        "Mesh2_face_x": ("nMesh2_face", lon, {"standard_name": "longitude",
                                              "units": "degrees_east"}),
        "Mesh2_face_y": ("nMesh2_face", lat, {"standard_name": "latitude",
                                              "units": "degrees_north"}),
        "Mesh2_face_nodes": (("nMesh2_face", "nMaxMesh2_face_nodes"), fn.astype(np.int32),
                             {"cf_role": "face_node_connectivity", "start_index": 0,
                              "_FillValue": np.int32(-1)}),
        "time": ("time", np.arange(nt, dtype=np.float64),
                 {"units": "hours since 2001-01-01 00:00:00"}),
        "sst": (("time", "nMesh2_face"), data, {"units": "K", "mesh": "Mesh2",
                                                "location": "face",
                                                "long_name": "sea surface temperature"}),
        "node_value": (("time", "nMesh2_node"), np.zeros((nt, node_lon.size), np.float32),
                       {"mesh": "Mesh2", "location": "node"}),
    }, attrs={"Conventions": "UGRID-1.0"})
    ds.to_netcdf(path)
    return data


def write_icon(path, lon, lat, clon_bnds, clat_bnds, nt: int = 3, *, height: int = 0):
    """Write ICON output: ``tas(time[, height], ncells)``, ``clon``/``clat`` in radians with
    bounds ``(ncells, vertices)``; returns the values (nt, ncells) (height 0)."""
    data = field_values(lon, lat, nt)
    ds = xr.Dataset({
        "clon": ("ncells", np.radians(lon), {"standard_name": "longitude", "units": "radian",
                                            "bounds": "clon_bnds"}),
        "clat": ("ncells", np.radians(lat), {"standard_name": "latitude", "units": "radian",
                                            "bounds": "clat_bnds"}),
        "clon_bnds": (("ncells", "vertices"), np.radians(clon_bnds)),
        "clat_bnds": (("ncells", "vertices"), np.radians(clat_bnds)),
        "time": ("time", np.arange(nt, dtype=np.float64) * 6,
                 {"units": "hours since 1979-01-01", "calendar": "proleptic_gregorian",
                  "axis": "T", "standard_name": "time"}),
    })
    attrs = {"units": "K", "standard_name": "air_temperature", "long_name": "temperature",
             "CDI_grid_type": "unstructured", "coordinates": "clat clon"}
    if height:
        full = data[:, None, :] + np.arange(height, dtype=np.float32)[None, :, None]
        ds["tas"] = (("time", "height", "ncells"), full, attrs)
        ds["height"] = ("height", np.arange(height, dtype=np.float64) * 2 + 2,
                        {"units": "m", "axis": "Z", "positive": "up"})
    else:
        ds["tas"] = (("time", "ncells"), data, attrs)
    ds.to_netcdf(path)
    return data


def icon_triangles(n_points: int):
    """Triangles of a spherical Delaunay mesh (uxarray) as ICON-style cell bounds.

    Returns
    -------
    lon, lat : (n_face,) degrees, the triangle centres (mean of the corner unit vectors)
    lon_bnds, lat_bnds : (n_face, 3) degrees
    """
    import uxarray as ux

    plon, plat = fibonacci_points(n_points)
    g = ux.Grid.from_points((plon, plat), method="spherical_delaunay")
    fn = np.asarray(g.face_node_connectivity.values)[:, :3]
    lon, lat, lon_b, lat_b = _triangle_centres(np.asarray(g.node_lon.values),
                                               np.asarray(g.node_lat.values), fn)
    return lon, lat, lon_b, lat_b


def write_icon_grid(path, n_points: int, nt: int = 2) -> tuple:
    """Write ICON output with its grid merged in (``vertex_of_cell``, ``vlon``/``vlat``,
    ``clon``/``clat`` in radians, no units, no edge tables): ``tas(time, cell)``.

    Returns the values (nt, cell) and the triangles' corner nodes (cell, 3), 0-based.
    """
    import uxarray as ux

    plon, plat = fibonacci_points(n_points)
    g = ux.Grid.from_points((plon, plat), method="spherical_delaunay")
    fn = np.asarray(g.face_node_connectivity.values)[:, :3]
    lon, lat, _, _ = _triangle_centres(np.asarray(g.node_lon.values),
                                       np.asarray(g.node_lat.values), fn)
    data = field_values(lon, lat, nt)
    ds = xr.Dataset({
        "clon": ("cell", np.radians(lon)),
        "clat": ("cell", np.radians(lat)),
        "vlon": ("vertex", np.radians(np.asarray(g.node_lon.values))),
        "vlat": ("vertex", np.radians(np.asarray(g.node_lat.values))),
        "vertex_of_cell": (("nv", "cell"), (fn.T + 1).astype(np.int32)),
        "time": ("time", np.arange(nt, dtype=np.float64),
                 {"units": "days since 2010-01-01", "standard_name": "time"}),
        "tas": (("time", "cell"), data, {"units": "K"}),
    })
    ds.to_netcdf(path)
    return data, fn


def _triangle_centres(node_lon, node_lat, fn):
    lon_b, lat_b = node_lon[fn], node_lat[fn]
    xyz = np.stack([np.cos(np.radians(lat_b)) * np.cos(np.radians(lon_b)),
                    np.cos(np.radians(lat_b)) * np.sin(np.radians(lon_b)),
                    np.sin(np.radians(lat_b))], -1).mean(axis=1)
    lon = np.degrees(np.arctan2(xyz[:, 1], xyz[:, 0]))
    lat = np.degrees(np.arcsin(xyz[:, 2] / np.linalg.norm(xyz, axis=1)))
    return lon, lat, lon_b, lat_b


def write_healpix(path, zoom: int, nt: int = 3) -> np.ndarray:
    """Write HEALPix output (nested order): ``tas(time, cell)``; returns the values."""
    import uxarray as ux

    g = ux.Grid.from_healpix(zoom, pixels_only=True, nest=True)
    lon, lat = np.asarray(g.face_lon.values), np.asarray(g.face_lat.values)
    data = field_values(lon, lat, nt)
    ds = xr.Dataset({
        "crs": ((), 0, {"grid_mapping_name": "healpix", "healpix_nside": 2**zoom,
                        "healpix_order": "nest"}),
        "time": ("time", np.arange(nt, dtype=np.float64),
                 {"units": "days since 2020-01-01", "standard_name": "time"}),
        "tas": (("time", "cell"), data, {"units": "K", "grid_mapping": "crs"}),
    })
    ds.to_netcdf(path)
    return data
