"""Snakemake adapter: render probe frames, record peak memory and seconds per frame."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.config.settings import (  # noqa: E402
    OUTPUTS,
    EncodeSettings,
    RenderSettings,
    SeriesSelection,
)
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
render = RenderSettings.from_params(p.render)
common = {"n_time": p.n_time, "probe_frames": p.probe_frames,
          "target_minutes": p.target_minutes, "frames_per_shard": p.frames_per_shard,
          "cores": p.cores}
if "movie" not in (p.get("outputs") or OUTPUTS):  # config outputs [table]: nothing drawn
    from ncreel.config.settings import CellsSettings
    from ncreel.jobs.tablecalib import calibrate_table

    result = calibrate_table(SeriesSelection.from_params(p.series),
                             CellsSettings.from_params(p.cells), render=render,
                             encode=EncodeSettings.from_params(p.encode), **common)
else:
    from ncreel.jobs.moviecalib import calibrate_movie

    result = calibrate_movie(SeriesSelection.from_params(p.series), render,
                             EncodeSettings.from_params(p.encode), vmin=p.vmin, vmax=p.vmax,
                             overlays=p.overlays, panels=p.get("panels"),
                             workers=p.workers, **common)
result.to_json(snakemake.output.calibration)  # noqa: F821
