"""Snakemake adapter: join shard COPY files in time order and write the psql load script."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.jobrecord import record_attempt  # noqa: E402
from ncreel.logs import configure  # noqa: E402
from ncreel.pg.reduce import reduce_cells  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
reduce_cells(snakemake.input.rows, snakemake.output.table, snakemake.output.sql,  # noqa: F821
             columns=p.columns, table=p.table, run=p.run, note=p.note)
