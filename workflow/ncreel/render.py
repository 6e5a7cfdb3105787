"""Render frames with one reused matplotlib figure per worker.

Creating a figure per frame leaks memory in long loops and costs most of the time;
here the figure, axes, mesh and colour bar are built once and each frame only swaps
the mesh data (``set_array``) and the time label.
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

    Raises
    ------
    ValueError
        If `cmap` is not a known colormap or the size is not positive.
    """

    def __init__(self, *, shape: tuple[int, int], width: int, height: int, dpi: float,
                 cmap: str, vmin: float, vmax: float, x=None, y=None, title: str = "",
                 xlabel: str = "", ylabel: str = "") -> None:
        if width < 16 or height < 16:
            raise ValueError(f"frame size {width}x{height}: need at least 16x16 pixels")
        if cmap not in matplotlib.colormaps:
            raise ValueError(f"cmap '{cmap}' is not a matplotlib colormap")
        ny, nx = shape
        self.width, self.height, self.dpi = int(width), int(height), float(dpi)
        self.fig = Figure(figsize=(self.width / self.dpi, self.height / self.dpi), dpi=self.dpi)
        self.canvas = FigureCanvasAgg(self.fig)
        ax = self.fig.add_subplot()
        x = np.arange(nx) if x is None else np.asarray(x)
        y = np.arange(ny) if y is None else np.asarray(y)
        self.mesh = ax.pcolormesh(x, y, np.zeros((ny, nx)), cmap=cmap, vmin=vmin, vmax=vmax,
                                  shading="auto", rasterized=True)
        self.fig.colorbar(self.mesh, ax=ax, shrink=0.9, pad=0.02)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        self.label = ax.text(0.01, 0.99, "", transform=ax.transAxes, va="top", ha="left",
                             fontsize="small", bbox={"facecolor": "white", "alpha": 0.7,
                                                     "linewidth": 0})
        self.fig.set_layout_engine("constrained")
        self.fig.canvas.draw()
        # Fix the layout after one draw, so frames never shift and later draws are cheaper.
        self.fig.set_layout_engine("none")

    def render(self, field: np.ndarray, label: str, path: str | os.PathLike) -> None:
        """Draw `field` with time label `label` and write a PNG of exactly width x height.

        Parameters
        ----------
        field : numpy.ndarray, shape (ny, nx)
            Values in the variable's units; NaN cells are left transparent.
        label : str
            Time shown in the corner (e.g. an ISO 8601 date).
        path : path
            Output PNG file.
        """
        self.mesh.set_array(np.ma.masked_invalid(field))
        self.label.set_text(label)
        self.fig.savefig(path, dpi=self.dpi, format="png")

    def close(self) -> None:
        """Release the figure."""
        self.fig.clear()
