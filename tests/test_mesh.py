"""Unstructured meshes (MPAS, UGRID, ICON output, HEALPix) built by uxarray: values, rows,
polygons and frames checked against xarray/uxarray and the map projection."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pytest
import shapely
import xarray as xr
from meshes import (
    icon_triangles,
    voronoi_mesh,
    write_healpix,
    write_icon,
    write_icon_grid,
    write_mpas,
    write_ugrid,
)
from ncreel.cells import ShardRows
from ncreel.config.settings import CellsSettings, RenderSettings
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.render.maps import map_xy
from ncreel.render.segment import make_renderer

uxarray = pytest.importorskip("uxarray")


@pytest.fixture(scope="module")
def voronoi():
    return voronoi_mesh(200)


def _render(projection="PlateCarree", width=320, height=180):
    return RenderSettings.from_params({
        "width": width, "height": height, "dpi": 40, "cmap": "viridis",
        "map": {"coastlines": False, "borders": False, "projection": projection,
                "projection_params": {}}})


def _wrap(lon):
    return (np.asarray(lon) + 180.0) % 360.0 - 180.0


# Opening: values and face centres against xarray / uxarray ----------------------------

def test_mpas_values_and_face_centres(tmp_path, voronoi):
    path = tmp_path / "mpas.nc"
    data = write_mpas(path, voronoi, nt=3)
    with open_series(str(path), "temperature") as s:
        assert (s.shape, s.mesh.kind, s.time_dim, s.x_dim) == ((3, 1, 200), "MPAS", "Time",
                                                                "nCells")
        np.testing.assert_array_equal(s.read(0, 3)[:, 0, :], data)
        lat, lon = s.cell_coordinates()
        with xr.open_dataset(path) as ds:
            np.testing.assert_allclose(lat[0], np.degrees(ds["latCell"].values), atol=1e-9)
            np.testing.assert_allclose(np.abs(_wrap(lon[0] - np.degrees(ds["lonCell"].values))),
                                       0, atol=1e-9)
            grid = uxarray.open_grid(ds)
            fn = grid.face_node_connectivity.values
            np.testing.assert_array_equal(s.mesh.face_nodes, np.where(fn < 0, -1, fn))
        assert s.time_axis().labels[1] == "2000-01-02T00:00:00"


def test_ugrid_icon_and_healpix_values(tmp_path, voronoi):
    u = tmp_path / "ugrid.nc"
    data = write_ugrid(u, voronoi)
    with open_series(str(u), "sst") as s:
        assert s.mesh.kind == "UGRID" and s.nx == 200
        np.testing.assert_array_equal(s.read(0, 3)[:, 0], data)
        # Face centres are the file's face_coordinates (uxarray reads them only when
        # named face_lon/face_lat).
        np.testing.assert_allclose(s.cell_coordinates()[1][0], voronoi[3], atol=1e-9)
    lon, lat, lb, tb = icon_triangles(60)
    i = tmp_path / "icon.nc"
    data = write_icon(i, lon, lat, lb, tb)
    with open_series(str(i), "tas") as s:
        assert s.mesh.kind == "CF bounds" and s.mesh.face_nodes.shape == (lon.size, 3)
        np.testing.assert_array_equal(s.read(1, 2)[0, 0], data[1])
        np.testing.assert_allclose(s.cell_coordinates()[0][0], lat, atol=1e-9)
    h = tmp_path / "hp.nc"
    data = write_healpix(h, 2)
    with open_series(str(h), "tas") as s:
        g = uxarray.Grid.from_healpix(2, pixels_only=True)
        assert s.mesh.kind == "HEALPix" and s.nx == 192
        np.testing.assert_allclose(s.cell_coordinates()[0][0], g.face_lat.values)
        np.testing.assert_array_equal(s.read(0, 3)[:, 0], data)


# Errors: one line, what to do ----------------------------------------------------------

def test_extra_dims_need_select_with_an_example(tmp_path, voronoi):
    path = tmp_path / "mpas3d.nc"
    write_mpas(path, voronoi, levels=4)
    with pytest.raises(NcreelError) as err:
        open_series(str(path), "temperature")
    msg = str(err.value)
    assert "extra dims nVertLevels (sizes nVertLevels=4)" in msg
    assert "--config 'select={nVertLevels: 0}'" in msg and "\n" not in msg
    with open_series(str(path), "temperature", select={"nVertLevels": 2}) as s:
        with xr.open_dataset(path) as ds:
            np.testing.assert_array_equal(s.read(0, 3)[:, 0],
                                          ds["temperature"].values[:, :, 2])
    lon, lat, lb, tb = icon_triangles(40)
    icon = tmp_path / "icon.nc"
    write_icon(icon, lon, lat, lb, tb, height=2)
    with pytest.raises(NcreelError, match=r"extra dims height .*select=\{height: 0\}"):
        open_series(str(icon), "tas")


def test_variable_on_vertices_is_refused_in_one_line(tmp_path, voronoi):
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi)
    with pytest.raises(NcreelError, match="on the MPAS mesh's nodes .*nVertices.*nCells"):
        open_series(str(path), "vertex_value")
    u = tmp_path / "ugrid.nc"
    write_ugrid(u, voronoi)
    with pytest.raises(NcreelError, match="UGRID mesh's nodes"):
        open_series(str(u), "node_value")


# Rows and polygons -----------------------------------------------------------------------

def _rows(series, geometry="text"):
    cells = CellsSettings.from_params({"model": "field", "params": {}, "geometry": geometry,
                                       "compression": "none", "compression_level": None,
                                       "suffix": ".copy", "layout": "wide"})
    mean = np.nanmean(series.read(0, series.n_time), axis=0)
    rows = ShardRows.for_series(series, cell_mean=mean, cells=cells)
    return rows, rows.rows(0, series.read(0, series.n_time))


def test_rows_are_keyed_by_face_with_face_centres_and_polygons(tmp_path, voronoi):
    path = tmp_path / "mpas.nc"
    data = write_mpas(path, voronoi, nt=2)
    with open_series(str(path), "temperature") as s:
        rows, out = _rows(s)
        assert [c[0] for c in rows.columns][-1] == "geom"
        cell = np.asarray(out["cell_id"])
        t = np.asarray(out["time_index"])
        assert len(cell) == 2 * 200
        np.testing.assert_allclose(np.asarray(out["value"]), data[t, cell], rtol=1e-7)
        np.testing.assert_allclose(np.asarray(out["lat"]), voronoi[4][cell], atol=1e-9)
        np.testing.assert_allclose(_wrap(np.asarray(out["lon"]) - voronoi[3][cell]), 0,
                                   atol=1e-9)
        polys = rows.geometry.polygons(np.arange(200))
        areas, split = [], 0
        for f, text in enumerate(polys):
            g = shapely.from_wkt(text.split(";", 1)[1])
            assert g.is_valid and g.area > 0, (f, text)
            lo, la = voronoi[3][f], voronoi[4][f]
            assert g.geom_type == "MultiPolygon"
            if len(g.geoms) > 1:
                split += 1
                assert g.bounds[0] == -180 and g.bounds[2] == 180
            elif abs(la) < 80:  # a cell holds its generator
                assert g.buffer(1e-9).contains(shapely.Point(lo, la)), (f, text)
            areas.append(g.area)
            assert max(abs(g.bounds[0]), abs(g.bounds[2])) <= 180
        assert split >= 1
        # Face polygons tile the sphere: their plate carree areas sum to the map's.
        assert sum(areas) == pytest.approx(360 * 180, rel=1e-3)


def test_postgis_geometry_type_is_multipolygon(tmp_path, voronoi):
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi, nt=1)
    with open_series(str(path), "temperature") as s:
        rows, _ = _rows(s, geometry="postgis")
        assert rows.columns[-1] == ("geom", "geometry(MultiPolygon, 4326)")


# Frames: each face's colour at its centre, through the map projection -------------------

def _check_frame(series, projection, *, blit=True, min_share=0.9, max_lat=90.0):
    data = series.read(1, 2)[0]
    vmin, vmax = float(np.nanmin(data)), float(np.nanmax(data))
    r = make_renderer(series, _render(projection), vmin=vmin, vmax=vmax, blit=blit)
    rgba = r.draw(data, "").copy()
    inner = r.interior() if blit else None
    lat, lon = series.cell_coordinates()
    checked = 0
    faces = np.flatnonzero(np.abs(lat[0]) <= max_lat)
    for f in faces:
        x, y = map_xy(r.projection, lon[0, f], lat[0, f])
        px, py = r.ax.transData.transform((x, y))
        row, col = int(r.height - py), int(px)
        if not (0 <= row < r.height and 0 <= col < r.width):
            continue
        if inner is not None and not inner[row, col]:
            continue
        rgb = matplotlib.colormaps["viridis"]((data[0, f] - vmin) / (vmax - vmin))[:3]
        want = (np.array(rgb) * 255).round().astype(int)
        got = rgba[row, col, :3].astype(int)
        assert np.abs(got - want).max() <= 1, (f, got, want)
        checked += 1
    assert checked >= min_share * faces.size, checked
    return r, rgba


@pytest.mark.parametrize("projection", ["PlateCarree", "Robinson"])
def test_mpas_frame_shows_each_face_colour_at_its_centre(tmp_path, voronoi, projection):
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi)
    with open_series(str(path), "temperature") as s:
        r, rgba = _check_frame(s, projection)
        # The map is covered: no hole between faces (transparent pixels) inside the map.
        area = r.map_area()
        assert area.sum() > 0.3 * r.width * r.height


def test_healpix_and_icon_frames(tmp_path):
    h = tmp_path / "hp.nc"
    write_healpix(h, 2)
    with open_series(str(h), "tas") as s:
        _check_frame(s, "Robinson", min_share=0.8)
    lon, lat, lb, tb = icon_triangles(300)
    i = tmp_path / "icon.nc"
    write_icon(i, lon, lat, lb, tb)
    with open_series(str(i), "tas") as s:
        # Drawn with straight edges in the map, a coarse polar triangle (great-circle
        # edges on the sphere) need not hold its spherical centre: checked below 60.
        _check_frame(s, "PlateCarree", min_share=0.8, max_lat=60.0)


def test_full_redraw_matches_the_index_path(tmp_path, voronoi):
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi)
    with open_series(str(path), "temperature") as s:
        data = s.read(0, 1)[0]
        a = make_renderer(s, _render(), vmin=270, vmax=310).draw(data, "x").copy()
        b = make_renderer(s, _render(), vmin=270, vmax=310, blit=False).draw(data, "x").copy()
    assert np.abs(a.astype(int) - b.astype(int)).max() <= 1


def test_frame_png_is_written(tmp_path, voronoi):
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi)
    with open_series(str(path), "temperature") as s:
        r = make_renderer(s, _render(), vmin=270, vmax=310)
        r.draw(s.read(0, 1)[0], "2000-01-01")
        r.save_png(tmp_path / "f.png")
    from PIL import Image

    im = Image.open(io.BytesIO((tmp_path / "f.png").read_bytes()))
    assert im.size == (320, 180)


def test_cells_without_corners_say_what_to_add(tmp_path):
    """ICON output without clon_bnds/clat_bnds: one line, never a traceback."""
    lon, lat, lb, tb = icon_triangles(40)
    full = tmp_path / "full.nc"
    write_icon(full, lon, lat, lb, tb, height=2)
    with xr.open_dataset(full) as ds:
        bare = ds.drop_vars(["clon_bnds", "clat_bnds"])
        for v in ("clon", "clat"):
            bare[v].attrs.pop("bounds")
        bare.to_netcdf(tmp_path / "bare.nc")
    path = str(tmp_path / "bare.nc")
    with pytest.raises(NcreelError, match=r"on unstructured cells \(ncells\) has extra dims "
                                          r"height .*select=\{height: 0\}"):
        open_series(path, "tas")
    with pytest.raises(NcreelError, match=r"no cell corners: .* add CF bounds to clat and clon"):
        open_series(path, "tas", select={"height": 0})


def test_regional_mesh_across_the_dateline_is_one_piece_in_the_middle(tmp_path, voronoi):
    """A Pacific mesh (faces across 180 degrees) is drawn centred on itself, not split."""
    fn, node_lon, node_lat, lon, lat = voronoi_mesh(2000)
    keep = ((lon > 140) | (lon < -160)) & (np.abs(lat) < 30)
    path = tmp_path / "pacific.nc"
    write_ugrid(path, (fn[keep], node_lon, node_lat, lon[keep], lat[keep]))
    with open_series(str(path), "sst") as s:
        assert s.nx == keep.sum()
        r, _ = _check_frame(s, "PlateCarree", min_share=0.8)
        x0, x1 = r.ax.get_xlim()
        assert x1 - x0 < 80  # the region's width, not the globe's
        _, cont = s.cell_coordinates(continuous=True)
        assert 140 < cont.min() and cont.max() < 200


def test_icon_grid_in_the_file_and_mpas_without_cells_on_vertex(tmp_path, voronoi):
    """The minimal mesh variables suffice: ICON's vertex_of_cell/vlon/vlat (no edge
    tables, radians without units), MPAS's verticesOnCell/nEdgesOnCell without
    cellsOnVertex (uxarray's own readers want every connectivity)."""
    path = tmp_path / "icon_grid.nc"
    data, fn = write_icon_grid(path, 80)
    with open_series(str(path), "tas") as s:
        assert (s.mesh.kind, s.x_dim, s.nx) == ("ICON", "cell", fn.shape[0])
        np.testing.assert_array_equal(s.mesh.face_nodes, fn)
        np.testing.assert_array_equal(s.read(0, 2)[:, 0], data)
        with xr.open_dataset(path) as ds:
            np.testing.assert_allclose(s.cell_coordinates()[0][0],
                                       np.degrees(ds["clat"].values))
        _check_frame(s, "PlateCarree", min_share=0.8, max_lat=60.0)
    mpas = tmp_path / "mpas.nc"
    write_mpas(mpas, voronoi)
    with xr.open_dataset(mpas) as ds:
        ds.drop_vars("cellsOnVertex").to_netcdf(tmp_path / "mpas_min.nc")
    with open_series(str(tmp_path / "mpas_min.nc"), "temperature") as s:
        assert s.mesh.kind == "MPAS"
        np.testing.assert_array_equal(s.mesh.face_nodes, voronoi[0])
        _check_frame(s, "Robinson")


def test_mesh_files_of_a_glob_are_joined_in_time_order(tmp_path, voronoi):
    early = write_mpas(tmp_path / "b_history.nc", voronoi, nt=2, day0=0)
    late = write_mpas(tmp_path / "a_history.nc", voronoi, nt=2, day0=2, values=early + 100)
    with open_series(str(tmp_path / "*_history.nc"), "temperature") as s:
        assert s.n_time == 4 and s.time_axis().labels[0] == "2000-01-01T00:00:00"
        np.testing.assert_array_equal(s.read(0, 4)[:, 0], np.concatenate([early, late]))


def test_overlapping_mesh_files_keep_a_repeated_time_once(tmp_path, voronoi):
    early = write_mpas(tmp_path / "a.nc", voronoi, nt=3, day0=0)
    late = np.stack([early[2], early[2] + 1])  # day 3 again (equal data), then day 4
    write_mpas(tmp_path / "b.nc", voronoi, nt=2, day0=2, values=late)
    with open_series(str(tmp_path / "*.nc"), "temperature") as s:
        assert s.n_time == 4 and "b.nc" in s.note
        np.testing.assert_array_equal(s.read(0, 4)[:, 0], np.concatenate([early, late[1:]]))
        again = open_series(str(tmp_path / "*.nc"), "temperature", steps=s.spec()["steps"])
        assert again.n_time == 4
        again.close()
    write_mpas(tmp_path / "b.nc", voronoi, nt=2, day0=2, values=late + 5)
    with pytest.raises(NcreelError, match="different"):
        open_series(str(tmp_path / "*.nc"), "temperature")


def test_a_variable_off_the_mesh_is_not_taken_for_one(tmp_path, voronoi):
    """xtime (Time only) in an MPAS file: the usual one-line dims error, not 'on nodes'."""
    path = tmp_path / "mpas.nc"
    write_mpas(path, voronoi)
    with xr.open_dataset(path) as ds:
        ds.assign(scalar_series=("Time", np.arange(3.0))).to_netcdf(tmp_path / "m2.nc")
    with pytest.raises(NcreelError) as err:
        open_series(str(tmp_path / "m2.nc"), "scalar_series")
    assert "has dims (Time); need time plus two spatial dims" in str(err.value)
    assert "nodes" not in str(err.value)
