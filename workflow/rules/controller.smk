# What the controller (the snakemake process that runs or submits every job) does besides
# running jobs, from onstart (scheduler.smk: Snakemake keeps one onstart handler); -n,
# --dag and --report never reach it, nor do jobs (Snakemake starts them with --no-hooks):
# - records the settings the run runs with, so that `snakemake --report` reports this run
#   with them (ncreel.lastrun; read in common.smk);
# - says the run's shard counts, frames/s and ETA in its terminal (and its batch job's
#   log) at a bounded rate while it runs, and a final line (ncreel.runwatch.RunWatch, from
#   the files `ncreel status` reads);
# - on error, says the one line of each job that refused to run again after a signal
#   stopped it (ncreel.jobrecord.retry_verdict): on a scheduler a job's stderr reaches
#   only its log.
import time
from pathlib import Path

from snakemake.logging import logger

from ncreel.jobrecord import refused_lines
from ncreel.lastrun import record_run
from ncreel.runwatch import watch_run

PROGRESS = watch_run(".", RUN, logger.info)
CONTROLLER_START = time.time()


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
    if (
        workflow.executor_plugin
        and workflow.executor_plugin.common_settings.non_local_exec
    ):
        for line in refused_lines(
            Path(LOGS).rglob("*.attempts.jsonl"), CONTROLLER_START
        ):
            logger.error(line)
