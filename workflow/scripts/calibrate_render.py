"""Snakemake adapter: render probe frames, record peak memory and seconds per frame."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.jobrecord import record_attempt  # noqa: E402
from ncreel.logs import configure  # noqa: E402
from ncreel.render.calibrate import calibrate_render, write_calibration  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
stats = json.loads(Path(snakemake.input.stats).read_text())  # noqa: F821
spec = {"series": p.series, "render": p.render, "encode": p.encode,
        "vmin": stats["vmin"], "vmax": stats["vmax"]}
result = calibrate_render(spec, n_time=p.n_time, probe_frames=p.probe_frames,
                          target_minutes=p.target_minutes, frames_per_shard=p.frames_per_shard,
                          workers=p.workers)
write_calibration(result, snakemake.output.calibration)  # noqa: F821
