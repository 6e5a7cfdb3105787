"""Snakemake adapter: series statistics (colour limits, per-cell means)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.jobrecord import record_attempt  # noqa: E402
from ncreel.logs import configure  # noqa: E402
from ncreel.settings import SeriesSelection  # noqa: E402
from ncreel.source import open_selection  # noqa: E402
from ncreel.stats import write_statistics  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
with open_selection(SeriesSelection.from_params(p.series)) as series:
    write_statistics(series, snakemake.output.stats, snakemake.output.cell_mean,  # noqa: F821
                     vmin=p.vmin, vmax=p.vmax)
