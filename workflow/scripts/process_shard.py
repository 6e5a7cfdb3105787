"""Snakemake adapter: write one shard's COPY rows and render its frames into a segment."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.config.settings import (  # noqa: E402
    CellsSettings,
    EncodeSettings,
    RenderSettings,
    SeriesSelection,
)
from ncreel.jobs.shard import run_shard  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402
from ncreel.run.shardplan import Shard  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p, out = snakemake.params, snakemake.output  # noqa: F821
shard = Shard(int(snakemake.wildcards.shard), p.start, p.stop)  # noqa: F821
# Config outputs: without a movie no segment (nor frames), without a table no rows.
run_shard(SeriesSelection.from_params(p.series), shard,
          stats_json=snakemake.input.stats,  # noqa: F821
          cell_mean_npy=snakemake.input.get("cell_mean"),  # noqa: F821
          frames_dir=out.get("frames"), rows_path=out.get("rows"),
          render=RenderSettings.from_params(p.render), segment=out.get("segment"),
          encode=EncodeSettings.from_params(p.encode), cells=CellsSettings.from_params(p.cells),
          png_times=p.png_times, workers=snakemake.threads,  # noqa: F821
          degradation=(snakemake.input.get("degradation"),  # noqa: F821
                       snakemake.input.get("degradation_meta")),  # noqa: F821
          table_paths=({"cells": out.cells, "steps": out.steps}
                       if p.cells["layout"] == "normalised" else None))
