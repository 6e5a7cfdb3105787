"""Snakemake adapter: render probe frames, record peak memory and seconds per frame."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.config.settings import (  # noqa: E402
    OUTPUTS,
    EncodeSettings,
    RenderSettings,
    SeriesSelection,
)
from ncreel.input.identity import check_against_stats  # noqa: E402
from ncreel.render.calibrate import calibrate_render  # noqa: E402
from ncreel.render.segment import FrameJob, colorbar_extend  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
check_against_stats(snakemake.input.stats)  # noqa: F821
stats = json.loads(Path(snakemake.input.stats).read_text())  # noqa: F821
render = RenderSettings.from_params(p.render)
if "movie" not in (p.get("outputs") or OUTPUTS):  # config outputs [table]: nothing drawn
    from ncreel.config.settings import CellsSettings
    from ncreel.jobs.tablecalib import calibrate_table

    calibrate_table(SeriesSelection.from_params(p.series),
                    CellsSettings.from_params(p.cells), render=render,
                    encode=EncodeSettings.from_params(p.encode), n_time=p.n_time,
                    probe_frames=p.probe_frames, target_minutes=p.target_minutes,
                    frames_per_shard=p.frames_per_shard, cores=p.cores
                    ).to_json(snakemake.output.calibration)  # noqa: F821
else:
    job = FrameJob(series=SeriesSelection.from_params(p.series), render=render,
                   encode=EncodeSettings.from_params(p.encode), vmin=stats["vmin"],
                   vmax=stats["vmax"], overlay_limits=stats.get("overlays"),
                   extend=colorbar_extend(render.colorbar_extend, stats),
                   panel_limits=stats.get("panels"))
    result = calibrate_render(job, n_time=p.n_time, probe_frames=p.probe_frames,
                              target_minutes=p.target_minutes,
                              frames_per_shard=p.frames_per_shard, workers=p.workers,
                              cores=p.cores)
    result.to_json(snakemake.output.calibration)  # noqa: F821
