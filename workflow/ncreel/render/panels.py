"""Several fields side by side in one frame, each drawn through its own index image.

A layout of panels (two models and their difference, several variables of one file) is one
figure with one map axes and one colour bar per panel, laid out once. As for a single
field (:mod:`ncreel.render.frame`), each panel's cells are rasterised once by matplotlib
into an index image; everything but the fields and the time label (titles, colour bars,
coastlines of every panel) is drawn once into a frozen background, and the pixels where
lines lie above a field are re-blended per frame with Agg's arithmetic
(:class:`ncreel.render.frame.AggOverlay`). A frame's cost is therefore the sum of the
panels' gathers, not a redraw: the figure is never drawn again, only the time label.
"""

from __future__ import annotations

import gc
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ncreel.render.colorlookup import ColorLookup
from ncreel.render.frame import (
    MAX_INDEX_CELLS,
    MapPixels,
    _set_mesh_constant,
    add_mesh,
    background_changed,
    cell_index_image,
    cell_interior,
    map_axes,
    outside_boxes,
    say_full_redraw,
    write_png,
)
from ncreel.render.frametext import add_caption, align_header, fit_header, style_colorbar

#: Most panels one frame holds (a 4 x 4 grid); more cannot be read at movie sizes.
MAX_PANELS = 16


@dataclass
class Panel:
    """One panel of a layout: its grid, coordinates, colours and title.

    Attributes
    ----------
    shape : (int, int)
        Grid shape ``(ny, nx)``.
    x, y : numpy.ndarray or None
        Cell-centre coordinates, 1-D (nx,) / (ny,) or 2-D (ny, nx); longitudes and
        latitudes in degrees when `projection` is given; grid indices when None.
    cmap : str
        Matplotlib colormap name.
    vmin, vmax : float
        Colour limits in the panel's units, fixed for the whole movie.
    title : str
        Drawn above the panel's map, literally (no mathtext).
    units : str
        The colour bar's label.
    projection : cartopy.crs.Projection or ncreel.render.maps.PlainPlateCarree, optional
    features : sequence of ncreel.render.maps.MapLines
        Coastlines and borders, drawn above the field.
    extend : str
        The colour bar's arrows (``neither``, ``min``, ``max``, ``both``).
    overlays : sequence of ncreel.render.overlays.ContourOverlay or VectorOverlay
        Drawn per frame above the field (needs `projection` and cell-centre `x`, `y`);
        :meth:`PanelRenderer.draw` takes their fields.
    """

    shape: tuple[int, int]
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    cmap: str = "viridis"
    vmin: float = 0.0
    vmax: float = 1.0
    title: str = ""
    units: str = ""
    projection: object = None
    features: Sequence = field(default_factory=tuple)
    extend: str = "neither"
    overlays: Sequence = field(default_factory=tuple)


#: Width / height assumed of a panel's map when the grid is chosen (a global latitude /
#: longitude map), and the share of a panel's height left to the map (the rest: its title
#: and colour bar).
PANEL_MAP_ASPECT = 2.0
PANEL_MAP_SHARE = 0.7


