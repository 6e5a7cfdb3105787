"""Snakemake adapter: contact sheet of the kept PNG frames, and the run-plan page."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.config.settings import Calibration, SeriesSelection  # noqa: E402
from ncreel.report.contactsheet import (  # noqa: E402
    contact_sheet,
    frame_labels,
    plan_page,
    sampled_frames,
)
from ncreel.run.jobrecord import attempts_path, read_attempts, record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p, inp, out = snakemake.params, snakemake.input, snakemake.output  # noqa: F821
if out.get("sheet"):  # config outputs: movie (a run without one has no frames)
    frames = sampled_frames(inp.frames)
    labels = frame_labels(frames)  # each PNG carries its time label
    if labels is None:  # frames written by an earlier version: the input's labels
        # (imported only here: xarray and matplotlib's map code cost a second of CPU)
        from ncreel.region.selection import open_selection
        from ncreel.render.segment import time_labels

        with open_selection(SeriesSelection.from_params(p.series)) as series:
            labels = dict(enumerate(time_labels(series)))
    contact_sheet(frames, labels, out.sheet,
                  title=f"run {p.run}: frames kept as PNG (t = frame index)")
shards = []
for s in p.shards:
    attempts = read_attempts(attempts_path(p.shard_logs[s["shard"]]))
    last = attempts[-1] if attempts else {}
    shards.append({**s, "mem_mb": last.get("mem_mb"), "runtime": last.get("runtime"),
                   "attempts": len(attempts)})
plan_page(out.plan, stats=json.loads(Path(inp.stats).read_text()),
          configured={"vmin": p.vmin, "vmax": p.vmax},
          calibration=Calibration.from_json(inp.calibration), shards=shards,
          title=f"run {p.run}: colour limits, calibration, shard plan")
