"""Snakemake adapter: COPY the run's rows into PostgreSQL and write the load summary."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.core.errors import NcreelError  # noqa: E402
from ncreel.pg.load import load_copy, load_normalised, write_summary  # noqa: E402
from ncreel.run.jobrecord import exit_failed, record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
p = snakemake.params  # noqa: F821
# One connection streams the joined file; several load the shard files side by side.
files = snakemake.input.table if p.jobs == 1 else list(snakemake.input.rows)  # noqa: F821
i = snakemake.input  # noqa: F821
try:
    if p.layout == "normalised":
        summary = load_normalised({"values": files, "cells": i.cells, "steps": i.steps},
                                  conninfo=p.conninfo, table=p.table, run=p.run,
                                  columns=p.columns, jobs=p.jobs)
    else:
        summary = load_copy(files, conninfo=p.conninfo, table=p.table, run=p.run,
                            columns=p.columns, jobs=p.jobs)
except NcreelError as err:
    exit_failed(f"ncreel: error: {err}")
write_summary(summary, snakemake.output.summary)  # noqa: F821
