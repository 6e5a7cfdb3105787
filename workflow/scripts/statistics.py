"""Snakemake adapter: series statistics (colour limits, per-cell means)."""

import sys
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.config.settings import OUTPUTS, SeriesSelection  # noqa: E402
from ncreel.jobs.stats import write_statistics  # noqa: E402
from ncreel.region.selection import open_selection, table_series  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p, out = snakemake.params, snakemake.output  # noqa: F821
selection = SeriesSelection.from_params(p.series)
outputs = p.get("outputs") or OUTPUTS  # config outputs: only what they need
with open_selection(selection) as shown, (
        table_series(selection, shown) if "table" in outputs else nullcontext(shown)) as table:
    write_statistics(table, out.stats, out.get("cell_mean"), vmin=p.vmin, vmax=p.vmax,
                     limits_series=None if table is shown or "movie" not in outputs
                     else shown,
                     overlays=p.overlays, panels=p.get("panels"), outputs=outputs,
                     selection=selection, workers=snakemake.threads)  # noqa: F821
