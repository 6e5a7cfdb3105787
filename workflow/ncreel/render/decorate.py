"""Config ``decorate: module:function``: a user's function drawn once on the static figure.

The function is called as ``function(fig, ax, info)`` once per render worker (with
``panels``: once per panel, with that panel's axes and ``info.panel`` its index), after ncreel
has drawn the figure's static parts (map lines, colour bar, title, caption) and fixed its
layout, and before the background is saved; what it adds (station markers, a logo, text)
is part of the saved background, so it costs nothing per frame. ``info`` is a
:class:`DecorateInfo`.

A function that changes its artists between draws (a callback on ``draw_event``, an artist
whose ``draw`` shows the clock) would break the saved background: the renderer compares a
fresh draw of the background with the saved one on a few frames and, when they differ,
draws every further frame in full (:class:`ncreel.render.frame.FrameRenderer`), with one
warning in the job's log.

The spec is checked when the config is read (:func:`check_decorate`): the module must
import, the name must be a callable, and one call on a figure of the run's size and map
must not raise, change the figure's size or add an animated artist, and must return within
:data:`CHECK_SECONDS`. Rules pass :func:`decorate_params` (the spec and a digest of the module's
source), so a changed function reruns the frames.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ncreel.core.errors import NcreelError
from ncreel.core.userimport import import_user_object

log = logging.getLogger(__name__)

KEY = "decorate"
#: Seconds the check before any job waits for the function (and the figure's draw)
#: before it stops the run: a function that never returns would hang it with no word.
CHECK_SECONDS = 60.0


@dataclass(frozen=True)
class DecorateInfo:
    """What a ``decorate`` function is told about the run.

    Attributes
    ----------
    variable, long_name, units : str
        The movie's variable, its ``long_name`` (the name when none) and units.
    paths : tuple of str
        The input files.
    n_time : int
        Frames of the movie.
    vmin, vmax : float
        Colour limits, in the variable's units.
    width, height : int
        Frame size in pixels.
    dpi : float
        Dots per inch of the figure.
    projection : cartopy.crs.Projection or None
        The map's cartopy projection (the axes are then a cartopy ``GeoAxes``, so
        ``transform=ccrs.PlateCarree()`` works); None on the default PlateCarree map, which
        is drawn on plain axes whose x is the longitude minus the central longitude,
        and on grids without latitude/longitude. Use :meth:`to_map` on either.
    central_longitude : float
        The map's central longitude (degrees; 0 without a map).
    panel : int or None
        With config ``panels``: the index of the panel whose axes `ax` are (the function
        is called once per panel, and the other attributes describe that panel: a
        difference panel's variable and paths are its first panel's, its long name its
        title); None on a single map.
    """

    variable: str
    long_name: str
    units: str
    paths: tuple
    n_time: int
    vmin: float
    vmax: float
    width: int
    height: int
    dpi: float
    projection: object
    central_longitude: float
    panel: int | None = None
    _map: object = None

    def to_map(self, lon, lat) -> tuple[np.ndarray, np.ndarray]:
        """Map coordinates (the axes' data coordinates) of longitudes and latitudes.

        Parameters
        ----------
        lon, lat : array_like
            Degrees east / north, any matching shape.

        Returns
        -------
        x, y : numpy.ndarray
            Same shape; NaN where the projection cannot show the point.

        Raises
        ------
        ValueError
            On a grid without latitude/longitude (plain axes in grid indices).
        """
        if self._map is None:
            raise ValueError("the frame has no map (its grid has no latitude/longitude)")
        lon, lat = np.broadcast_arrays(np.asarray(lon, float), np.asarray(lat, float))
        src = None
        if self.projection is not None:
            import cartopy.crs as ccrs

            src = ccrs.PlateCarree()
        pts = self._map.transform_points(src, lon, lat)
        x, y = pts[..., 0], pts[..., 1]
        bad = ~(np.isfinite(x) & np.isfinite(y))
        return np.where(bad, np.nan, x), np.where(bad, np.nan, y)


def _module_file(module) -> str | None:
    path = getattr(module, "__file__", None)
    return path if path and os.path.isfile(path) else None


def resolve_decorate(spec: str) -> Callable:
    """Import the function named by `spec` (``package.module:function``).

    The module is imported normally; if that fails, once more with the current working
    directory (Snakemake's working directory) on ``sys.path``, as a user cell model is.

    Raises
    ------
    NcreelError
        One line naming ``decorate``: a spec without ``:``, a module that cannot be
        imported (or raises while imported), a missing name, or one that is not callable.
    """
    module_name, sep, attr = str(spec).partition(":")
    if not sep or not module_name or not attr:
        raise NcreelError(f"config key '{KEY}': '{spec}' must be package.module:function")
    fn = import_user_object(spec, KEY)
    if fn is None:
        raise NcreelError(f"config key '{KEY}': module '{module_name}' has no '{attr}'")
    if not callable(fn):
        raise NcreelError(f"config key '{KEY}': '{spec}' is a {type(fn).__name__}, not a "
                          "function decorate(fig, ax, info)")
    return fn


def decorate_params(spec: str | None) -> dict | None:
    """Return what rules pass on: ``{"function": spec, "source": digest}`` (None: none).

    ``source`` is the SHA-256 (16 hex digits) of the module's file, so editing the
    function changes the rule's params and Snakemake reruns the frames.

    Raises
    ------
    NcreelError
        As :func:`resolve_decorate`.
    """
    if not spec:
        return None
    fn = resolve_decorate(spec)
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    path = _module_file(module) if module is not None else None
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16] if path else ""
    return {"function": str(spec), "source": digest}


def call_decorate(fn: Callable, spec: str, fig, ax, info: DecorateInfo, *,
                  slow_note: bool = True) -> None:
    """Call ``fn(fig, ax, info)``; anything it raises becomes one line naming ``decorate``.

    With `slow_note`, a call that has not returned after :data:`CHECK_SECONDS` is said in
    the log (a render job has no time limit of its own besides a cluster's walltime).

    Raises
    ------
    NcreelError
        ``config key 'decorate': '<spec>' raised <Error>: <message>``; or the function
        changed the figure's size or dpi (the frames would not be the movie's size),
        added an animated artist (never drawn, so missing from every frame), or removed
        or replaced what the figure held (``ax.clear()``, ``fig.clear()``, ``remove()``:
        the field, map lines or overlays would be missing from the frames).
    """
    import threading

    size, dpi = tuple(fig.get_size_inches()), fig.dpi
    animated = set(fig.findobj(_is_animated))
    held = _held(fig, ax)
    # In a render job nothing stops a function that never returns (the job's walltime
    # does, on a cluster): its log says so after CHECK_SECONDS.
    slow = None
    if slow_note:
        slow = threading.Timer(CHECK_SECONDS, log.warning, args=(
            "config key '%s': '%s' has not returned after %g s (it is called once per "
            "render worker, before the first frame)", KEY, spec, CHECK_SECONDS))
        slow.daemon = True
        slow.start()
    try:
        fn(fig, ax, info)
    except NcreelError:
        raise
    except Exception as err:
        raise NcreelError(f"config key '{KEY}': '{spec}' raised {type(err).__name__}: "
                          f"{err}") from None
    finally:
        if slow is not None:
            slow.cancel()
    if tuple(fig.get_size_inches()) != size or fig.dpi != dpi:
        # Frames of another size than the movie's (the encoder and the layout expect
        # width x height): refused, not drawn wrong.
        w, h = fig.get_size_inches() * fig.dpi
        raise NcreelError(f"config key '{KEY}': '{spec}' changed the figure's size to "
                          f"{w:.0f}x{h:.0f} pixels (dpi {fig.dpi:g}); the frame is "
                          f"{size[0] * dpi:.0f}x{size[1] * dpi:.0f} (config width, height, "
                          "dpi): set the size there, not in the function")
    now = {id(a) for a in _held(fig, ax)}
    gone = [a for a in held if id(a) not in now]
    if gone:
        # ncreel's own artists (the field's mesh, map lines, overlays, titles) would be
        # missing: the frames would show the background where the field should be.
        raise NcreelError(f"config key '{KEY}': '{spec}' removed or replaced what the "
                          f"figure held ({_kind(gone[0])}; ax.clear(), ax.cla(), "
                          "fig.clear() or remove() do that): only add artists")
    added = [a for a in fig.findobj(_is_animated) if a not in animated]
    if added:
        # An animated artist is left out of every draw of the figure, so it would be
        # missing from every frame.
        raise NcreelError(f"config key '{KEY}': '{spec}' added an animated artist "
                          f"({type(added[0]).__name__}), which is never drawn in the "
                          "frames: leave animated=False (what decorate draws is drawn once, "
                          "under every frame)")


def _held(fig, ax) -> list:
    # The figure's and the map axes' own parts: their axes, texts, collections, lines and
    # patches. (Deeper artists such as tick marks are made again by matplotlib itself.)
    from matplotlib.axis import Axis

    return [a for a in [*fig.get_children(), *ax.get_children()] if not isinstance(a, Axis)]


def _kind(artist) -> str:
    label = artist.get_label() if hasattr(artist, "get_label") else ""
    name = type(artist).__name__
    return f"{name} '{label}'" if label and not label.startswith("_") else name


def _is_animated(artist) -> bool:
    return artist.get_animated()


def make_info(series, render, *, vmin: float, vmax: float, projection) -> DecorateInfo:
    """Return the :class:`DecorateInfo` of `series` drawn with `render` on `projection`."""
    from ncreel.render.maps import PlainPlateCarree

    plain = isinstance(projection, PlainPlateCarree)
    centre = 0.0
    if projection is not None:
        centre = float(projection.proj4_params.get("lon_0", 0.0))
    return DecorateInfo(variable=series.variable, long_name=series.long_name,
                        units=series.units or "", paths=tuple(series.paths),
                        n_time=int(series.n_time), vmin=float(vmin), vmax=float(vmax),
                        width=int(render.width), height=int(render.height),
                        dpi=float(render.dpi),
                        projection=None if plain else projection,
                        central_longitude=centre, _map=projection)


def check_decorate(spec: str, series, render, *, projection, x, y, panels: int = 0) -> None:
    """Call the function once on a figure of the run's size and map, before any job.

    The figure holds the run's map axes (projection and view of the movie's grid, no
    field); the call and one draw of the figure must not raise.

    Parameters
    ----------
    spec : str
        Config ``decorate``.
    series : ncreel.input.source.Series
        The movie's series (after its region cut).
    render : ncreel.config.settings.RenderSettings
    projection : cartopy.crs.Projection, ncreel.render.maps.PlainPlateCarree or None
        The movie's map (:func:`ncreel.render.segment.map_settings`).
    x, y : numpy.ndarray or None
        Its cell coordinates (:func:`ncreel.render.segment.plot_axes`).
    panels : int
        Panels of the layout (0: none); with panels the function is called once per
        panel index (``info.panel``), each on a fresh probe axes of the movie's map.

    Raises
    ------
    NcreelError
        One line naming ``decorate`` (see :func:`resolve_decorate`, :func:`call_decorate`).
    """
    fn = resolve_decorate(spec)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ncreel.render.frame import map_axes

    fig = Figure(figsize=(render.width / render.dpi, render.height / render.dpi),
                 dpi=render.dpi)
    canvas = FigureCanvasAgg(fig)
    ax = map_axes(fig, projection)
    if projection is not None and x is not None and getattr(series, "mesh", None) is None:
        lon, lat = np.asarray(x, float), np.asarray(y, float)
        mx, my = make_info(series, render, vmin=0, vmax=1, projection=projection).to_map(
            *(np.meshgrid(lon, lat) if lon.ndim == 1 else (lon, lat)))
        if np.isfinite(mx).any():
            ax.set_xlim(np.nanmin(mx), np.nanmax(mx))
            ax.set_ylim(np.nanmin(my), np.nanmax(my))
    info = make_info(series, render, vmin=0.0, vmax=1.0, projection=projection)
    if panels:
        info = dataclasses.replace(info, panel=0)
    try:
        with _time_limit(CHECK_SECONDS, spec):
            call_decorate(fn, spec, fig, ax, info, slow_note=False)
            for i in range(1, panels):  # each panel index, as the render jobs call it
                panel_ax = map_axes(fig, projection)
                panel_ax.set_xlim(ax.get_xlim())
                panel_ax.set_ylim(ax.get_ylim())
                call_decorate(fn, spec, fig, panel_ax, dataclasses.replace(info, panel=i),
                              slow_note=False)
            try:
                canvas.draw()
            except _TimeLimit:
                raise
            except Exception as err:
                raise NcreelError(f"config key '{KEY}': drawing what '{spec}' added raised "
                                  f"{type(err).__name__}: {err}") from None
    finally:
        fig.clear()


class _TimeLimit(BaseException):
    """Raised by the alarm of :func:`_time_limit`.

    A BaseException, so that the user's ``except Exception`` does not swallow it.
    """


@contextlib.contextmanager
def _time_limit(seconds: float, spec: str):
    """Stop the block with one line naming ``decorate`` after `seconds` (main thread).

    SIGALRM interrupts Python code and sleeps; off the main thread (where signals cannot
    be caught) the block runs without a limit.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "setitimer"):
        yield
        return

    def alarm(signum, frame):
        raise _TimeLimit

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TimeLimit:
        raise NcreelError(f"config key '{KEY}': '{spec}' did not return within "
                          f"{seconds:g} s when called once to check it before any job (a "
                          "loop that never ends, or a wait on a file or the network?): "
                          "make it return quickly") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
