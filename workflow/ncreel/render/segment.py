"""Render one shard's frames into an H.264 segment, with one or more worker processes.

Each worker opens the input itself, reads only its own contiguous time range in bounded
blocks, draws every frame with one reused :class:`~ncreel.render.frame.FrameRenderer` and pipes
the raw pixels into its own ffmpeg process (:class:`~ncreel.render.movie.SegmentEncoder`). A sample
of frames is also written as PNG so a person (and the report) can inspect them. With several
workers the shard's range is split into contiguous sub-ranges, one part segment each, joined
in order without re-encoding; workers are separate processes because pyplot is not
thread-safe and the GIL serialises Agg, so threads would not render in parallel.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import resource
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ncreel.config.settings import EncodeSettings, MapSettings, RenderSettings, SeriesSelection
from ncreel.core.procmem import peak_rss_mb
from ncreel.region.selection import open_selection
from ncreel.render.movie import SegmentEncoder, concat_segments
from ncreel.render.overlays import make_overlays, read_overlay_fields
from ncreel.run.progress import Progress, current_log_file
from ncreel.run.shardplan import Shard, frame_name, worker_ranges
from ncreel.run.workers import run_in_workers

log = logging.getLogger(__name__)

#: Bound on the bytes of one block read from disk while rendering; a block always holds at
#: least one time step. Small, because frames are drawn one by one anyway: a 2000-frame
#: shard then holds no more data than a 20-frame one (measured: 32 MiB blocks made the
#: worker's peak grow by the block, 15 MiB, between those two), and a 0.25 degree global
#: grid (721 x 1440) is read one step at a time.
RENDER_BLOCK_BYTES = 4 * 2**20


@dataclass(frozen=True)
class FrameJob:
    """What a render worker needs to draw and encode frames; picklable.

    Attributes
    ----------
    series : SeriesSelection
        The input, opened by each worker process.
    render : RenderSettings
    encode : EncodeSettings
    vmin, vmax : float
        Colour limits, in the variable's units.
    png_compress : int
        zlib level of the PNG frames.
    label : str
        Name of the frames in progress lines.
    log_file : str or None
        File the workers append their progress lines to.
    overlay_limits : dict or None
        Contour levels and vector speed of the whole movie
        (:func:`ncreel.render.overlays.overlay_limits`, in ``stats.json``).
    extend : str
        The colour bar's arrows (:func:`colorbar_extend`).
    panel_limits : list of dict or None
        With ``render.panels``: each panel's colour limits (``stats.json`` ``panels``,
        :func:`ncreel.jobs.stats.panel_statistics`).
    """

    series: SeriesSelection
    render: RenderSettings
    encode: EncodeSettings
    vmin: float
    vmax: float
    png_compress: int = 6
    label: str = "frames"
    log_file: str | None = None
    overlay_limits: dict | None = None
    extend: str = "neither"
    panel_limits: list | None = None


def png_sample(start: int, stop: int, *, every: int = 0, extra: Iterable[int] = ()) -> list[int]:
    """Time indices of ``start:stop`` that are also written as PNG files.

    Parameters
    ----------
    start, stop : int
        Half-open range of global time indices (one shard).
    every : int
        Also every `every`-th global index (0: none beyond first, middle and last).
    extra : iterable of int
        Further indices to include when inside the range (e.g. the run's middle frame,
        which the report shows).

    Returns
    -------
    list of int
        Sorted, unique: the first, middle and last index of the range, multiples of `every`,
        and `extra` within the range.
    """
    if stop <= start:
        return []
    picked = {start, (start + stop - 1) // 2, stop - 1}
    if every and every > 0:
        picked.update(range(-(-start // every) * every, stop, every))
    picked.update(t for t in extra if start <= t < stop)
    return sorted(picked)


def render_range(job: FrameJob, start: int, stop: int, *, segment: str | os.PathLike,
                 frames_dir: str | os.PathLike | None = None, png_times: Iterable[int] = (),
                 encoder_threads: int | None = None, series=None,
                 on_block: Callable | None = None) -> dict:
    """Render time steps ``start:stop`` into one MP4 segment (in this or a worker process).

    Parameters
    ----------
    job : FrameJob
        The input's selection, render and encode settings, colour limits.
    start, stop : int
        Half-open range of global time indices.
    segment : path
        Output segment, written under a temporary name and renamed when complete.
    frames_dir : path, optional
        Existing directory for the PNG frames ``frame_<time_index>.png`` of `png_times`.
    png_times : iterable of int
        Global time indices to also write as PNG.
    encoder_threads : int, optional
        Thread cap of this worker's ffmpeg.
    series : ncreel.input.source.Series, optional
        The input, already opened from ``job.series`` in this process; None opens it here
        (a worker process).
    on_block : callable, optional
        Called as ``on_block(t0, block)`` with each block the frames read, before its
        frames are drawn (see :func:`frame_source`); what it raises stops the frames.

    Returns
    -------
    dict
        ``frames`` rendered, ``pngs`` written, ``render_s`` (seconds spent drawing),
        ``wall_s``, ``maxrss_mb`` (this process's peak resident memory, MiB) and
        ``encoder_maxrss_mb`` / ``encoder_cpu_s`` (its ffmpeg's peak memory and CPU time).

    Raises
    ------
    NcreelError
        If the input cannot be read or ffmpeg fails.
    """
    if series is None:
        with open_selection(job.series) as opened:
            return render_range(job, start, stop, segment=segment, frames_dir=frames_dir,
                                png_times=png_times, encoder_threads=encoder_threads,
                                series=opened, on_block=on_block)
    t_start = time.perf_counter()
    pngs = set(png_times)
    rend, enc = job.render, job.encode
    draw_s = 0.0
    n = 0
    progress = Progress(stop - start, f"{job.label} {start}..{stop - 1}", log_file=job.log_file)
    if job.log_file and not logging.getLogger().handlers:
        # A spawned worker: its renderer's warnings (decorate) go to the job's log too.
        handler = logging.FileHandler(job.log_file, mode="a")
        handler.setFormatter(logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s"))
        logging.getLogger("ncreel.render").addHandler(handler)
    labels = time_labels(series, rend.time_format)
    renderer, frames, close = frame_source(job, series, labels, on_block=on_block)
    with SegmentEncoder(segment, width=rend.width, height=rend.height, fps=enc.fps,
                        crf=enc.crf, preset=enc.preset, threads=encoder_threads) as encoder:
        for t, args in frames(start, stop):
            t1 = time.perf_counter()
            rgba = renderer.draw(*args)
            draw_s += time.perf_counter() - t1
            encoder.write(rgba)
            if t in pngs and frames_dir is not None:
                renderer.save_png(Path(frames_dir) / frame_name(t),
                                  compress_level=job.png_compress, description=labels[t])
            n += 1
            progress.update(n)
    close()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"frames": n, "pngs": len(pngs & set(range(start, stop))), "render_s": draw_s,
            "wall_s": time.perf_counter() - t_start, "maxrss_mb": peak_rss_mb(),
            "encoder_maxrss_mb": encoder.peak_rss_mb or 0.0,
            "encoder_cpu_s": kids.ru_utime + kids.ru_stime}


def frame_source(job: FrameJob, series, labels: list[str], *, on_block: Callable | None = None):
    """Build the renderer of `job` and a reader of the frames it draws, in bounded blocks.

    Parameters
    ----------
    job : FrameJob
    series : ncreel.input.source.Series
        The input, opened from ``job.series``.
    labels : list of str
        The frames' time labels (:func:`time_labels`).
    on_block : callable, optional
        Called as ``on_block(t0, block)`` with each block read, before its frames are
        drawn: `block` is `series`' steps ``t0 : t0 + n``, shape (n, ny, nx), as
        :meth:`ncreel.input.source.Series.read` returns them; with panels a list of each
        panel's (its own files, not `series`). A shard job hands the series' blocks to
        its rows (:mod:`ncreel.jobs.shard`), so each is read once.

    Returns
    -------
    renderer : FrameRenderer or ncreel.render.panels.PanelRenderer
    frames : callable
        ``frames(start, stop)`` yields ``(t, args)`` per time step, drawn by
        ``renderer.draw(*args)``; each block of :data:`RENDER_BLOCK_BYTES` (every panel's slab, the
        overlays' fields) is read when reached and dropped after its frames.
    close : callable
        Releases the figure (and a layout's files).
    """
    rend = job.render
    if rend.panels:
        source = PanelFrames(rend.panels, rend, job.panel_limits, labels)
        return (source.renderer,
                lambda start, stop: source.frames(start, stop, RENDER_BLOCK_BYTES,
                                                  on_block=on_block),
                source.close)
    renderer = make_renderer(series, rend, vmin=job.vmin, vmax=job.vmax, labels=labels,
                             overlay_limits=job.overlay_limits, extend=job.extend)

    def frames(start, stop):
        for t0, block in series.iter_blocks(start, stop, RENDER_BLOCK_BYTES):
            if on_block is not None:
                on_block(t0, block)
            extra = read_overlay_fields(series, rend.contours, rend.vectors, t0,
                                        t0 + block.shape[0])
            for i in range(block.shape[0]):
                yield t0 + i, (block[i], labels[t0 + i],
                               [tuple(a[i] for a in group) for group in extra])
            del block  # let the next block reuse the memory

    return renderer, frames, renderer.close


def render_shard(job: FrameJob, shard: Shard, *, segment: str | os.PathLike,
                 frames_dir: str | os.PathLike | None = None, png_times: Iterable[int] = (),
                 workers: int = 1, series=None, on_block: Callable | None = None) -> dict:
    """Render a shard into `segment` with `workers` processes, frames in exact time order.

    With ``workers == 1`` the shard is rendered in this process. Each worker's encoder runs
    single-threaded, so a job uses about the `workers` cores it declared (libx264 with one
    thread encodes as fast per CPU-second, and holds fewer frames in memory). Otherwise the shard is
    split into `workers` contiguous, balanced sub-ranges, each rendered by a fresh
    ``spawn`` process (no inherited pyplot or file state) into a part segment, and the parts
    are joined in order with ``-c copy``. Peak memory is about `workers` times one worker's
    (each holds one figure, one block and one ffmpeg), independent of the shard's length;
    with one worker, a shard job's rows written beside it (`on_block`) add theirs
    (:func:`ncreel.run.resources.render_mem_mb_calibrated`).

    Parameters
    ----------
    job : FrameJob
        See :func:`render_range`.
    shard : Shard
        Which time steps.
    segment : path
        The shard's MP4 segment (written under a temporary name, renamed when complete).
    frames_dir : path, optional
        Existing directory for the sampled PNG frames.
    png_times : iterable of int
        Global time indices to also write as PNG.
    workers : int
        Worker processes (the job's ``threads``); capped at the shard's frame count.
    series : ncreel.input.source.Series, optional
        The input already opened from ``job.series``, used when rendering in this process
        (one worker); worker processes open their own.
    on_block : callable, optional
        With one worker: see :func:`render_range` (a shard job's rows, written beside
        the frames in this process, get the blocks the frames read). Not called with
        several workers.

    Returns
    -------
    dict
        ``frames``, ``pngs``, ``workers``, ``render_s`` (summed over workers), ``wall_s``,
        ``maxrss_mb`` (largest worker), ``encoder_maxrss_mb`` (largest encoder).

    Raises
    ------
    NcreelError
        If a worker's ffmpeg fails, or the parts cannot be joined.
    """
    png_times = sorted(set(png_times))
    workers = max(1, min(int(workers), shard.n_frames))
    t0 = time.perf_counter()
    if workers == 1:
        result = render_range(job, shard.start, shard.stop, segment=segment,
                              frames_dir=frames_dir, png_times=png_times, encoder_threads=1,
                              series=series, on_block=on_block)
        result["workers"] = 1
        return result
    segment = Path(segment)
    parts_dir = segment.with_name(segment.name + ".parts")
    shutil.rmtree(parts_dir, ignore_errors=True)
    parts_dir.mkdir(parents=True)
    ranges = worker_ranges(shard, workers, () if series is None
                           else series.chunk_starts(shard.start, shard.stop))
    parts = [parts_dir / f"part_{i:03d}.mp4" for i in range(len(ranges))]
    # Workers append their progress to this job's log.
    job = dataclasses.replace(job, log_file=current_log_file())
    try:
        results = run_in_workers([(render_range, (job, a, b),
                                   {"segment": part, "frames_dir": frames_dir,
                                    "png_times": png_times, "encoder_threads": 1})
                                  for (a, b), part in zip(ranges, parts, strict=True)])
        concat_segments(parts, segment, faststart=False)
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)
    return {"frames": sum(r["frames"] for r in results),
            "pngs": sum(r["pngs"] for r in results), "workers": len(ranges),
            "render_s": sum(r["render_s"] for r in results), "wall_s": time.perf_counter() - t0,
            "maxrss_mb": max(r["maxrss_mb"] for r in results),
            "encoder_maxrss_mb": max(r["encoder_maxrss_mb"] for r in results),
            "encoder_cpu_s": sum(r["encoder_cpu_s"] for r in results)}


def time_labels(series, time_format: str | None = None) -> list[str]:
    """Per-step frame label, one string per time step (see :mod:`ncreel.render.timelabels`).

    Dates in `time_format` (config ``time_format``) or, when None, as precise as the time
    step needs, in the file's calendar (``1860`` for annual means, ``1980-06-01 12:00`` for
    6-hourly data); ``<time> = <value> <units>`` where time does not decode, or
    ``<time_dim> step <index>`` when there is no number either. The table's ``time``
    column keeps the full ISO dates.
    """
    from ncreel.render.timelabels import series_labels

    return series_labels(series, time_format)


def make_renderer(series, render: RenderSettings, *, vmin: float, vmax: float,
                  blit: bool = True, labels: list[str] | None = None,
                  overlay_limits: dict | None = None, extend: str = "neither"):
    """Build the :class:`~ncreel.render.frame.FrameRenderer` for `series`.

    The renderer holds the axes, labels, title (``long_name [units]``), the colour bar
    (labelled with the units) and map. `labels` are the frames' time labels
    (:func:`time_labels`; computed here when None): room is kept for the widest.

    ``render.map`` applies to grids with latitude/longitude, see :func:`map_settings`.
    ``render.contours`` / ``render.vectors`` are drawn at `overlay_limits`' levels and
    scale (:func:`ncreel.render.overlays.make_overlays`).
    """
    from ncreel.render.frame import FrameRenderer

    x, y, xlabel, ylabel = plot_axes(series)
    # Latitude/longitude as CF finds them (units, standard_name, axis..., or computed from
    # a grid mapping), whatever the axis label says ("lon [degrees_east]", "Longitude").
    # A mesh's faces are always on the map (ncreel.input.mesh: MeshSeries.has_lat_lon).
    geo = series.has_lat_lon
    projection, features = map_settings(render.map, lon=x if geo else None,
                                        lat=y if geo else None)
    if getattr(series, "region", None) is not None:  # a named country's outline, drawn once
        from ncreel.render.maps import region_features

        features = [*features, *region_features(series.region)]
    title = f"{series.long_name} [{series.units}]" if series.units else series.long_name
    if labels is None:
        labels = time_labels(series, render.time_format)
    decorate = _decorate(series, render, vmin=vmin, vmax=vmax, projection=projection)
    return FrameRenderer(shape=(series.ny, series.nx), width=render.width,
                         height=render.height, dpi=render.dpi, cmap=render.cmap,
                         vmin=vmin, vmax=vmax, x=x, y=y, title=title, xlabel=xlabel,
                         ylabel=ylabel, blit=blit, projection=projection, features=features,
                         units=series.units, time_labels=labels,
                         mesh=getattr(series, "mesh", None),
                         overlays=make_overlays(render.contours, render.vectors,
                                                overlay_limits), extend=extend,
                         gridlines=render.map.gridlines and geo,
                         caption=render.caption or "", decorate=decorate,
                         edges=region_edges(series, x, y))


#: Frame sizes tried, as multiples of the configured one, for a frame whose maps have no
#: room (:func:`check_frame_fits` names the first that fits).
FIT_SCALES = (1.5, 2.0, 3.0, 4.0)


def check_frame_fits(series, render: RenderSettings, *, vmin: float, vmax: float,
                     panel_limits: list | None = None) -> None:
    """Build the run's renderer once, as its jobs will, to find a map with no room.

    The title, the time label, the colour bars (whose tick labels depend on the colour
    limits) and the panels' titles take their room first, and what the layout leaves each
    map must show a cell of its grid: the rule the renderer itself applies
    (:class:`ncreel.render.frame.MapPixels`), so a frame that passes here draws in
    ``calibrate_render`` and every shard (with limits of the same magnitude). Built
    without user decorations.

    Parameters
    ----------
    series : ncreel.input.source.Series
        The movie's series (a layout's panels open their own).
    render : RenderSettings
        The run's render settings.
    vmin, vmax : float
        Colour limits like the run's (the statistics job finds the real ones).
    panel_limits : list of dict, optional
        Each panel's ``vmin``, ``vmax`` likewise (with panels).

    Raises
    ------
    NcreelError
        One line naming ``width``/``height``, the frame size, the map without room and the
        smallest of :data:`FIT_SCALES` times the size that fits.
    """
    from ncreel.core.errors import NcreelError

    def fits(width: int, height: int) -> str | None:
        probe = dataclasses.replace(render, width=width, height=height, decorate=None)
        try:
            if probe.panels:
                PanelFrames(probe.panels, probe, panel_limits, labels).close()
            else:
                make_renderer(series, probe, vmin=vmin, vmax=vmax, labels=labels).close()
        except ValueError as err:
            if "no grid cell is visible" not in str(err):
                raise
            return str(err)
        return None

    labels = time_labels(series, render.time_format)
    why = fits(render.width, render.height)
    if why is None:
        return
    larger = next(((w, h) for w, h in ((int(render.width * k + 1) // 2 * 2,
                                        int(render.height * k + 1) // 2 * 2)
                                       for k in FIT_SCALES) if fits(w, h) is None), None)
    what = (f"{len(render.panels['panels'])} panels" if render.panels else "the map")
    hint = (f"width: {larger[0]}, height: {larger[1]} fits" if larger else
            "use a much larger width/height")
    raise NcreelError(
        f"config keys 'width', 'height': a {render.width} x {render.height} frame leaves "
        f"{what} no room once the title, time label and colour bar"
        f"{'s' if render.panels else ''} are placed ({why}); {hint}"
        + (" (or fewer panels, or panel_columns)" if render.panels else ""))


def _decorate(series, render: RenderSettings, *, vmin, vmax, projection):
    # Config decorate as FrameRenderer calls it: fig, ax, and the run's DecorateInfo.
    if not render.decorate:
        return None
    from ncreel.render.decorate import call_decorate, make_info, resolve_decorate

    spec = render.decorate["function"]
    fn = resolve_decorate(spec)
    info = make_info(series, render, vmin=vmin, vmax=vmax, projection=projection)
    return lambda fig, ax: call_decorate(fn, spec, fig, ax, info)


def colorbar_extend(setting: str | None, stats: dict) -> str:
    """Decide the colour bar's arrows: `setting`, or from the data when None or ``auto``.

    Parameters
    ----------
    setting : str or None
        Config ``colorbar_extend``: ``auto`` (None) draws an arrow at each end beyond which
        the run has values (``stats`` ``min`` below ``vmin``, ``max`` above ``vmax``);
        ``neither``, ``min``, ``max`` or ``both`` as given.
    stats : dict
        ``stats.json``: ``vmin``, ``vmax`` and, when computed, ``min``, ``max``.

    Returns
    -------
    str
        ``neither``, ``min``, ``max`` or ``both`` (matplotlib's ``extend``).
    """
    if setting not in (None, "auto"):
        return setting
    lo, hi = stats.get("min"), stats.get("max")
    below = lo is not None and np.isfinite(lo) and lo < stats["vmin"]
    above = hi is not None and np.isfinite(hi) and hi > stats["vmax"]
    return {(False, False): "neither", (True, False): "min", (False, True): "max",
            (True, True): "both"}[(bool(below), bool(above))]


def map_settings(settings: MapSettings, *, lon=None, lat=None):
    """Projection and features (coastlines, borders) of the frame from the ``map`` config.

    Parameters
    ----------
    settings : MapSettings
        ``coastlines`` (None: on when the grid has latitude/longitude), ``borders``,
        ``projection`` (a cartopy CRS class name) and ``projection_params``. Without a
        ``central_longitude`` there, a regional grid is centred on itself
        (:func:`ncreel.render.maps.central_longitude`).
    lon, lat : numpy.ndarray, optional
        Cell-centre longitudes / latitudes (degrees); None for grids in plain indices, which
        get plain axes and no features.

    Returns
    -------
    projection : cartopy.crs.Projection, ncreel.render.maps.PlainPlateCarree or None
    features : list of ncreel.render.maps.MapLines

    Raises
    ------
    ValueError
        If the projection name or its parameters are not valid.
    """
    if lon is None or lat is None:
        return None, []
    import inspect

    from ncreel.render.maps import central_longitude, map_features, map_projection, map_scale

    name = settings.projection
    params = dict(settings.projection_params)
    centre = central_longitude(lon)
    if centre is not None and "central_longitude" in params and _edge_cuts(
            lon, params["central_longitude"]):
        # The map's edge meridian would run through the regional grid, which is then
        # drawn in two pieces at the map's two edges (and contour lines would join them
        # across the whole map): centre the map on the grid instead.
        log.warning(
            "config 'map.projection_params.central_longitude' %g puts the map's edge "
            "(%g) through the grid or region (longitudes %g..%g): the map is centred on "
            "%g instead", params["central_longitude"],
            (float(params["central_longitude"]) + 360.0) % 360.0 - 180.0,
            float(np.nanmin(lon)), float(np.nanmax(lon)), centre)
        params["central_longitude"] = centre
    if centre is not None and "central_longitude" not in params:
        if name == "PlateCarree":  # known without importing cartopy
            params["central_longitude"] = centre
        else:
            import cartopy.crs as ccrs

            cls = getattr(ccrs, str(name), None)
            if isinstance(cls, type) and "central_longitude" in inspect.signature(
                    cls).parameters:
                params["central_longitude"] = centre
    projection = map_projection(name, params)
    coastlines = True if settings.coastlines is None else settings.coastlines
    return projection, map_features(coastlines=coastlines, borders=settings.borders,
                                    scale=map_scale(lon, lat))


def region_edges(series, x, y):
    """Cell edges of a region's cells for drawing, from the whole grid; None otherwise.

    A region's outer cells (and a region one cell wide) are drawn to their true bounds
    (:meth:`ncreel.region.restrict.RegionSeries.coordinate_bounds`), not to edges extrapolated from
    the cut's own centres.

    Parameters
    ----------
    series : ncreel.input.source.Series
    x, y : numpy.ndarray
        The plot's cell centres (:func:`plot_axes`): continuous longitudes, latitudes.

    Returns
    -------
    (x_edges, y_edges) : numpy.ndarray, shapes (nx + 1,), (ny + 1,), degrees; or None
    """
    if getattr(series, "region", None) is None or np.ndim(x) != 1 or np.ndim(y) != 1:
        return None
    from ncreel.input.gridmap import edges_1d

    lon_b, lat_b = series.coordinate_bounds("lon"), series.coordinate_bounds("lat")
    if lon_b is None or lat_b is None:
        return None
    x = np.asarray(x, float)
    # Bounds moved by whole turns to their (continuous) centre.
    turn = 360.0 * np.round((x - (lon_b[0] + lon_b[1]) / 2) / 360.0)
    return (edges_1d(x, np.column_stack([lon_b[0] + turn, lon_b[1] + turn])),
            edges_1d(np.asarray(y, float), np.column_stack(lat_b)))


def _edge_cuts(lon, central: float) -> bool:
    """Whether the map edge of `central` longitude (central + 180) lies between `lon`'s ends.

    `lon` are continuous cell-centre longitudes (no jump of 360 along a row), degrees.
    """
    lo, hi = float(np.nanmin(lon)), float(np.nanmax(lon))
    edge = float(central) + 180.0
    # The edge's turn at or after lo: the map cuts the grid if it comes before hi.
    first = edge + 360.0 * np.ceil((lo - edge) / 360.0)
    return bool(first <= hi)


def plot_axes(series):
    """Cell-centre coordinates and axis labels: longitude/latitude when the grid has them.

    Returns
    -------
    x, y : numpy.ndarray or None
        1-D (length nx / ny) for rectilinear grids, 2-D ``(ny, nx)`` for curvilinear ones,
        2-D ``(ny + 1, nx + 1)`` exact cell corners for grids with a CF grid mapping
        (:meth:`ncreel.input.source.Series.cell_corners`), projection x/y (1-D) for a projected
        grid without a mapping, ``None`` for plain grid indices.
    xlabel, ylabel : str
    """
    # Continuous longitudes: a curvilinear grid crossing the dateline is drawn unbroken.
    corners = series.cell_corners(continuous=True)
    if corners is not None:
        return corners[0], corners[1], series.axis_label("lon"), series.axis_label("lat")
    lat, lon = series.cell_coordinates(continuous=True)
    if lat is not None and lon is not None:
        # A rectilinear grid comes back as a meshgrid: hand pcolormesh the 1-D axes, which
        # is the same picture with less memory.
        if np.array_equal(lon, np.broadcast_to(lon[:1], lon.shape)) and np.array_equal(
                lat, np.broadcast_to(lat[:, :1], lat.shape)):
            lon, lat = lon[0], lat[:, 0]
        return lon, lat, series.axis_label("lon"), series.axis_label("lat")
    x, y = series.grid_xy()
    if x is not None:
        return x, y, series.axis_label("lon"), series.axis_label("lat")
    ds = series._dataset(0)
    x = ds[series.x_dim].values if series.x_dim in ds.variables else None
    y = ds[series.y_dim].values if series.y_dim in ds.variables else None
    return x, y, series.x_dim, series.y_dim


class PanelFrames:
    """A layout's files opened and its renderer built: what a render worker draws from.

    Parameters
    ----------
    layout : dict
        :func:`ncreel.render.panelplan.plan_panels`' result.
    render : ncreel.config.settings.RenderSettings
        Frame size, dpi and ``map`` (projection, coastlines, borders) of every panel.
    limits : sequence of dict
        Per panel ``vmin``, ``vmax`` and, when known, ``min``, ``max``
        (:func:`ncreel.jobs.stats.panel_statistics`, in ``stats.json``).
    labels : sequence of str
        The movie's time labels.
    blit : bool
        See :class:`ncreel.render.panels.PanelRenderer`.

    Notes
    -----
    Call :meth:`close` (or use it as a context manager) to release the figure and files.
    """

    def __init__(self, layout, render, limits, labels, *, blit: bool = True) -> None:
        from ncreel.render.panelplan import PanelReader
        from ncreel.render.panels import Panel, PanelRenderer

        self.reader = PanelReader(layout).__enter__()
        self.labels = list(labels)
        try:
            panels = []
            axes = {}
            for i, p in enumerate(self.reader.panels):
                k = i if p["difference_of"] is None else p["difference_of"][0]
                s = self.reader.series[k]
                if k not in axes:
                    x, y, _, _ = plot_axes(s)
                    geo = s.has_lat_lon
                    projection, features = map_settings(render.map, lon=x if geo else None,
                                                        lat=y if geo else None)
                    if getattr(s, "region", None) is not None:
                        from ncreel.render.maps import region_features

                        features = [*features, *region_features(s.region)]
                    axes[k] = (x, y, projection, features)
                x, y, projection, features = axes[k]
                lim = limits[i]
                panels.append(Panel(shape=self.reader.shape(i), x=x, y=y, cmap=p["cmap"],
                                    vmin=lim["vmin"], vmax=lim["vmax"], title=p["title"],
                                    units=p["units"], projection=projection,
                                    features=features,
                                    extend=colorbar_extend(render.colorbar_extend, lim),
                                    overlays=make_overlays(p.get("contours"),
                                                           p.get("vectors"),
                                                           lim.get("overlays"))))
            #: Whether any panel draws overlays (read per block only then).
            self.has_overlays = any(q.overlays for q in panels)
            self.renderer = PanelRenderer(panels, width=render.width, height=render.height,
                                          dpi=render.dpi, columns=layout.get("columns"),
                                          time_labels=self.labels, blit=blit,
                                          caption=render.caption or "",
                                          decorate=self._decorate(render, panels, axes))
        except BaseException:
            self.reader.__exit__(None, None, None)
            raise

    def frames(self, start: int, stop: int, max_bytes: int, *,
               on_block: Callable | None = None):
        """Yield ``(t, (fields, label))``, the renderer's ``draw`` arguments, per step.

        Steps ``start:stop`` are read in blocks of at most `max_bytes` (every panel's slab
        of those steps), each dropped after its frames; `on_block` is called as
        ``on_block(t0, block)`` with each (a list of the panels' arrays) before its frames.
        """
        for t0, block in self.reader.iter_blocks(start, stop, max_bytes):
            if on_block is not None:
                on_block(t0, block)
            n = block[0].shape[0]
            extra = self.reader.read_overlays(t0, t0 + n) if self.has_overlays else None
            for i in range(n):
                if extra is None:
                    yield t0 + i, ([b[i] for b in block], self.labels[t0 + i])
                else:
                    yield t0 + i, ([b[i] for b in block], self.labels[t0 + i],
                                   [[tuple(a[i] for a in g) for g in groups]
                                    for groups in extra])
            del block, extra

    def _decorate(self, render, panels, axes):
        # Config decorate as PanelRenderer calls it: once per panel, with that panel's
        # DecorateInfo (its variable, units, limits, map and index).
        if not render.decorate:
            return None
        import dataclasses

        from ncreel.render.decorate import call_decorate, make_info, resolve_decorate

        spec = render.decorate["function"]
        fn = resolve_decorate(spec)
        infos = []
        for i, (p, panel) in enumerate(zip(self.reader.panels, panels, strict=True)):
            k = i if p["difference_of"] is None else p["difference_of"][0]
            s = self.reader.series[k]
            info = make_info(s, render, vmin=panel.vmin, vmax=panel.vmax,
                             projection=axes[k][2])
            infos.append(dataclasses.replace(
                info, panel=i, units=p["units"] or "",
                long_name=info.long_name if k == i else p["title"],
                n_time=len(self.labels)))
        return lambda fig, ax, i: call_decorate(fn, spec, fig, ax, infos[i])

    def close(self) -> None:
        """Release the figure and close the files."""
        self.renderer.close()
        self.reader.__exit__(None, None, None)

    def __enter__(self) -> PanelFrames:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
