"""Snakemake adapter: per-cell degradation time at shard starts (etr_risk pre-pass)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.cells.soil import write_series_degradation_state  # noqa: E402
from ncreel.config.settings import CellsSettings, SeriesSelection  # noqa: E402
from ncreel.input.identity import check_against_stats  # noqa: E402
from ncreel.region.selection import open_selection  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p, out = snakemake.params, snakemake.output  # noqa: F821
cells = CellsSettings.from_params(p.cells)
check_against_stats(snakemake.input.stats)  # noqa: F821
# The cell model's state belongs to the table's cells (its own extent with cells.region,
# else the movie's region).
with open_selection(SeriesSelection.from_params(p.series).table_selection()) as series:
    write_series_degradation_state(series, cells.params, p.starts, out.state, out.meta)
