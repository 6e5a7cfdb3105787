"""Render frames with one reused matplotlib figure per worker, blitting the static parts.

Creating a figure per frame leaks memory in long loops and costs most of the time; here the
figure, axes, mesh and colour bar are built once. The layout is frozen after the first
draw, everything that never changes (axes, ticks, colour bar, title) is drawn once into a
saved background, and each frame only restores that background and redraws the mesh, the
spines on top of it and the time label. :meth:`FrameRenderer.draw` returns the canvas's
RGBA pixels, which are exactly what ``savefig(format="png")`` would encode; the caller pipes
them to an encoder or writes a PNG (:meth:`FrameRenderer.save_png`) for frames a person
should be able to open.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # no display on compute nodes; set before any pyplot import elsewhere

import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


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
        curvilinear grids. Grid indices when omitted.
    title : str
        Figure title (variable name and units).
    xlabel, ylabel : str
        Axis labels.
    blit : bool
        Redraw only the mesh, spines and label per frame on top of a saved background
        (default). ``False`` redraws the whole figure each frame; the pixels are the same.

    Raises
    ------
    ValueError
        If `cmap` is not a known colormap or the size is below 16 x 16 pixels.
    """

    def __init__(self, *, shape: tuple[int, int], width: int, height: int, dpi: float,
                 cmap: str, vmin: float, vmax: float, x=None, y=None, title: str = "",
                 xlabel: str = "", ylabel: str = "", blit: bool = True) -> None:
        if width < 16 or height < 16:
            raise ValueError(f"frame size {width}x{height}: need at least 16x16 pixels")
        if cmap not in matplotlib.colormaps:
            raise ValueError(f"cmap '{cmap}' is not a matplotlib colormap")
        ny, nx = shape
        self.shape = (int(ny), int(nx))
        self.width, self.height, self.dpi = int(width), int(height), float(dpi)
        self.blit = bool(blit)
        # Constrained layout from the start, so the colour bar is placed next to the map
        # (added after the colour bar, it leaves a wide gap between them).
        self.fig = Figure(figsize=(self.width / self.dpi, self.height / self.dpi), dpi=self.dpi,
                          layout="constrained")
        self.canvas = FigureCanvasAgg(self.fig)
        ax = self.ax = self.fig.add_subplot()
        x = np.arange(nx) if x is None else np.asarray(x)
        y = np.arange(ny) if y is None else np.asarray(y)
        self.mesh = ax.pcolormesh(x, y, np.zeros((ny, nx)), cmap=cmap, vmin=vmin, vmax=vmax,
                                  shading="auto", rasterized=True)
        self.fig.colorbar(self.mesh, ax=ax, shrink=0.9, pad=0.02)
        # Text from the file is drawn literally: a '$' in a long_name is not mathtext.
        ax.set_title(title, parse_math=False)
        ax.set_xlabel(xlabel, parse_math=False)
        ax.set_ylabel(ylabel, parse_math=False)
        self.label = ax.text(0.01, 0.99, "", transform=ax.transAxes, va="top", ha="left",
                             fontsize="small", bbox={"facecolor": "white", "alpha": 0.7,
                                                     "linewidth": 0}, parse_math=False)
        self.canvas.draw()
        # Fix the layout after one draw, so frames never shift and later draws are cheaper.
        self.fig.set_layout_engine("none")
        # What a full draw (Axes.draw sorts by zorder) paints above the mesh where the mesh
        # can reach must be drawn after it: the spines' inner half-width and the
        # anti-aliased inner end of the tick marks. Tick labels lie outside the axes and stay
        # in the background; redrawing them would cost most of the frame (text layout).
        self._above = sorted((s for s in ax.spines.values()
                              if s.get_zorder() >= self.mesh.get_zorder()),
                             key=lambda a: a.get_zorder())
        self._tick_lines = []
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_visible() and axis.get_zorder() >= self.mesh.get_zorder():
                # The ticks a full draw draws: those inside the view limits (private API,
                # stable since matplotlib 3.1; the pixel test guards it).
                for tick in axis._update_ticks():
                    if tick.get_visible():
                        self._tick_lines += [ln for ln in (tick.gridline, tick.tick1line,
                                                           tick.tick2line) if ln.get_visible()]
        self._background = None
        if self.blit:
            # Animated artists are skipped by canvas.draw(), and hidden tick marks too: the
            # saved background holds the figure without the parts drawn per frame. (Tick
            # marks are drawn by their axis, which cannot skip animated children.)
            for artist in (self.mesh, self.label, *self._above):
                artist.set_animated(True)
            for line in self._tick_lines:
                line.set_visible(False)
            self.canvas.draw()
            self._background = self.canvas.copy_from_bbox(self.fig.bbox)
            for line in self._tick_lines:
                line.set_visible(True)

    def draw(self, field: np.ndarray, label: str) -> np.ndarray:
        """Draw `field` with time label `label`; return the frame's pixels.

        Parameters
        ----------
        field : numpy.ndarray, shape (ny, nx)
            Values in the variable's units; NaN cells are left transparent.
        label : str
            Time shown in the corner (e.g. an ISO 8601 date).

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
        self.mesh.set_array(np.ma.masked_invalid(field))
        self.label.set_text(label)
        if not self.blit:
            self.canvas.draw()
        else:
            renderer = self.canvas.get_renderer()
            self.canvas.restore_region(self._background)
            # Same order as Axes.draw: mesh, spines, tick marks, then the label (text, z=3).
            self.ax.draw_artist(self.mesh)
            for artist in self._above:
                self.ax.draw_artist(artist)
            for line in self._tick_lines:
                line.draw(renderer)
            self.label.draw(renderer)
        return np.asarray(self.canvas.buffer_rgba())

    def save_png(self, path: str | os.PathLike, *, compress_level: int = 6) -> None:
        """Write the frame last drawn by :meth:`draw` as a PNG of exactly width x height.

        Parameters
        ----------
        path : path
            Output file.
        compress_level : int
            zlib level 0-9; 6 is what ``savefig`` uses, so the pixels and size match it.
        """
        write_png(np.asarray(self.canvas.buffer_rgba()), path, compress_level=compress_level)

    def render(self, field: np.ndarray, label: str, path: str | os.PathLike) -> None:
        """Draw `field` and write it as a PNG at `path` (see :meth:`draw`)."""
        self.draw(field, label)
        self.save_png(path)

    def close(self) -> None:
        """Release the figure."""
        self.fig.clear()


def write_png(rgba: np.ndarray, path: str | os.PathLike, *, compress_level: int = 6) -> None:
    """Write an RGBA frame, shape (height, width, 4) uint8, as a PNG file (Pillow)."""
    from PIL import Image

    Image.fromarray(rgba, mode="RGBA").save(path, format="png", compress_level=compress_level)
