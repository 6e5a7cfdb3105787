# ncreel: a NetCDF time series -> a movie and a per-grid-cell PostgreSQL COPY table.
# Rules live in workflow/rules/, logic in the ncreel package (workflow/ncreel/).
from snakemake.utils import min_version

min_version("9.0")


# The run's settings: a run file (--configfile), else the working directory's
# config/config.yaml (the demo's, in this directory) with --config over it. A directory
# without one takes the run from --config alone; what it lacks is one ncreel line.
if os.path.isfile("config/config.yaml"):

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
        # config outputs: movie, table or both
        MOVIE_OUTPUTS,
        TABLE_OUTPUTS,
        rules.resources_report.output,
        rules.contact_sheet.output,
