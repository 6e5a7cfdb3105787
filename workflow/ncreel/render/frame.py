"""Render frames with one reused figure per worker; per-frame cost independent of the grid.

Creating a figure per frame leaks memory in long loops and costs most of the time; here the
figure, axes, colour bar and map features are built and drawn once. Re-rasterising the
cells every frame (``pcolormesh`` does) costs time in proportion to the number of cells: a
0.25 degree global grid (721 x 1440) draws about one frame per second. So, once per worker,
the cells are rasterised by matplotlib itself into an *index image* (each cell painted, not
antialiased, in a colour encoding its index; see :func:`cell_index_image`), which says which
cell each pixel of the map shows, whatever the grid (1-D or 2-D coordinates, non-monotonic,
curvilinear) and the projection. Each frame is then a gather of the field at those cells, a
colour lookup done exactly as ``pcolormesh`` colours (:class:`ColorLookup`), written into
the saved background; pixels where coastlines, spines or ticks lie above the field are
composited from two reference draws (field all black, field all white), and the time label
is drawn on top: it sits in the header band above the map (:mod:`ncreel.render.frametext`),
so it is the only text drawn per frame and never covers data. :meth:`FrameRenderer.draw`
returns the canvas's RGBA pixels, which are what ``savefig(format="png")`` would encode;
the caller pipes them to an encoder or writes a PNG (:meth:`FrameRenderer.save_png`) for
frames a person should be able to open.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # no display on compute nodes; set before any pyplot import elsewhere

import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import Colormap, ListedColormap, NoNorm, Normalize  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ncreel.render.colorlookup import ColorLookup  # noqa: E402
from ncreel.render.frametext import (  # noqa: E402
    add_caption,
    align_header,
    fit_header,
    keep_below,
    style_colorbar,
)

#: Cells an index image can tell apart: 24 bits of RGB, 0 meaning "no cell".
MAX_INDEX_CELLS = 2**24 - 1


class FrameRenderer:
    """A figure of fixed pixel size showing one 2-D field per frame.

    Parameters
    ----------
    shape : (int, int)
        Grid shape ``(ny, nx)``.
    width, height : int
        Frame size in pixels.
    dpi : float
        Dots per inch (sets text size relative to the frame).
    cmap : str
        Matplotlib colormap name.
    vmin, vmax : float
        Colour limits, in the variable's units, shared by every frame of the run.
    x, y : numpy.ndarray, optional
        Cell-centre coordinates: 1-D of length nx / ny, or 2-D ``(ny, nx)`` for
        curvilinear grids (longitude / latitude in degrees when `projection` is given).
        Grid indices when omitted.
    title : str
        Figure title (variable name and units), shrunk or wrapped to fit the frame
        (:func:`ncreel.render.frametext.fit_header`).
    xlabel, ylabel : str
        Axis labels (not shown on map projections).
    units : str
        The colour bar's label (the variable's units); none when empty.
    time_labels : sequence of str
        The time labels the frames will show: the header keeps room for the widest, so
        the title never moves and a label never runs into it. Empty: room for a
        date and time.
    blit : bool
        Draw each frame from the index image onto the saved background (default). ``False``
        redraws the whole figure with ``pcolormesh`` every frame: the reference the fast
        path is measured against (:func:`frame_difference`), about a million times slower
        per cell.
    projection : cartopy.crs.Projection or ncreel.render.maps.PlainPlateCarree, optional
        Map projection of the axes (see :func:`ncreel.render.maps.map_projection`); `x`, `y` are
        then longitudes and latitudes (degrees). None: plain axes in the grid's coordinates.
    features : iterable of ncreel.render.maps.MapLines
        Map lines (coastlines, borders) drawn above the field; needs `projection`.
    mesh : ncreel.input.mesh.Mesh, optional
        The faces of an unstructured mesh (:mod:`ncreel.render.meshdraw`), in place of a
        grid: `shape` is then ``(1, n_face)``, `projection` is required and `x`, `y`
        are the face centres.
    caption : str
        One line at the bottom of the frame (credits, the experiment), drawn once; the map
        and colour bar are laid out above it.
    gridlines : bool
        Dotted lines at round longitudes and latitudes, labelled on the map's left and
        bottom edges (needs `projection`); drawn once, above the field, like coastlines.
    extend : {"neither", "min", "max", "both"}
        Arrows at the colour bar's ends, for values below `vmin` / above `vmax` (drawn in
        the colormap's under / over colours, as the cells are).
    overlays : sequence of ncreel.render.overlays.ContourOverlay or VectorOverlay
        Drawn per frame above the field (and the map lines); :meth:`draw` takes their
        fields. Needs `projection` and cell-centre `x`, `y`.
    edges : (numpy.ndarray, numpy.ndarray), optional
        Cell edges of 1-D `x`, `y`, shapes (nx + 1,) and (ny + 1,), in their units (e.g.
        a region's cells' true bounds, from the whole grid); midpoints between centres,
        extrapolated by half a cell at the ends, when omitted.
    decorate : callable, optional
        ``decorate(fig, ax)``, called once after the static figure is drawn and its
        layout fixed, before the background is saved (config ``decorate``,
        :mod:`ncreel.render.decorate`). What it adds must not change between draws: the
        saved background is compared with a fresh draw of it on frames 1, 2, 3, 5, 9,
        17, ... (1-based); from the first difference on, every frame is drawn in full,
        with one warning logged (:attr:`full_redraw` is then True).

    Raises
    ------
    ValueError
        If `cmap` is not a known colormap, the size is below 16 x 16 pixels, or the grid
        has more than :data:`MAX_INDEX_CELLS` cells.
    """

    def __init__(self, *, shape: tuple[int, int], width: int, height: int, dpi: float,
                 cmap: str, vmin: float, vmax: float, x=None, y=None, title: str = "",
                 xlabel: str = "", ylabel: str = "", blit: bool = True, projection=None,
                 features=(), units: str = "", time_labels: Sequence[str] = (),
                 mesh=None, overlays: Sequence = (), extend: str = "neither",
                 gridlines: bool = False, caption: str = "", decorate=None,
                 edges=None) -> None:
        if width < 16 or height < 16:
            raise ValueError(f"frame size {width}x{height}: need at least 16x16 pixels")
        if cmap not in matplotlib.colormaps:
            raise ValueError(f"cmap '{cmap}' is not a matplotlib colormap")
        ny, nx = shape
        self.shape = (int(ny), int(nx))
        if ny * nx > MAX_INDEX_CELLS:
            raise ValueError(f"grid {ny}x{nx}: at most {MAX_INDEX_CELLS} cells can be drawn")
        self.width, self.height, self.dpi = int(width), int(height), float(dpi)
        self.blit = bool(blit)
        self.projection = projection
        # Constrained layout from the start, so the colour bar is placed next to the map
        # (added after the colour bar, it leaves a wide gap between them).
        self.fig = Figure(figsize=(self.width / self.dpi, self.height / self.dpi), dpi=self.dpi,
                          layout="constrained")
        self.canvas = FigureCanvasAgg(self.fig)
        ax = self.ax = map_axes(self.fig, projection)
        self._x = np.arange(nx) if x is None else np.asarray(x)
        self._y = np.arange(ny) if y is None else np.asarray(y)
        self._edges = edges
        self.norm = Normalize(vmin=vmin, vmax=vmax)
        self._faces = None
        if mesh is not None:
            # A mesh is drawn through its own index image (see ncreel.render.meshdraw).
            from ncreel.render.meshdraw import FaceImage, face_layout

            layout = face_layout(mesh, projection)
            self._faces = FaceImage(ax, cmap=matplotlib.colormaps[cmap], norm=self.norm,
                                    size=(self.width, self.height))
            self.mesh, self._to_mesh = self._faces.image, None
            ax.set_xlim(*layout.bounds[:2])
            ax.set_ylim(*layout.bounds[2:])
        else:
            self.mesh, self._to_mesh = add_mesh(ax, self._x, self._y, np.zeros((ny, nx)),
                                                cmap=matplotlib.colormaps[cmap],
                                                norm=self.norm, projection=projection,
                                                edges=edges)
        for feature in features:
            feature.add_to(ax, projection)
        if overlays and mesh is not None:
            raise ValueError("overlays are not supported yet on unstructured meshes")
        self.overlays = list(overlays)
        for overlay in self.overlays:
            overlay.attach(ax, self._x, self._y, self.shape, projection,
                           (self.width, self.height))
        self.colorbar = self.fig.colorbar(self.mesh, ax=ax, shrink=0.9, pad=0.02,
                                          extend=extend)
        style_colorbar(self.colorbar, vmin, vmax, units)
        set_labels(ax, xlabel=xlabel, ylabel=ylabel, projection=projection)
        if gridlines and projection is not None:
            from ncreel.render.maps import add_gridlines

            add_gridlines(ax, projection)
        # Title and time label in a band above the map and colour bar, which are laid out
        # below it: the label, drawn per frame, never covers data.
        header = fit_header(self.fig, self.canvas.get_renderer(), title, time_labels)
        self.title, self.label = header.title, header.label
        foot = add_caption(self.fig, self.canvas.get_renderer(), caption)
        self.fig.get_layout_engine().set(rect=(0.0, foot, 1.0, header.bottom - foot))
        self.canvas.draw()
        # Fix the layout and the view after one draw, so frames never shift and the index
        # image stays valid.
        self.fig.set_layout_engine("none")
        if keep_below(self.fig, header.bottom):  # too small for the constrained layout
            self.canvas.draw()
        align_header(header, self.fig, self.canvas.get_renderer(), ax)
        ax.set_xlim(ax.get_xlim())
        ax.set_ylim(ax.get_ylim())
        #: The figure is decorated by user code, whose artists are checked to stay as saved.
        self.decorated = decorate is not None
        #: Frames drawn in full since the decorated background was seen to change.
        self.full_redraw = False
        self._frames = 0
        if decorate is not None:  # on the fixed layout, before anything is saved
            decorate(self.fig, ax)
        if self._faces is not None:
            from ncreel.render.meshdraw import mesh_index_image

            self._faces.set_index(mesh_index_image(ax, layout, (self.width, self.height)))
            del layout
            self._to_mesh = self._faces.to_image
            self.mesh.set_array(self._to_mesh(np.zeros(nx)))
        self._lookup = ColorLookup(self.mesh.get_cmap(), self.norm)
        if self.blit:
            self._prepare_index_path()

    def _prepare_index_path(self) -> None:
        # Everything but the field and the label, drawn once. Large arrays are built one at
        # a time and freed before the next, so the set-up's peak memory stays near what the
        # frames need (a worker's peak is what its job must declare).
        h, w = self.height, self.width
        if self._faces is not None:
            index, self._faces.index = self._faces.index, None
        else:
            index = cell_index_image(self.ax, self._x, self._y, self.shape, (w, h),
                                     self.dpi, projection=self.projection,
                                     edges=self._edges)
        gc.collect()  # the index figure's canvas and mesh sit in reference cycles
        ncells = self.shape[0] * self.shape[1]
        self._pixels = pixels = MapPixels(index, ncells)
        del index
        self._box = pixels.box
        self.label.set_visible(False)
        self.mesh.set_visible(False)
        for overlay in self.overlays:  # drawn per frame, never part of the background
            overlay.artist.set_visible(False)
        self.canvas.draw()
        self._background = np.array(self.canvas.buffer_rgba())
        # The background outside the box, copied per frame (MapPixels.paint writes the
        # box, once when no cell is transparent).
        self._around = outside_boxes((w, h), [self._box])
        # What lies above the field (coastlines, spines, tick marks): the figure drawn with
        # the field all black (f0) and all white (f1); see :class:`AggOverlay`.
        self.mesh.set_visible(True)
        cmap = self.mesh.get_cmap()
        _set_mesh_constant(self.mesh, "black")
        self.canvas.draw()
        f0 = np.array(np.asarray(self.canvas.buffer_rgba())[self._box][..., :3])
        _set_mesh_constant(self.mesh, "white")
        self.canvas.draw()
        f1 = np.asarray(self.canvas.buffer_rgba())[self._box][..., :3]
        if self.decorated:  # kept hidden for a full redraw, should the check ask for one
            self.mesh.set_cmap(cmap)
            self.mesh.set_visible(False)
        else:
            self.mesh.remove()  # never drawn again; the colour bar keeps its norm and cmap
        self.label.set_visible(True)
        for overlay in self.overlays:
            overlay.artist.set_visible(True)
        pixels.freeze(self._background, f0, f1)
        del f0, f1

    def draw(self, field: np.ndarray, label: str, overlay_fields: Sequence = ()
             ) -> np.ndarray:
        """Draw `field` with time label `label`; return the frame's pixels.

        Parameters
        ----------
        field : numpy.ndarray, shape (ny, nx)
            Values in the variable's units; NaN cells are left transparent.
        label : str
            Time shown above the map (e.g. ``1980-06-01``).
        overlay_fields : sequence of tuple of numpy.ndarray
            For each overlay, the arrays its ``update`` takes (contours: the field; vectors:
            u and v), each of shape (ny, nx).

        Returns
        -------
        numpy.ndarray, shape (height, width, 4), uint8
            RGBA pixels (not premultiplied), a view of the canvas buffer: valid until the
            next call, copy it to keep it.

        Raises
        ------
        ValueError
            If `field` does not have the grid's shape.
        """
        field = np.asarray(field)
        if field.shape != self.shape:
            raise ValueError(f"field shape {field.shape} != grid shape {self.shape}")
        self.label.set_text(label)
        if len(overlay_fields) != len(self.overlays):
            raise ValueError(f"{len(self.overlays)} overlay(s), {len(overlay_fields)} "
                             "overlay field set(s)")
        for overlay, arrays in zip(self.overlays, overlay_fields, strict=True):
            overlay.update(*arrays)
        if self.blit and self.decorated and not self.full_redraw:
            n, self._frames = self._frames, self._frames + 1
            if n & (n - 1) == 0 and self._background_changed():  # frames 0, 1, 2, 4, 8...
                self._redraw_in_full(n)
        if not self.blit or self.full_redraw:
            self.mesh.set_array(self._to_mesh(field))
            self.canvas.draw()
            return np.asarray(self.canvas.buffer_rgba())
        buf = np.asarray(self.canvas.buffer_rgba())
        for around in self._around:
            buf[around] = self._background[around]
        # Any dtype: ColorLookup normalises as Normalize does.
        self._pixels.paint(buf, self._background, field.ravel(), self._lookup)
        renderer = self.canvas.get_renderer()
        for overlay in self.overlays:  # Agg lines onto the frame, as a full draw does
            overlay.artist.draw(renderer)
        self.label.draw(renderer)
        return buf

    def _background_changed(self) -> bool:
        return background_changed(self.canvas, self._background,
                                  [self.label, *(o.artist for o in self.overlays)])

    def _redraw_in_full(self, frame: int) -> None:
        self.full_redraw = True
        self.mesh.set_visible(True)
        say_full_redraw(frame)

    def save_png(self, path: str | os.PathLike, *, compress_level: int = 6,
                 description: str | None = None) -> None:
        """Write the frame last drawn by :meth:`draw` as a PNG of exactly width x height.

        Parameters
        ----------
        path : path
            Output file.
        compress_level : int
            zlib level 0-9; 6 is what ``savefig`` uses, so the pixels and size match it.
        description : str, optional
            The PNG's ``Description`` text (:func:`write_png`): the frame's time label.
        """
        write_png(np.asarray(self.canvas.buffer_rgba()), path, compress_level=compress_level,
                  description=description)

    def render(self, field: np.ndarray, label: str, path: str | os.PathLike) -> None:
        """Draw `field` and write it as a PNG at `path` (see :meth:`draw`)."""
        self.draw(field, label)
        self.save_png(path)

    def map_area(self) -> np.ndarray:
        """Pixels that show a grid cell, shape (height, width) bool (blit mode only)."""
        area = np.zeros((self.height, self.width), dtype=bool)
        area[self._box] = self._pixels.area
        return area

    def cell_index(self) -> np.ndarray:
        """Flat cell index of each pixel, -1 where none, shape (height, width) (blit mode)."""
        index = np.full((self.height, self.width), -1, np.int64)
        index[self._box] = self._pixels.cell_index()
        return index

    def interior(self) -> np.ndarray:
        """Map pixels away from cell edges and the map boundary (see :func:`cell_interior`)."""
        if self._faces is not None:  # a mesh: its index image, kept by the blit set-up
            return cell_interior(self.cell_index())
        return cell_interior(cell_index_image(self.ax, self._x, self._y, self.shape,
                                              (self.width, self.height), self.dpi,
                                              projection=self.projection,
                                              edges=self._edges))

    def level_step(self) -> int:
        """Largest 8-bit channel step between neighbouring colours of the colormap."""
        rgba = self._lookup.lut32[:self._lookup.n].view(np.uint8).reshape(-1, 4).astype(int)
        return int(np.abs(np.diff(rgba, axis=0)).max()) if len(rgba) > 1 else 0

    def close(self) -> None:
        """Release the figure."""
        self.fig.clear()


def background_changed(canvas, background: np.ndarray, hidden) -> bool:
    """Whether a fresh draw of the static figure differs from the saved `background`.

    The figure on `canvas` is drawn with the per-frame artists `hidden` (time label,
    overlays) hidden, as the background was saved: user (``decorate``) artists that
    change between draws would otherwise be frozen in a stale state.
    """
    for artist in hidden:
        artist.set_visible(False)
    try:
        canvas.draw()
        return not np.array_equal(np.asarray(canvas.buffer_rgba()), background)
    finally:
        for artist in hidden:
            artist.set_visible(True)


def say_full_redraw(frame: int) -> None:
    """Log once that the decorated background changed at `frame` (0-based)."""
    import logging

    logging.getLogger(__name__).warning(
        "decorate: what it drew changed between frames (seen at frame %d of this "
        "worker), so the saved background cannot be reused; every further frame is "
        "drawn in full (slower). Draw only static artists in the decorate function.",
        frame + 1)


#: Most distinct blends :class:`AggOverlay` tabulates (256 bytes each).
MAX_BLEND_TABLE = 16384


class AggOverlay:
    """Antialiased lines above an opaque field, re-blended onto any field colour as Agg does.

    Agg (matplotlib's ``fixed_blender_rgba_plain``) blends a line of colour ``L`` with
    coverage alpha ``a`` (0-255) onto an opaque pixel of colour ``c`` as
    ``(c * 255 * (256 - a) + L * 256 * a) // (65280 + a)`` per 8-bit channel. Two draws of
    the figure, with the field all black (`f0`) and all white (`f1`), give that blend at
    ``c = 0`` and ``c = 255``; the pair ``(f0, f1)`` identifies ``(a, L)`` (a table over
    all 256 x 256 of them), so the blend onto each frame's colours is computed with Agg's
    own integer arithmetic. Pairs no single blend produces (two lines crossing, a line on a
    spine) fall back to linear interpolation ``f0 + (f1 - f0) * c / 255``.

    Parameters
    ----------
    f0, f1 : numpy.ndarray, shape (n, 3), uint8
        RGB of the n pixels over the field, drawn on a black and on a white field.
    """

    _table: np.ndarray | None = None

    def __init__(self, f0: np.ndarray, f1: np.ndarray) -> None:
        table = self.pair_table()
        f0, f1 = np.asarray(f0, np.int32), np.asarray(f1, np.int32)
        key = table[f0, f1]  # (n, 3): a << 8 | L, or -1
        exact = key >= 0
        a, line = key >> 8, key & 255
        # Both blends are floor((c * mul + add) / div), per pixel and channel; the linear
        # one is f0 + round(df * c / 255). One formula, so a frame costs one pass; a fourth
        # channel (c * 1 + 0) / 1 keeps alpha, so the pass runs over contiguous RGBA.
        n = len(f0)
        self._mul = np.ones((n, 4), np.int32)
        self._add = np.zeros((n, 4), np.int32)
        self._div = np.ones((n, 4), np.int32)
        self._mul[:, :3] = np.where(exact, 255 * (256 - a), f1 - f0)
        self._add[:, :3] = np.where(exact, line * 256 * a, 255 * f0 + 127)
        self._div[:, :3] = np.where(exact, 65280 + a, 255)
        # Few distinct blends (a line's colour and its coverage levels): each one's result
        # for all 256 colours in a table, so a frame's blend is one gather instead of an
        # integer division per channel (0.7 ms -> 0.4 ms for 74 000 pixels). Bounded: a
        # table over MAX_BLEND_TABLE blends at most, else the arithmetic above.
        self._lut = self._base = None
        if n:
            mul, add, div = (x.astype(np.int64) for x in (self._mul, self._add, self._div))
            key = (mul + 256) << 40 | add << 16 | div
            keys, inverse = np.unique(key.ravel(), return_inverse=True)
            if len(keys) <= MAX_BLEND_TABLE:
                k_mul, k_add, k_div = (keys >> 40) - 256, (keys >> 16) & (2**24 - 1), \
                    keys & (2**16 - 1)
                c = np.arange(256, dtype=np.int64)[None, :]
                self._lut = ((c * k_mul[:, None] + k_add[:, None]) // k_div[:, None]
                             ).astype(np.uint8).ravel()
                self._base = (inverse.reshape(n, 4) * 256).astype(np.int32)
                self._mul = self._add = self._div = None  # the table replaces them

    @classmethod
    def pair_table(cls) -> np.ndarray:
        """Return ``(a << 8) | L`` of the blend giving each ``(f0, f1)``: (256, 256), -1: none."""
        if cls._table is None:
            line = np.arange(255, -1, -1, dtype=np.int64)[:, None]
            a = np.arange(256, dtype=np.int64)[None, :]
            f0 = (line * 256 * a) // (65280 + a)
            f1 = (255 * 255 * (256 - a) + line * 256 * a) // (65280 + a)
            table = np.full((256, 256), -1, dtype=np.int32)
            # Where several blends give the same pair, the darkest line (black coastlines)
            # and then the highest alpha win: written last.
            table[f0.ravel(), f1.ravel()] = (a << 8 | line).ravel()
            cls._table = table
        return cls._table

    def blend(self, c: np.ndarray) -> np.ndarray:
        """Pixels of the lines over field colours `c`, RGBA shape (n, 4) uint8 -> (n, 4) uint8.

        Alpha is passed through unchanged.
        """
        if self._lut is not None:
            return self._lut.take(self._base + c)
        out = c.astype(np.int32)
        out *= self._mul
        out += self._add
        out //= self._div
        return out.astype(np.uint8)


class MapPixels:
    """The pixels of one map drawn from its index image: the per-frame gather and blend.

    Shared by :class:`FrameRenderer` and :class:`ncreel.render.panels.PanelRenderer`.
    Built from the map's index image (:func:`cell_index_image`), cut to the box its
    cells cover; :meth:`freeze` then takes the saved background and the two reference
    draws of the lines above the field. Each frame, :meth:`paint` colours the cells on
    screen once (:class:`~ncreel.render.colorlookup.ColorLookup`, one RGBA ``uint32``
    each), gathers the box's pixels from those colours with one ``take`` into a reused
    buffer, re-blends the line pixels (:class:`AggOverlay`) and writes the box into the
    frame: once when every cell is opaque (pixels without a cell from the background),
    else the background and then the opaque pixels.

    Parameters
    ----------
    index : numpy.ndarray, shape (height, width), int
        Flat cell index of each pixel, -1 where none (modified: cut to the box).
    ncells : int
        Cells of the grid.

    Raises
    ------
    ValueError
        If no pixel shows a cell.
    """

    def __init__(self, index: np.ndarray, ncells: int) -> None:
        rows = np.flatnonzero((index >= 0).any(axis=1))
        cols = np.flatnonzero((index >= 0).any(axis=0))
        if rows.size == 0:
            raise ValueError("no grid cell is visible in the map area")
        #: The rows and columns of the frame the cells cover.
        self.box = (slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1))
        self.ncells = int(ncells)
        cells = index[self.box]
        cells[cells < 0] = ncells  # the trailing "cell": transparent, like NaN
        # Only the cells on screen are coloured per frame (a panel of a 0.25 degree grid
        # shows about a quarter of its cells): colour i of the table is cell shown[i].
        # (Marking, not np.unique: no sort of the frame's pixels, one byte per cell.)
        seen = np.zeros(ncells + 1, dtype=bool)
        seen[cells] = True
        shown = np.flatnonzero(seen[:ncells])
        del seen
        n_shown = int(shown.size)
        if n_shown == ncells:  # every cell: the field's values are the table's, no gather
            self.shown = None
            local = cells
        else:
            self.shown = shown
            row = np.full(ncells + 1, n_shown, dtype=np.int32 if n_shown < 2**31 else np.intp)
            row[shown] = np.arange(n_shown)
            local = row[cells]
            del row
        del cells, shown
        #: Colours of the shown cells, then transparent (pixels without a cell).
        self.colours = np.zeros(n_shown + 1, dtype=np.uint32)
        self.none = n_shown
        # Up to 65 535 colours, 16-bit indices (a quarter of the memory); larger tables
        # intp, which ``take`` gathers fastest (other integer indices it first copies).
        self.cells = local.astype(np.uint16 if n_shown < 2**16 else np.intp)
        del local
        self._rgba = np.empty(self.cells.shape, np.uint32)  # reused from frame to frame
        self._opaque = np.empty(self.cells.shape, dtype=bool)
        self._values = None

    @property
    def area(self) -> np.ndarray:
        """Pixels of the box that show a cell, shape of the box, bool."""
        return self.cells < self.none

    def cell_index(self) -> np.ndarray:
        """Flat cell index of each pixel of the box, -1 where none (int64)."""
        flat = self.cells.astype(np.int64)
        if self.shown is not None:
            flat = np.where(flat < self.none, self.shown[np.minimum(flat, self.none - 1)], -1)
        else:
            flat[flat == self.none] = -1
        return flat

    def freeze(self, background: np.ndarray, f0: np.ndarray, f1: np.ndarray) -> None:
        """Take the saved background and the lines above the field.

        Parameters
        ----------
        background : numpy.ndarray, shape (height, width, 4), uint8
            The frame without field, overlays and time label.
        f0, f1 : numpy.ndarray, shape of the box + (3,), uint8
            RGB of the box drawn with the field all black and all white.
        """
        bg = np.ascontiguousarray(background[self.box]).view(np.uint32)[..., 0]
        empty = np.flatnonzero(self.cells == self.none)
        # Pixels of the box without a cell, fixed: with every colour opaque they are the
        # only ones showing the background there.
        self._empty = empty.astype(np.int32) if self.cells.size < 2**31 else empty
        self._empty_bg = bg.reshape(-1)[empty]
        over = ((f0 != 0) | (f1 != 255)).any(-1)
        over &= self.area
        self._over = np.flatnonzero(over)
        self._overlay = AggOverlay(f0.reshape(-1, 3)[self._over], f1.reshape(-1, 3)[self._over])

    def paint(self, buf: np.ndarray, background: np.ndarray, values: np.ndarray,
              lookup) -> None:
        """Write the box of frame `buf` for the field `values`.

        Parameters
        ----------
        buf : numpy.ndarray, shape (height, width, 4), uint8
            The frame; only the box is written.
        background : numpy.ndarray, same shape
            The saved background.
        values : numpy.ndarray, shape (ncells,)
            The field, flat; any dtype :class:`ColorLookup` takes.
        lookup : ncreel.render.colorlookup.ColorLookup
        """
        if self.shown is not None:
            if self._values is None or self._values.dtype != values.dtype:
                self._values = np.empty(self.shown.size, values.dtype)
            values = values.take(self.shown, out=self._values)
        colours = self.colours
        lookup.rgba32(values, out=colours[:-1])
        rgba, cells = self._rgba, self.cells
        if cells.dtype == np.intp:
            np.take(colours, cells, out=rgba, mode="clip")
        else:  # indexing reads 16-bit indices as they are (take would copy them to intp)
            rgba[...] = colours[cells]
        flat = rgba.reshape(-1)
        if self._over.size:
            # Lines over the field, blended onto this frame's colours; a pixel whose cell
            # is transparent keeps its alpha 0 and so shows the background's line.
            c = flat.take(self._over).view(np.uint8).reshape(-1, 4)
            flat.put(self._over, self._overlay.blend(c).view(np.uint32))
        box = buf[self.box].view(np.uint32)[..., 0]
        # Alpha is the high byte of little-endian RGBA.
        if colours[:-1].min(initial=0xFFFFFFFF) >= 0xFF000000:
            # Every cell opaque: the box is the cells' colours but where no cell lies.
            flat.put(self._empty, self._empty_bg)
            np.copyto(box, rgba)
        else:  # transparent cells (NaN) show the background, different in every frame
            opaque = self._opaque
            np.greater_equal(rgba, np.uint32(0xFF000000), out=opaque)
            np.copyto(box, background[self.box].view(np.uint32)[..., 0])
            np.copyto(box, rgba, where=opaque)


def outside_boxes(size: tuple[int, int], boxes) -> list[tuple[slice, slice]]:
    """Rectangles covering a frame of `size` (width, height) but not the disjoint `boxes`.

    Returns
    -------
    list of (slice, slice)
        Row and column slices; the background is copied there each frame.
    """
    w, h = size
    edges = sorted({0, h, *(int(b[0].start) for b in boxes), *(int(b[0].stop) for b in boxes)})
    out = []
    for r0, r1 in zip(edges[:-1], edges[1:], strict=True):
        spans = sorted((int(b[1].start), int(b[1].stop)) for b in boxes
                       if b[0].start <= r0 and r1 <= b[0].stop)
        c = 0
        for c0, c1 in [*spans, (w, w)]:
            if c0 > c:
                out.append((slice(r0, r1), slice(c, c0)))
            c = max(c, c1)
    return out


def cell_interior(index: np.ndarray) -> np.ndarray:
    """Pixels of an index image whose 3 x 3 neighbours all show the same cell.

    Returns
    -------
    numpy.ndarray, same shape, bool
        False on cell edges, on the map's boundary and outside the map.
    """
    p = np.pad(index, 1, mode="edge")
    same = index >= 0
    h, w = index.shape
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            same &= p[dy:dy + h, dx:dx + w] == index
    return same


def frame_difference(a: np.ndarray, b: np.ndarray, *, area: np.ndarray | None = None,
                     tolerance: int = 0) -> dict:
    """How far frame `a` is from frame `b` (e.g. the index path vs a full ``pcolormesh`` draw).

    Parameters
    ----------
    a, b : numpy.ndarray, shape (height, width, 4), uint8
        RGBA frames.
    area : numpy.ndarray, shape (height, width), bool, optional
        Pixels to compare (e.g. :meth:`FrameRenderer.map_area`); all when omitted.
    tolerance : int
        8-bit channel difference counted as "within one colour level" (e.g.
        :meth:`FrameRenderer.level_step`).

    Returns
    -------
    dict
        ``pixels`` compared, ``share_differing`` (fraction with any channel different),
        ``max_difference`` (largest channel difference, 0-255) and ``share_beyond``
        (fraction differing by more than `tolerance`).
    """
    d = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=-1)
    if area is not None:
        d = d[area]
    n = max(d.size, 1)
    return {"pixels": int(d.size), "share_differing": np.count_nonzero(d) / n,
            "max_difference": int(d.max()) if d.size else 0,
            "share_beyond": np.count_nonzero(d > tolerance) / n}


def set_labels(ax, *, xlabel: str, ylabel: str, projection=None) -> None:
    """Put the axis labels on `ax` (only without a map projection).

    Text from the file is drawn literally: a '$' in a name is not mathtext.
    """
    if projection is None:
        ax.set_xlabel(xlabel, parse_math=False)
        ax.set_ylabel(ylabel, parse_math=False)


def map_axes(fig, projection, rect=None, *, subplot=()):
    """Axes of `fig` for `projection`: a cartopy ``GeoAxes``, or plain axes.

    A :class:`ncreel.render.maps.PlainPlateCarree` map gets plain axes drawn as cartopy draws a
    PlateCarree ``GeoAxes``: equal aspect, no ticks, a frame around the map.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    projection : cartopy.crs.Projection, ncreel.render.maps.PlainPlateCarree or None
    rect : tuple of 4 float, optional
        Position (left, bottom, width, height) in figure coordinates; a subplot if omitted.
    subplot : tuple of int
        ``(rows, columns, index)`` of the subplot (one filling the figure when empty).
    """
    from ncreel.render.maps import PlainPlateCarree

    plain = isinstance(projection, PlainPlateCarree)
    kw = {} if plain else {"projection": projection}
    ax = fig.add_subplot(*subplot, **kw) if rect is None else fig.add_axes(rect, **kw)
    if plain:
        ax.set_aspect("equal", adjustable="box")
        ax.xaxis.set_visible(False)
        ax.yaxis.set_visible(False)
    return ax


def add_mesh(ax, x, y, data, *, cmap, norm, projection=None, edges=None):
    """``pcolormesh`` of `data` on `ax`: the one call both the frames and the index image use.

    Not antialiased (``pcolormesh``'s default), so each pixel belongs to exactly one cell.
    On a map (`projection` given) the coordinates are longitudes / latitudes: the cell
    corners are computed here (:func:`geo_mesh`) and the quadrilaterals drawn by
    matplotlib's ``pcolormesh`` (with the PlateCarree transform on a cartopy ``GeoAxes``),
    so no cell needs cartopy's slow per-polygon wrapping (minutes for a 0.25 degree grid
    in Robinson).

    `edges`, when given, are the 1-D cell edges of 1-D `x`, `y` (see
    :class:`FrameRenderer`).

    Returns
    -------
    mesh : matplotlib.collections.QuadMesh
    to_mesh : callable
        Maps a field of shape (ny, nx) to the mesh's array (masked where no cell is drawn).
    """
    kw = {"cmap": cmap, "norm": norm, "antialiased": False, "rasterized": True}
    if projection is None:
        if edges is not None:
            return (ax.pcolormesh(edges[0], edges[1], data, shading="flat", **kw),
                    np.ma.masked_invalid)
        if 1 in np.shape(data):
            # One row or column: shading="auto" would give it zero height (no spacing to
            # guess from), so its edges are half a unit either side (see _edges).
            x, y = np.asarray(x), np.asarray(y)
            if x.ndim == 2:
                x, y = _edges(_edges(x, 0), 1), _edges(_edges(y, 0), 1)
            else:
                x, y = _edges(x, 0), _edges(y, 0)
            return (ax.pcolormesh(x, y, data, shading="flat", **kw),
                    np.ma.masked_invalid)
        return ax.pcolormesh(x, y, data, shading="auto", **kw), np.ma.masked_invalid
    from matplotlib.axes import Axes

    ny, nx = np.shape(data)
    corners = np.ndim(x) == 2 and np.shape(x) == (ny + 1, nx + 1)
    xc, yc, cols, hidden = geo_mesh(projection, x, y, corners=corners, edges=edges)

    def to_mesh(field):
        field = np.asarray(field)
        out = np.ma.masked_invalid(field.take(np.maximum(cols, 0), axis=1))
        out[hidden] = np.ma.masked
        return out

    if hasattr(ax, "projection"):
        import cartopy.crs as ccrs

        kw["transform"] = ccrs.PlateCarree()
    else:  # PlainPlateCarree on plain axes: the map's x, y are computed here
        xc = projection.map_x(xc)  # y is the latitude
    mesh = Axes.pcolormesh(ax, xc, yc, to_mesh(data), shading="flat", **kw)
    return mesh, to_mesh


def _edges(c: np.ndarray, axis: int) -> np.ndarray:
    # Cell edges halfway between centres, the outer ones extrapolated by half a cell (as
    # pcolormesh's shading="nearest").
    c = np.moveaxis(np.asarray(c, float), axis, 0)
    if c.shape[0] == 1:
        mid = [c[0] - 0.5, c[0] + 0.5]
        return np.moveaxis(np.stack(mid), 0, axis)
    mid = (c[1:] + c[:-1]) / 2
    out = np.concatenate([c[:1] - (mid[:1] - c[:1]), mid, c[-1:] + (c[-1:] - mid[-1:])])
    return np.moveaxis(out, 0, axis)


def geo_mesh(projection, lon, lat, *, corners: bool = False, edges=None):
    """Cell corners of a longitude/latitude grid laid out for `projection`'s map.

    Parameters
    ----------
    projection : cartopy.crs.Projection or ncreel.render.maps.PlainPlateCarree
    lon, lat : numpy.ndarray
        Cell centres in degrees: 1-D (nx,) and (ny,), or 2-D (ny, nx); with `corners`,
        the cells' exact corners, 2-D (ny + 1, nx + 1) (NaN: outside the grid's
        projection, such cells are hidden).
    corners : bool
        `lon`, `lat` are corners, used as they are.
    edges : (numpy.ndarray, numpy.ndarray), optional
        Cell edges (degrees) of 1-D `lon`, `lat`, shapes (nx + 1,), (ny + 1,); else
        midpoints between centres.

    Returns
    -------
    lon_corners, lat_corners : numpy.ndarray
        1-D (m+1,), (ny+1,) or 2-D (ny+1, m+1) corners; latitudes clipped to +-90.
    cols : numpy.ndarray of int, shape (m,)
        Grid column each mesh column shows; -1 for a gap. For a 1-D longitude axis the
        column the map's edge (central longitude + 180) cuts is split into two mesh columns
        at either edge, and the columns beyond it are moved by -360 degrees.
    hidden : numpy.ndarray of bool, shape (ny, m)
        Cells not drawn: a corner outside the projection's domain, or a cell spanning
        more than half the map's width (it would be drawn across the map).
    """
    lon, lat = np.asarray(lon, float), np.asarray(lat, float)
    if corners:
        xe, ye = lon, np.clip(lat, -90, 90)
        cols = np.arange(lon.shape[1] - 1)
    elif lon.ndim == 1 and lat.ndim == 1:
        xe, ye = (np.asarray(e, float) for e in edges) if edges is not None else (
            _edges(lon, 0), _edges(lat, 0))
        ye = np.clip(ye, -90, 90)
        xe, cols = _split_at_map_edge(xe, projection)
    else:
        lon2, lat2 = np.broadcast_arrays(*(np.meshgrid(lon, lat) if lon.ndim == 1
                                           else (lon, lat)))
        xe = _edges(_edges(lon2, 1), 0)
        ye = np.clip(_edges(_edges(lat2, 1), 0), -90, 90)
        cols = np.arange(lon2.shape[1])
    gx, gy = np.broadcast_arrays(xe[None, :] if xe.ndim == 1 else xe,
                                 ye[:, None] if ye.ndim == 1 else ye)
    from ncreel.render.maps import PlainPlateCarree

    if isinstance(projection, PlainPlateCarree):
        px = projection.map_x(gx)  # y is the latitude, finite
        bad = ~np.isfinite(px)
    else:
        import cartopy.crs as ccrs

        pts = projection.transform_points(ccrs.PlateCarree(), gx, gy)
        px = np.ascontiguousarray(pts[..., 0])
        bad = ~(np.isfinite(px) & np.isfinite(pts[..., 1]))
        del pts
    corner_bad = bad[1:, 1:] | bad[:-1, :-1] | bad[1:, :-1] | bad[:-1, 1:]
    width = abs(projection.x_limits[1] - projection.x_limits[0])
    # Pairwise, not reduce over a list (which stacks four corner arrays: 4x the memory).
    a, b, c, d = px[1:, 1:], px[:-1, :-1], px[1:, :-1], px[:-1, 1:]
    with np.errstate(invalid="ignore"):
        span = np.maximum(np.maximum(a, b), np.maximum(c, d))
        span -= np.minimum(np.minimum(a, b), np.minimum(c, d))
        hidden = corner_bad | (span > width / 2) | (cols < 0)[None, :]
    if corners and not (np.isfinite(xe).all() and np.isfinite(ye).all()):
        # pcolormesh refuses non-finite corners; the cells they touch are hidden above.
        xe, ye = np.nan_to_num(xe, nan=0.0), np.nan_to_num(ye, nan=0.0)
    return xe, ye, cols, hidden


#: Degrees by which cell edges on the map's edge meridian are moved inwards: exactly on
#: it, a projection may put the right edge at the left (PROJ's longitude wrap of
#: lon_0 + 180 with a non-zero lon_0), and the whole edge column was hidden as a cell
#: spanning the map. Far below a pixel (7680 pixels across 360 degrees: 0.05 each).
EDGE_INSET_DEG = 1e-6


def _split_at_map_edge(edges: np.ndarray, projection) -> tuple[np.ndarray, np.ndarray]:
    e, cols = _split_at_edge_meridian(edges, projection)
    if e.size and e[-1] - e[0] <= 360.0 + 1e-9:
        edge = float(projection.proj4_params.get("lon_0", 0.0)) + 180.0
        e = np.clip(e, edge - 360.0 + EDGE_INSET_DEG, edge - EDGE_INSET_DEG)
    return e, cols


def _split_at_edge_meridian(edges: np.ndarray, projection) -> tuple[np.ndarray, np.ndarray]:
    nx = edges.size - 1
    cols = np.arange(nx)
    if edges[0] > edges[-1]:  # decreasing longitudes: lay out increasing, same cells
        e, c = _split_at_edge_meridian(edges[::-1], projection)
        return e, np.where(c >= 0, nx - 1 - c, -1)
    central = float(projection.proj4_params.get("lon_0", 0.0))
    edge = central + 180.0
    e = edges - np.floor((edges[0] - (edge - 360.0)) / 360.0) * 360.0
    if e[-1] <= edge or e[-1] - 360.0 > e[0] + 1e-9:
        return e, cols  # nothing beyond the map's edge, or more than 360 degrees
    m = int(np.searchsorted(e, edge, side="left"))  # first edge at or beyond the map's edge
    if np.isclose(e[m], edge):
        left_e, left_c = e[m:] - 360.0, cols[m:]
        right_e, right_c = e[:m + 1], cols[:m]
        right_e[-1] = edge
    else:
        left_e = np.concatenate([[edge - 360.0], e[m:] - 360.0])
        left_c = cols[m - 1:]
        right_e = np.concatenate([e[:m], [edge]])
        right_c = cols[:m]
    if left_e[-1] < right_e[0] - 1e-9:
        return (np.concatenate([left_e, right_e]),
                np.concatenate([left_c, [-1], right_c]))
    return np.concatenate([left_e[:-1], right_e]), np.concatenate([left_c, right_c])


def _set_mesh_constant(mesh, colour: str) -> None:
    # One colour for every cell drawn (hidden cells stay masked).
    mesh.set_cmap(ListedColormap([colour]))
    a = mesh.get_array()
    mesh.set_array(np.ma.array(np.zeros(a.shape), mask=np.ma.getmaskarray(a)))


class _IndexColormap(Colormap):
    """Colour ``(i + 1)`` as 24-bit RGB (R the low byte) for cell ``i``; masked: transparent."""

    def __init__(self, n: int) -> None:
        super().__init__("ncreel-cell-index", N=max(int(n), 1))

    def __call__(self, X, alpha=None, bytes=False):  # noqa: A002 (matplotlib's signature)
        code = np.ma.getdata(X).astype(np.int64) + 1
        rgba = np.empty((*code.shape, 4))
        for k, shift in enumerate((0, 8, 16)):
            rgba[..., k] = (code >> shift) & 255
        rgba[..., :3] /= 255.0
        rgba[..., 3] = 1.0
        rgba[np.ma.getmaskarray(X)] = 0.0
        return (rgba * 255).round().astype(np.uint8) if bytes else rgba


def cell_index_image(ax, x, y, shape: tuple[int, int], size: tuple[int, int],
                     dpi: float, *, projection=None, edges=None) -> np.ndarray:
    """Which grid cell each pixel of `ax`'s figure shows, rasterised by matplotlib itself.

    A figure of the same size holds axes at `ax`'s position, with its projection and view
    limits, and draws the grid with :func:`add_mesh` (no antialiasing), each cell in a
    colour encoding its flat index. Geometry, cell edges, projections, wrapped cells and
    cells outside the view are therefore exactly what ``pcolormesh`` draws.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The frame's axes, after its layout is fixed.
    x, y : numpy.ndarray
        Cell-centre coordinates as given to ``pcolormesh`` (1-D or 2-D ``(ny, nx)``).
    shape : (int, int)
        Grid shape ``(ny, nx)``.
    size : (int, int)
        Figure size ``(width, height)`` in pixels.
    dpi : float
        Dots per inch of the figure.
    projection : cartopy.crs.Projection or ncreel.render.maps.PlainPlateCarree, optional
        `ax`'s map projection (None: plain axes in grid coordinates).
    edges : (numpy.ndarray, numpy.ndarray), optional
        Cell edges of 1-D `x`, `y` (see :class:`FrameRenderer`).

    Returns
    -------
    numpy.ndarray, shape (height, width), int32
        Flat cell index ``j * nx + i`` of each pixel (row 0 at the top), -1 where no cell
        is drawn (pixels partly covered, at a clipped map boundary, included).
    """
    ny, nx = shape
    w, h = size
    fig = Figure(figsize=(w / dpi, h / dpi), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    fig.patch.set_visible(False)
    ax2 = map_axes(fig, projection, ax.get_position(original=False).bounds)
    ax2.set_axis_off()
    ax2.set_aspect("auto")
    cells = np.arange(ny * nx, dtype=np.int64).reshape(ny, nx)
    add_mesh(ax2, x, y, cells, cmap=_IndexColormap(ny * nx), norm=NoNorm(),
             projection=projection, edges=edges)
    del cells
    ax2.set_xlim(ax.get_xlim())
    ax2.set_ylim(ax.get_ylim())
    canvas.draw()
    # R, G, B, A bytes as one little-endian uint32: A << 24 | B << 16 | G << 8 | R, and
    # B << 16 | G << 8 | R is the code. In place: this image is as large as the frame.
    index = np.asarray(canvas.buffer_rgba()).view("<u4")[..., 0].astype(np.int32)
    fig.clear()
    del canvas, fig
    # Where the axes' clip path (a projection's curved boundary) covers a pixel partly,
    # Agg blends onto the transparent figure keeping the colour exact, with alpha < 255.
    empty = (index >= 0) & (index < 0x01000000)  # alpha 0 (int32: alpha >= 128 is < 0)
    index &= 0xFFFFFF
    index -= 1
    index[empty] = -1
    return index


def write_png(rgba: np.ndarray, path: str | os.PathLike, *, compress_level: int = 6,
              description: str | None = None) -> None:
    """Write an RGBA frame, shape (height, width, 4) uint8, as a PNG file (Pillow).

    `description`, when given, is stored as the PNG's ``Description`` text (an iTXt chunk,
    UTF-8): a frame's time label, which the contact sheet reads back.
    """
    from PIL import Image, PngImagePlugin

    info = None
    if description is not None:
        info = PngImagePlugin.PngInfo()
        info.add_itxt("Description", description)
    Image.fromarray(rgba, mode="RGBA").save(path, format="png", compress_level=compress_level,
                                            pnginfo=info)
