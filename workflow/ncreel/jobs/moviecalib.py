"""The shard plan of a run with a movie: probe frames drawn beside the statistics pass.

The ``calibrate_render`` job renders and encodes a few probe frames as a shard job does
(:func:`ncreel.render.calibrate.calibrate_render`). A frame's memory and time do not depend
on where its colour limits lie, so the job does not wait for the statistics pass over the
whole series: it draws with the limits of the first steps
(:func:`ncreel.jobs.stats.probe_statistics`), and both jobs run side by side.
"""

from __future__ import annotations

from ncreel.config.settings import Calibration, EncodeSettings, RenderSettings
from ncreel.jobs.stats import probe_statistics
from ncreel.region.selection import open_selection
from ncreel.render.calibrate import PROBE_FRAMES, calibrate_render
from ncreel.render.segment import FrameJob, colorbar_extend

#: Steps whose colour limits the probe frames are drawn with: two, so that a first step
#: without data (a model's spin-up) still gives limits in most files.
PROBE_LIMIT_STEPS = 2


def calibrate_movie(selection, render: RenderSettings, encode: EncodeSettings, *,
                    n_time: int, vmin: float | None = None, vmax: float | None = None,
                    overlays: dict | None = None, panels: dict | None = None,
                    probe_frames: int = PROBE_FRAMES, target_minutes: float = 10.0,
                    frames_per_shard: int | None = None, workers: int = 1,
                    cores: int | None = None) -> Calibration:
    """Measure a shard job's memory and seconds per frame on probe frames of the input.

    Parameters
    ----------
    selection : ncreel.config.settings.SeriesSelection
        The movie's series (its region, its steps).
    render, encode : RenderSettings, EncodeSettings
        As for a shard job.
    n_time : int
        Steps the movie shows.
    vmin, vmax, overlays, panels
        As for the statistics job (:func:`ncreel.jobs.stats.write_statistics`): the probe
        frames' limits are computed as it computes the movie's, over
        :data:`PROBE_LIMIT_STEPS` steps.
    probe_frames, target_minutes, frames_per_shard, workers, cores
        As for :func:`ncreel.render.calibrate.calibrate_render`.

    Returns
    -------
    Calibration
        See :func:`ncreel.render.calibrate.calibrate_render`.

    Raises
    ------
    NcreelError
        If the input cannot be read or ffmpeg fails.
    """
    with open_selection(selection) as shown:
        limits = probe_statistics(shown, PROBE_LIMIT_STEPS, vmin=vmin, vmax=vmax,
                                  overlays=overlays, panels=panels)
    job = FrameJob(series=selection, render=render, encode=encode, vmin=limits["vmin"],
                   vmax=limits["vmax"], overlay_limits=limits.get("overlays"),
                   extend=colorbar_extend(render.colorbar_extend, limits),
                   panel_limits=limits.get("panels"))
    return calibrate_render(job, n_time=n_time, probe_frames=probe_frames,
                            target_minutes=target_minutes,
                            frames_per_shard=frames_per_shard, workers=workers, cores=cores)