def grid_size(n: int, columns: int | None = None,
              size: tuple[int, int] | None = None) -> tuple[int, int]:
    """Rows and columns of a layout of `n` panels.

    Parameters
    ----------
    n : int
        Number of panels (at least 1).
    columns : int, optional
        Columns asked for. None: the grid in which each map is largest in a frame of
        `size`, taking maps as :data:`PANEL_MAP_ASPECT` times as wide as tall over
        :data:`PANEL_MAP_SHARE` of a panel's height (at 16:9, 1 x 2 for two panels, 2 x 2
        for three or four, 2 x 3 for five or six; on a frame three times as wide as tall,
        one row of three); the squarest grid, ``ceil(sqrt(n))`` columns, on a tie or
        without `size`.
    size : (int, int), optional
        Frame width and height in pixels.

    Returns
    -------
    (int, int)
        ``(rows, columns)`` with ``rows * columns >= n``.
    """
    n = max(1, int(n))
    if columns:
        cols = max(1, min(int(columns), n))
        return -(-n // cols), cols
    cols = math.ceil(math.sqrt(n))
    if size is not None:
        def map_width(c: int) -> float:
            rows = -(-n // c)
            return min(size[0] / c, size[1] / rows * PANEL_MAP_SHARE * PANEL_MAP_ASPECT)

        # Largest maps first; among equal ones the squarest grid (the default before).
        cols = max(range(1, n + 1),
                   key=lambda c: (round(map_width(c), 6), -abs(c - cols)))
    return -(-n // cols), cols


class PanelRenderer:
    """A figure of fixed pixel size showing one field per panel, in a grid, per frame.

    Parameters
    ----------
    panels : sequence of Panel
        The panels, in reading order (left to right, then down).
    width, height : int
        Frame size in pixels.
    dpi : float
        Dots per inch.
    columns : int, optional
        Columns of the grid (:func:`grid_size`).
    title : str
        Title above all panels (may be empty: the time label alone).
    time_labels : sequence of str
        Every label the frames will show (the header keeps room for the widest).
    blit : bool
        Draw each frame from the index images onto the frozen background (default);
        ``False`` redraws the whole figure with ``pcolormesh`` every frame, the reference
        the fast path is checked against.
    caption : str
        One line at the bottom of the frame, drawn once.
    decorate : callable, optional
        ``decorate(fig, ax, i)``, called once per panel `i` with its axes after the layout
        is fixed and before the background is saved (config ``decorate``). What it adds
        must not change between draws: as in
        :class:`~ncreel.render.frame.FrameRenderer`, the saved background is compared with
        a fresh draw on frames 1, 2, 3, 5, 9, ... and from the first difference on every
        frame is drawn in full, with one warning (:attr:`full_redraw` is then True).

    Raises
    ------
    ValueError
        If there are no panels or more than :data:`MAX_PANELS`, a colormap is unknown, a
        grid has more than :data:`~ncreel.render.frame.MAX_INDEX_CELLS` cells, or no cell
        of a panel is visible.
    """

    def __init__(self, panels: Sequence[Panel], *, width: int, height: int, dpi: float,
                 columns: int | None = None, title: str = "",
                 time_labels: Sequence[str] = (), blit: bool = True,
                 caption: str = "", decorate=None) -> None:
        panels = list(panels)
        if not 1 <= len(panels) <= MAX_PANELS:
            raise ValueError(f"{len(panels)} panels: between 1 and {MAX_PANELS} fit a frame")
        if width < 16 or height < 16:
            raise ValueError(f"frame size {width}x{height}: need at least 16x16 pixels")
        for p in panels:
            if p.cmap not in matplotlib.colormaps:
                raise ValueError(f"cmap '{p.cmap}' is not a matplotlib colormap")
            if p.shape[0] * p.shape[1] > MAX_INDEX_CELLS:
                raise ValueError(f"grid {p.shape[0]}x{p.shape[1]}: at most {MAX_INDEX_CELLS} "
                                 "cells can be drawn")
        self.panels = panels
        self.width, self.height, self.dpi = int(width), int(height), float(dpi)
        self.blit = bool(blit)
        self.rows, self.columns = grid_size(len(panels), columns, (width, height))
        self.fig = Figure(figsize=(self.width / self.dpi, self.height / self.dpi),
                          dpi=self.dpi, layout="constrained")
        self.canvas = FigureCanvasAgg(self.fig)
        self.axes, self.meshes, self._to_mesh, self._xy = [], [], [], []
        self.norms = []
        for i, p in enumerate(panels):
            ax = map_axes(self.fig, p.projection, subplot=(self.rows, self.columns, i + 1))
            ny, nx = p.shape
            x = np.arange(nx) if p.x is None else np.asarray(p.x)
            y = np.arange(ny) if p.y is None else np.asarray(p.y)
            norm = Normalize(vmin=p.vmin, vmax=p.vmax)
            mesh, to_mesh = add_mesh(ax, x, y, np.zeros(p.shape),
                                     cmap=matplotlib.colormaps[p.cmap], norm=norm,
                                     projection=p.projection)
            for feature in p.features:
                feature.add_to(ax, p.projection)
            for overlay in p.overlays:  # traced at most at the panel's own pixel size
                overlay.attach(ax, x, y, p.shape, p.projection,
                               (self.width // self.columns, self.height // self.rows))
            place = _colorbar_place(ax, self.width / self.columns, self.height / self.rows)
            cbar = self.fig.colorbar(mesh, ax=ax, extend=p.extend, **place)
            if place["location"] == "bottom":  # labels side by side: fewer, so none touch
                cbar.locator = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10])
            style_colorbar(cbar, p.vmin, p.vmax, p.units)
            if p.title:
                ax.set_title(p.title, parse_math=False, fontsize="medium")
            self.axes.append(ax)
            self.meshes.append(mesh)
            self._to_mesh.append(to_mesh)
            self._xy.append((x, y))
            self.norms.append(norm)
        renderer = self.canvas.get_renderer()
        header = fit_header(self.fig, renderer, title, time_labels)
        self.title, self.label = header.title, header.label
        foot = add_caption(self.fig, renderer, caption)
        self.fig.get_layout_engine().set(rect=(0.0, foot, 1.0, header.bottom - foot))
        pad = self.fig.get_layout_engine().get()["h_pad"] * self.dpi  # pixels
        self.canvas.draw()
        # Layout and views fixed after one draw: frames never shift, index images stay valid.
        self.fig.set_layout_engine("none")
        if close_gap_below(self.fig, self.canvas.get_renderer(), header.bottom, pad):
            self.canvas.draw()
        align_header(header, self.fig, self.canvas.get_renderer())
        for ax in self.axes:
            ax.set_xlim(ax.get_xlim())
            ax.set_ylim(ax.get_ylim())
        #: The figure is decorated by user code, whose artists are checked to stay as saved.
        self.decorated = decorate is not None
        #: Frames drawn in full since the decorated background was seen to change.
        self.full_redraw = False
        self._frames = 0
        if decorate is not None:  # on the fixed layout, before anything is saved
            for i, ax in enumerate(self.axes):
                decorate(self.fig, ax, i)
        self._lookups = [ColorLookup(m.get_cmap(), n) for m, n in zip(self.meshes, self.norms,
                                                                      strict=True)]
        if self.blit:
            self._prepare_index_path()

    def _prepare_index_path(self) -> None:
        # Per panel: its index image cut to its box (MapPixels, as a single map's), the
        # colour table of the cells it shows and the pixels where lines lie above its
        # field. One index image (frame-sized) exists at a time.
        size = (self.width, self.height)
        self._pixels = []
        for p, ax, (x, y) in zip(self.panels, self.axes, self._xy, strict=True):
            index = cell_index_image(ax, x, y, p.shape, size, self.dpi,
                                     projection=p.projection)
            gc.collect()  # the index figure's canvas and mesh sit in reference cycles
            try:
                self._pixels.append(MapPixels(index, p.shape[0] * p.shape[1]))
            except ValueError:
                raise ValueError(f"panel '{p.title}': no grid cell is visible in its map "
                                 "area") from None
            del index
        self._box = [px.box for px in self._pixels]
        self._around = outside_boxes(size, self._box)
        self.label.set_visible(False)
        for mesh in self.meshes:
            mesh.set_visible(False)
        for artist in self._overlay_artists():  # drawn per frame, never in the background
            artist.set_visible(False)
        self.canvas.draw()
        self._background = np.array(self.canvas.buffer_rgba())
        # Lines above the fields (coastlines, spines): every field all black, then all white.
        f0s, f1s = [], []
        for colour, keep in (("black", f0s), ("white", f1s)):
            for mesh in self.meshes:
                mesh.set_visible(True)
                _set_mesh_constant(mesh, colour)
            self.canvas.draw()
            buf = np.asarray(self.canvas.buffer_rgba())
            keep.extend(np.array(buf[box][..., :3]) for box in self._box)
        for mesh, p in zip(self.meshes, self.panels, strict=True):
            if self.decorated:  # kept hidden for a full redraw, should the check ask
                mesh.set_cmap(matplotlib.colormaps[p.cmap])
                mesh.set_visible(False)
            else:
                mesh.remove()  # never drawn again; the colour bars keep norms and cmaps
        self.label.set_visible(True)
        for artist in self._overlay_artists():
            artist.set_visible(True)
        for pixels, f0, f1 in zip(self._pixels, f0s, f1s, strict=True):
            pixels.freeze(self._background, f0, f1)
        del f0s, f1s

    def _overlay_artists(self) -> list:
        return [o.artist for p in self.panels for o in p.overlays]

    def draw(self, fields: Sequence[np.ndarray], label: str, overlay_fields: Sequence = ()
             ) -> np.ndarray:
        """Draw one field per panel with time label `label`; return the frame's pixels.

        Parameters
        ----------
        fields : sequence of numpy.ndarray
            One per panel, each of that panel's shape ``(ny, nx)``, in its units; NaN
            cells are transparent.
        label : str
            The time shown in the header.
        overlay_fields : sequence of sequence of tuple of numpy.ndarray
            Per panel, for each of its overlays the arrays its ``update`` takes (contours:
            the field; vectors: u and v), each of the panel's shape; may be empty when no
            panel has overlays.

        Returns
        -------
        numpy.ndarray, shape (height, width, 4), uint8
            RGBA pixels, a view of the canvas buffer valid until the next call.

        Raises
        ------
        ValueError
            If the number of fields or a field's shape does not match the panels, or the
            overlay fields do not match the panels' overlays.
        """
        if len(fields) != len(self.panels):
            raise ValueError(f"{len(self.panels)} panels, {len(fields)} fields")
        fields = [np.asarray(f) for f in fields]
        for i, (p, f) in enumerate(zip(self.panels, fields, strict=True)):
            if f.shape != tuple(p.shape):
                raise ValueError(f"panel {i}: field shape {f.shape} != grid shape {p.shape}")
        self.label.set_text(label)
        if not overlay_fields and not self._overlay_artists():
            overlay_fields = [()] * len(self.panels)
        if len(overlay_fields) != len(self.panels) or any(
                len(o) != len(p.overlays) for o, p in zip(overlay_fields, self.panels,
                                                          strict=True)):
            raise ValueError("overlay fields do not match the panels' overlays")
        for p, arrays in zip(self.panels, overlay_fields, strict=True):
            for overlay, group in zip(p.overlays, arrays, strict=True):
                overlay.update(*group)
        if self.blit and self.decorated and not self.full_redraw:
            n, self._frames = self._frames, self._frames + 1
            if n & (n - 1) == 0 and self._background_changed():  # frames 0, 1, 2, 4, 8...
                self._redraw_in_full(n)
        if not self.blit or self.full_redraw:
            for mesh, to_mesh, f in zip(self.meshes, self._to_mesh, fields, strict=True):
                mesh.set_array(to_mesh(f))
            self.canvas.draw()
            return np.asarray(self.canvas.buffer_rgba())
        buf = np.asarray(self.canvas.buffer_rgba())
        for around in self._around:  # the boxes are written by MapPixels.paint
            buf[around] = self._background[around]
        for pixels, lookup, f in zip(self._pixels, self._lookups, fields, strict=True):
            pixels.paint(buf, self._background, f.ravel(), lookup)
        renderer = self.canvas.get_renderer()
        for artist in self._overlay_artists():  # Agg lines onto the frame, as a full draw
            artist.draw(renderer)
        self.label.draw(renderer)
        return buf

    def _background_changed(self) -> bool:
        return background_changed(self.canvas, self._background,
                                  [self.label, *self._overlay_artists()])

    def _redraw_in_full(self, frame: int) -> None:
        self.full_redraw = True
        for mesh in self.meshes:
            mesh.set_visible(True)
        say_full_redraw(frame)

    def save_png(self, path: str | os.PathLike, *, compress_level: int = 6,
                 description: str | None = None) -> None:
        """Write the frame last drawn as a PNG of exactly width x height.

        As :meth:`ncreel.render.frame.FrameRenderer.save_png`.
        """
        write_png(np.asarray(self.canvas.buffer_rgba()), path, compress_level=compress_level,
                  description=description)

    def map_area(self) -> np.ndarray:
        """Pixels that show a grid cell of any panel, shape (height, width) bool."""
        area = np.zeros((self.height, self.width), dtype=bool)
        for pixels in self._pixels:
            area[pixels.box] |= pixels.area
        return area

    def interior(self) -> np.ndarray:
        """Map pixels away from cell edges and map boundaries, any panel (bool, (h, w))."""
        area = np.zeros((self.height, self.width), dtype=bool)
        for p, ax, (x, y) in zip(self.panels, self.axes, self._xy, strict=True):
            area |= cell_interior(cell_index_image(ax, x, y, p.shape,
                                                   (self.width, self.height), self.dpi,
                                                   projection=p.projection))
        return area

    def level_step(self) -> int:
        """Largest 8-bit channel step between neighbouring colours of any panel's colormap."""
        steps = [0]
        for lookup in self._lookups:
            rgba = lookup.lut32[:lookup.n].view(np.uint8).reshape(-1, 4).astype(int)
            if len(rgba) > 1:
                steps.append(int(np.abs(np.diff(rgba, axis=0)).max()))
        return max(steps)

    def close(self) -> None:
        """Release the figure."""
        self.fig.clear()


def close_gap_below(fig, renderer, top: float, pad: float) -> bool:
    """Move every axes of `fig` up until the highest (with its title) is `pad` below `top`.

    Maps of a fixed aspect narrower than their grid cell leave height spare, which the
    constrained layout put above the panel titles (80 pixels of a 1280 x 400 frame of
    three maps side by side); it goes below the colour bars instead, above the caption.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Laid out, its layout engine switched off.
    renderer : matplotlib.backend_bases.RendererBase
    top : float
        The header's bottom, figure fraction.
    pad : float
        Pixels to keep between it and the highest axes' title.

    Returns
    -------
    bool
        Whether anything moved (the figure must then be drawn again).
    """
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
    highest = max((b.y1 for b in boxes if b is not None), default=None)
    if highest is None:
        return False
    gap = top * fig.bbox.height - pad - highest  # pixels
    if gap < 1.0:
        return False
    dy = gap / fig.bbox.height
    for ax in fig.axes:
        x0, y0, w, h = ax.get_position(original=True).bounds
        ax.set_position((x0, y0 + dy, w, h))
    return True


def _colorbar_place(ax, cell_w: float, cell_h: float) -> dict:
    # A map wider than its cell allows fills the cell's width and leaves height spare: its
    # colour bar goes below it, the map's width; else beside it, as for a single field.
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    aspect = abs(x1 - x0) / max(abs(y1 - y0), 1e-12) if ax.get_aspect() != "auto" else 0.0
    if aspect and cell_w / cell_h < 1.15 * aspect:
        return {"location": "bottom", "shrink": 0.8, "pad": 0.03, "aspect": 30}
    return {"location": "right", "shrink": 0.9, "pad": 0.02}
