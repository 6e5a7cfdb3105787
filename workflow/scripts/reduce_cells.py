"""Snakemake adapter: join shard COPY files in time order and write the psql load script."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.pg.reduce import reduce_cells, reduce_normalised  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p, i, o = snakemake.params, snakemake.input, snakemake.output  # noqa: F821
if p.layout == "normalised":
    reduce_normalised(i.rows, i.shard_cells, i.shard_steps, o.table, o.cells, o.steps, o.sql,
                      columns=p.columns, table=p.table, run=p.run, note=p.note)
else:
    reduce_cells(i.rows, o.table, o.sql, columns=p.columns, table=p.table, run=p.run,
                 note=p.note)
