"""Snakemake adapter: the report's resources page (declared vs measured, every job)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.report.resourcepage import resources_report  # noqa: E402
from ncreel.report.summary import write_summary  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
out, p, inp = snakemake.output, snakemake.params, snakemake.input  # noqa: F821
jobs = resources_report(p.jobs, figure=out.figure, table=out.table, page=out.page,
                        title=f"run {p.run}: declared vs measured resources per job")
# config outputs: without a movie (or a table) the page says what the run made
write_summary(out.summary, run=p.run, variable=p.variable, inputs=p.inputs,
              movie=inp.get("movie"), poster=inp.get("poster"),
              copy_file=inp.get("copy_file"), stats_json=inp.stats, fps=p.fps, jobs=jobs,
              shards=p.shards)
