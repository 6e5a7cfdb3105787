"""Snakemake adapter: the report's resources page (declared vs measured, every job)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.jobrecord import record_attempt  # noqa: E402
from ncreel.logs import configure  # noqa: E402
from ncreel.report.resources import resources_report  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
out = snakemake.output  # noqa: F821
resources_report(snakemake.params.jobs, figure=out.figure, table=out.table,  # noqa: F821
                 page=out.page, title=f"run {snakemake.params.run}: declared vs measured "  # noqa: F821
                 "resources per job")
