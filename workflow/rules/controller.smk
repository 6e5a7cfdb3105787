# What the controller (the snakemake process that runs or submits every job) does besides
# running jobs, from onstart (scheduler.smk: Snakemake keeps one onstart handler); -n,
# --dag and --report never reach it, nor do jobs (Snakemake starts them with --no-hooks):
# - records the settings the run runs with, so that `snakemake --report` reports this run
#   with them (ncreel.lastrun; read in common.smk);
# - says the run's shard counts, frames/s and ETA in its terminal (and its batch job's
#   log) at a bounded rate while it runs, and a final line (ncreel.runwatch.RunWatch, from
#   the files `ncreel status` reads).
from snakemake.logging import logger

from ncreel.lastrun import record_run
from ncreel.runwatch import watch_run

PROGRESS = watch_run(".", RUN, logger.info)


def controller_started():
    """Record the run's settings and start its progress lines (called by onstart)."""
    _given = workflow.config_settings
    try:
        record_run(config, _given.configfiles, _given.config)
    except OSError as err:
        logger.warning(
            f"ncreel: warning: the run's settings were not recorded ({err}): "
            "give its run file to --report"
        )
    PROGRESS.start()


onsuccess:
    PROGRESS.finish(ok=True)


onerror:
    PROGRESS.finish(ok=False)
