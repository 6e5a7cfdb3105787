# ncreel: a NetCDF time series -> a movie and a per-grid-cell PostgreSQL COPY table.
# Rules live in workflow/rules/, logic in the ncreel package (workflow/ncreel/).
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/statistics.smk"
include: "workflow/rules/render.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/movie.smk"
include: "workflow/rules/controller.smk"
include: "workflow/rules/scheduler.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        MOVIE,
        [f"{OUT}/movie.{fmt}" for fmt in sorted(set(config["formats"]) - {"mp4"})],
        PREVIEW,
        COPY_FILE,
        f"{OUT}/cells.sql",
        LOAD_OUTPUTS,
        rules.resources_report.output,
        rules.contact_sheet.output,
