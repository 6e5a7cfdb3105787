"""Snakemake adapter: series statistics (colour limits, per-cell means)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.jobrecord import record_attempt  # noqa: E402
from ncreel.logs import configure  # noqa: E402
from ncreel.selection import open_selection, table_series  # noqa: E402
from ncreel.settings import SeriesSelection  # noqa: E402
from ncreel.stats import write_statistics  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
selection = SeriesSelection.from_params(p.series)
with open_selection(selection) as shown, table_series(selection, shown) as table:
    write_statistics(table, snakemake.output.stats, snakemake.output.cell_mean,  # noqa: F821
                     vmin=p.vmin, vmax=p.vmax,
                     limits_series=None if table is shown else shown,
                     overlays=p.overlays, panels=p.get("panels"))
