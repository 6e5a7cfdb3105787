"""Snakemake adapter: COPY the run's rows into PostgreSQL and write the load summary."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.jobrecord import record_attempt  # noqa: E402
from ncreel.load import load_copy, write_summary  # noqa: E402
from ncreel.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
summary = load_copy(snakemake.input.table, conninfo=p.conninfo, table=p.table,  # noqa: F821
                    run=p.run, columns=p.columns)
write_summary(summary, snakemake.output.summary)  # noqa: F821
