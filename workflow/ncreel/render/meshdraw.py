"""Faces of an unstructured mesh on the frame's map: laid out once, rasterised into an index.

Drawing a million polygons with matplotlib costs tens of seconds and a gigabyte (one
``Path`` object per face, several full draws), so a mesh is handled as an image instead:

1. :func:`face_layout` lays the faces out in the map's own coordinates, vectorised (no
   per-polygon cartopy projection): longitudes are taken relative to the map's central
   longitude and each face is unwrapped around its centre. The few faces that cross the
   map's edge meridian (central longitude + 180) are split there into a piece on each
   side, and faces around a pole (corners going all the way round it, or a corner on it)
   are closed along the pole, with shapely; faces over 2 degrees wide get their edges
   densified, so that they follow a curved map boundary. A face with a corner outside the
   projection's domain is not drawn.
2. :func:`mesh_index_image` rasterises the faces (fan triangles; constrained Delaunay
   triangles of the split pieces) into the index image of
   :func:`ncreel.render.frame.cell_index_image`: which face each pixel centre lies in,
   through the axes' own transform, in vectorised numpy.
3. :class:`FaceImage` is what the figure draws in place of a ``pcolormesh``: an image
   of exactly the frame's pixels, a face's colour where the index image has that face,
   so the colour bar, the reference draws (field all black / all white) and a full
   redraw (``blit=False``) work as for grids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncreel.input.cfaxes import wrap_longitude

#: Longitudes this close to the map's edge meridian are kept on their side of it.
_EDGE_EPS = 1e-7
#: Faces spanning more degrees than this get edges densified to 1 degree steps.
_COARSE_DEG = 2.0
#: Faces transformed and rasterised per chunk (bounds the set-up's memory).
_CHUNK = 65536
#: Candidate pixels tested per vectorised step of the rasteriser.
_STEP = 2**19


def central_longitude_of(projection) -> float:
    """Central longitude (degrees) of a cartopy projection or PlainPlateCarree."""
    if hasattr(projection, "central_longitude"):
        return float(projection.central_longitude)
    params = getattr(projection, "proj4_params", {}) or {}
    for key in ("lon_0", "pm"):
        if key in params:
            try:
                return float(params[key])
            except (TypeError, ValueError):
                break
    return 0.0


@dataclass
class FaceLayout:
    """The faces of a mesh in map coordinates.

    Attributes
    ----------
    xy : numpy.ndarray, shape (n, m, 2), float32
        Map x, y of the corners of the faces drawn whole, padded after the last corner
        by repeating it.
    face : numpy.ndarray, shape (n,), int64
        Face index of each row of `xy`.
    count : numpy.ndarray, shape (n,), int64
        Corners of each (>= 3).
    tri : numpy.ndarray, shape (k, 3, 2), float64
        Triangles of the pieces of split faces (map edge, poles), map x, y.
    tri_face : numpy.ndarray, shape (k,), int64
    bounds : tuple of 4 float
        ``(xmin, xmax, ymin, ymax)`` of every corner.
    """

    xy: np.ndarray
    face: np.ndarray
    count: np.ndarray
    tri: np.ndarray
    tri_face: np.ndarray
    bounds: tuple


def _special_pieces(lon_rel, lat, pole_ring):
    """Pieces of one face crossing the map's edge or round a pole, as shapely polygons.

    Parameters
    ----------
    lon_rel : (k,) longitudes relative to the map's centre, wrapped to [-180, 180)
    lat : (k,) latitudes; an open ring (no repeated first corner)
    pole_ring : bool
        The corners go round a pole (their longitudes turn by 360 degrees).
    """
    from shapely import Polygon, box, segmentize
    from shapely.affinity import translate

    pts_lon, pts_lat = [], []
    k = len(lon_rel)
    cur = None
    for i in range(k):
        if abs(lat[i]) >= 90.0 - 1e-9:
            # A corner on the pole is the pole edge between its neighbours' longitudes.
            for v in (lon_rel[i - 1], lon_rel[(i + 1) % k]):
                cur = v if cur is None else cur + wrap_longitude(v - cur)
                pts_lon.append(cur)
                pts_lat.append(float(np.sign(lat[i]) * 90.0))
            continue
        cur = lon_rel[i] if cur is None else cur + wrap_longitude(lon_rel[i] - cur)
        pts_lon.append(cur)
        pts_lat.append(float(lat[i]))
    if pole_ring:
        pole = 90.0 if np.mean(pts_lat) > 0 else -90.0
        end = pts_lon[0] + 360.0 * np.sign(pts_lon[-1] - pts_lon[0])
        pts_lon += [end, end, pts_lon[0]]
        pts_lat += [pts_lat[0], pole, pole]
    poly = Polygon(np.column_stack([pts_lon, pts_lat])).buffer(0)
    if poly.is_empty:
        return []
    frame = box(-180.0 + _EDGE_EPS, -90.0, 180.0 - _EDGE_EPS, 90.0)
    pieces = []
    for shift in (-720.0, -360.0, 0.0, 360.0, 720.0):
        part = translate(poly, xoff=shift).intersection(frame)
        for g in getattr(part, "geoms", [part]):
            if not g.is_empty and g.geom_type == "Polygon" and g.area > 0:
                # Edges along the map boundary follow its curve (1 degree steps).
                pieces.append(segmentize(g, 1.0))
    return pieces


def _triangles(poly) -> np.ndarray:
    """Constrained Delaunay triangles of a shapely polygon, shape (k, 3, 2)."""
    from shapely import constrained_delaunay_triangles, get_coordinates

    tris = constrained_delaunay_triangles(poly)
    out = [get_coordinates(t)[:3] for t in getattr(tris, "geoms", [])]
    return np.asarray(out, np.float64).reshape(-1, 3, 2)


def face_layout(mesh, projection) -> FaceLayout:
    """Lay the faces of `mesh` out in the map coordinates of `projection`.

    Parameters
    ----------
    mesh : ncreel.input.mesh.Mesh
    projection : cartopy.crs.Projection or ncreel.render.maps.PlainPlateCarree

    Returns
    -------
    FaceLayout
    """
    from ncreel.render.maps import PlainPlateCarree

    c = central_longitude_of(projection)
    plain = isinstance(projection, PlainPlateCarree)

    def project(x, y):
        x = np.clip(x, -180.0 + _EDGE_EPS, 180.0 - _EDGE_EPS)
        if plain:
            return x, np.asarray(y, np.float64)
        import cartopy.crs as ccrs

        pts = projection.transform_points(ccrs.PlateCarree(), x + c, np.asarray(y, float))
        return pts[..., 0], pts[..., 1]

    fn = mesh.face_nodes
    n, m = fn.shape
    count = (fn >= 0).sum(axis=1)
    # float32: map coordinates to well under a pixel (metres of a projection, or degrees).
    xy = np.empty((n, m, 2), np.float32)
    ok = np.zeros(n, bool)
    special = []
    pole = np.zeros(n, bool)
    ref_all = wrap_longitude(mesh.face_lon - c)
    for a in range(0, n, _CHUNK):
        b = min(a + _CHUNK, n)
        idx = fn[a:b]
        idx = np.where(idx < 0, idx[np.arange(b - a), count[a:b] - 1][:, None], idx)
        rel = wrap_longitude(mesh.node_lon[idx] - c)
        lat = mesh.node_lat[idx]
        ref = ref_all[a:b, None]
        u = ref + wrap_longitude(rel - ref)
        ring = np.concatenate([rel, rel[:, :1]], axis=1)
        pole[a:b] = np.abs(wrap_longitude(np.diff(ring, axis=1)).sum(axis=1)) > 180.0
        # Split (edge, poles), and faces wider than _COARSE_DEG: their straight edges in
        # the map would cut its curved boundary, so they are drawn with densified edges.
        spec = (pole[a:b] | (np.abs(lat) >= 90.0 - 1e-9).any(axis=1)
                | (u.min(axis=1) < -180.0) | (u.max(axis=1) > 180.0)
                | (np.ptp(u, axis=1) > _COARSE_DEG) | (np.ptp(lat, axis=1) > _COARSE_DEG))
        px, py = project(u, lat)
        xy[a:b, :, 0], xy[a:b, :, 1] = px, py
        ok[a:b] = ~spec & np.isfinite(px).all(axis=1) & np.isfinite(py).all(axis=1)
        special.extend((a + np.flatnonzero(spec)).tolist())
    keep = np.flatnonzero(ok & (count >= 3))
    tris, tri_face = [], []
    for f in special:
        k = int(count[f])
        rel = wrap_longitude(mesh.node_lon[fn[f, :k]] - c)
        for piece in _special_pieces(rel, mesh.node_lat[fn[f, :k]], bool(pole[f])):
            t = _triangles(piece)
            if not len(t):
                continue
            x, y = project(t[..., 0], t[..., 1])
            good = np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)
            tris.append(np.stack([x, y], axis=-1)[good])
            tri_face.append(np.full(int(good.sum()), f, np.int64))
    xy = xy[keep]
    tri = np.concatenate(tris) if tris else np.empty((0, 3, 2))
    tri_face = np.concatenate(tri_face) if tri_face else np.empty(0, np.int64)
    both = [a.reshape(-1, 2) for a in (xy, tri) if a.size]
    lo = np.min([b.min(axis=0) for b in both], axis=0) if both else np.zeros(2)
    hi = np.max([b.max(axis=0) for b in both], axis=0) if both else np.ones(2)
    return FaceLayout(xy=xy, face=keep.astype(np.int64), count=count[keep], tri=tri,
                      tri_face=tri_face, bounds=(lo[0], hi[0], lo[1], hi[1]))


def _rasterise(index: np.ndarray, tx: np.ndarray, ty: np.ndarray, value: np.ndarray) -> None:
    """Write `value` into `index` at every pixel whose centre lies in each triangle.

    `tx`, `ty` (k, 3) are pixel coordinates: x to the right, y down from the top edge,
    pixel (r, c) centred at (c + 0.5, r + 0.5). Shared edges go to the triangle written
    last; degenerate triangles cover nothing.
    """
    h, w = index.shape
    x0, x1, x2 = tx[:, 0], tx[:, 1], tx[:, 2]
    y0, y1, y2 = ty[:, 0], ty[:, 1], ty[:, 2]
    area = (x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0)
    with np.errstate(invalid="ignore"):
        c0 = np.ceil(np.minimum(np.minimum(x0, x1), x2) - 0.5)
        c1 = np.floor(np.maximum(np.maximum(x0, x1), x2) - 0.5)
        r0 = np.ceil(np.minimum(np.minimum(y0, y1), y2) - 0.5)
        r1 = np.floor(np.maximum(np.maximum(y0, y1), y2) - 0.5)
        c0, r0 = np.maximum(c0, 0), np.maximum(r0, 0)
        c1, r1 = np.minimum(c1, w - 1), np.minimum(r1, h - 1)
        live = np.isfinite(area) & (area != 0) & (c1 >= c0) & (r1 >= r0)
    sel = np.flatnonzero(live)
    if not sel.size:
        return
    bw = (c1[sel] - c0[sel] + 1).astype(np.int64)
    bh = (r1[sel] - r0[sel] + 1).astype(np.int64)
    key = bh * (w + 1) + bw
    order = np.argsort(key, kind="stable")
    sel, key = sel[order], key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.r_[starts[1:], sel.size]
    sign = np.sign(area)
    for s, e in zip(starts, ends, strict=True):
        gh, gw = int(key[s] // (w + 1)), int(key[s] % (w + 1))
        oy, ox = np.divmod(np.arange(gh * gw), gw)
        per = max(1, _STEP // (gh * gw))
        for a in range(s, e, per):
            g = sel[a:min(a + per, e)]
            cc = c0[g][:, None] + ox[None, :]
            rr = r0[g][:, None] + oy[None, :]
            px, py = cc + 0.5, rr + 0.5
            sg = sign[g][:, None]
            inside = None
            for (ax_, ay_), (bx_, by_) in (((x0, y0), (x1, y1)), ((x1, y1), (x2, y2)),
                                           ((x2, y2), (x0, y0))):
                axg, ayg = ax_[g][:, None], ay_[g][:, None]
                ef = ((bx_[g][:, None] - axg) * (py - ayg)
                      - (by_[g][:, None] - ayg) * (px - axg)) * sg >= 0
                inside = ef if inside is None else inside & ef
            gi, pi = np.nonzero(inside)
            index[rr[gi, pi].astype(np.intp), cc[gi, pi].astype(np.intp)] = value[g][gi]


def mesh_index_image(ax, layout: FaceLayout, size: tuple[int, int]) -> np.ndarray:
    """Which face each pixel of `ax`'s figure shows (the index image of a mesh).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The frame's axes, layout and view limits fixed.
    layout : FaceLayout
    size : (int, int)
        Figure size ``(width, height)`` in pixels.

    Returns
    -------
    numpy.ndarray, shape (height, width), int32
        Face index of each pixel (row 0 at the top), -1 where no face is, outside the
        axes and outside the map's boundary.
    """
    w, h = size
    index = np.full((h, w), -1, np.int32)
    trans = ax.transData

    def to_pixels(xy):
        d = trans.transform(xy.reshape(-1, 2).astype(np.float64))
        return d[:, 0].reshape(xy.shape[:-1]), (h - d[:, 1]).reshape(xy.shape[:-1])

    n, m = layout.xy.shape[:2]
    for a in range(0, n, _CHUNK):
        b = min(a + _CHUNK, n)
        px, py = to_pixels(layout.xy[a:b])
        for j in range(1, m - 1):  # fan triangles (0, j, j + 1) of each face
            has = np.flatnonzero(layout.count[a:b] > j + 1)
            if not has.size:
                break
            tx = np.stack([px[has, 0], px[has, j], px[has, j + 1]], axis=1)
            ty = np.stack([py[has, 0], py[has, j], py[has, j + 1]], axis=1)
            _rasterise(index, tx, ty, layout.face[a:b][has].astype(np.int32))
    if len(layout.tri):
        px, py = to_pixels(layout.tri)
        _rasterise(index, px, py, layout.tri_face.astype(np.int32))
    # Only what the axes show: inside its frame (a projection's boundary, too).
    yy, xx = np.nonzero(index >= 0)
    if yy.size:
        patch = ax.patch.get_path().transformed(ax.patch.get_transform())
        pts = np.column_stack([xx + 0.5, h - yy - 0.5])
        inside = patch.contains_points(pts)
        index[yy[~inside], xx[~inside]] = -1
    return index


def _colour_image_class():
    from matplotlib.image import BboxImage

    class ColourMappedImage(BboxImage):
        """A ``BboxImage`` whose ``set_array`` takes values, coloured on the way in.

        The values are coloured once, by :class:`ncreel.render.colorlookup.ColorLookup` (as
        the frames are), into 8-bit RGBA that matplotlib then draws without its own
        colour mapping (which holds several float copies of a frame-sized image);
        ``get_array`` returns the values, so a colour bar and the reference draws (a
        constant colormap set, then ``set_array``) work as on a ``pcolormesh``.
        """

        _values = None

        def set_array(self, A):
            from ncreel.render.colorlookup import ColorLookup

            A = np.ma.asarray(A)
            self._values = A
            rgba = ColorLookup(self.get_cmap(), self.norm).rgba32(
                np.ascontiguousarray(np.ma.getdata(A), dtype=np.float64).reshape(-1))
            rgba[np.ma.getmaskarray(A).reshape(-1)] = 0
            self.set_data(rgba.view(np.uint8).reshape(*A.shape, 4))

        def get_array(self):
            return self._values

    return ColourMappedImage


class FaceImage:
    """A figure-sized image standing in for a mesh's ``pcolormesh`` on the frame's axes.

    The image (``matplotlib.image.BboxImage`` over the whole figure, nearest
    neighbour, so each figure pixel is one image pixel) shows a face's colour where
    the index image has that face; it carries the colormap and norm (the colour bar
    reads them), and ``set_array`` takes per-pixel values (:meth:`to_image`), as the
    grid's mesh takes cell values.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    cmap, norm
        Of the field.
    size : (int, int)
        Figure size ``(width, height)`` in pixels.
    """

    def __init__(self, ax, *, cmap, norm, size: tuple[int, int]) -> None:
        from matplotlib.transforms import Bbox, TransformedBbox

        w, h = size
        fig = ax.get_figure()
        self.image = _colour_image_class()(
            TransformedBbox(Bbox([[0, 0], [1, 1]]), fig.transFigure), cmap=cmap, norm=norm,
            interpolation="nearest", resample=False, origin="upper")
        self.image.set_in_layout(False)
        self.image.set_clip_path(ax.patch)
        self.image.set_zorder(1)  # as pcolormesh's QuadMesh: below map lines (zorder 2+)
        self.index = None
        self.image.set_array(np.ma.array(np.zeros((h, w), np.float32), mask=True))
        # Nothing to show until the index exists (the layout's first draw skips it).
        self.image.set_visible(False)
        ax.add_artist(self.image)

    def set_index(self, index: np.ndarray) -> None:
        """Set the index image (face of each pixel, -1: none) the faces are drawn through."""
        self.index = index
        self._where = index >= 0
        self.image.set_visible(True)

    def to_image(self, field: np.ndarray) -> np.ndarray:
        """Face values `field` (any shape, n_face values) as the figure-sized image."""
        values = np.asarray(field).reshape(-1)
        out = np.ma.masked_invalid(values.take(np.maximum(self.index, 0)))
        out[~self._where] = np.ma.masked
        return out
