# What the controller (the snakemake process that runs or submits every job) does besides
# running jobs, from onstart (scheduler.smk: Snakemake keeps one onstart handler); -n,
# --dag and --report never reach it, nor do jobs (Snakemake starts them with --no-hooks):
# - checks that the run's outputs fit on their disk (ncreel.jobs.diskguard), before any
#   job;
# - records the settings the run runs with, so that `snakemake --report` reports this run
#   with them (ncreel.run.lastrun; read in common.smk);
# - says the run's shard counts, frames/s and ETA in its terminal (and its batch job's
#   log) at a bounded rate while it runs, and a final line (ncreel.cluster.runwatch.RunWatch, from
#   the files `ncreel status` reads);
# - on error, says the one line of each job that refused to run again after a signal
#   stopped it (ncreel.run.jobrecord.retry_verdict): on a scheduler a job's stderr reaches
#   only its log.
import time
from pathlib import Path

from snakemake.logging import logger

from ncreel.jobs.diskguard import guard as disk_guard
from ncreel.run.jobrecord import refused_lines
from ncreel.run.lastrun import record_run
from ncreel.cluster.runwatch import watch_run

# A run without a movie counts its shards' steps, not frames (config outputs).
PROGRESS = watch_run(".", RUN, logger.info, unit="frames" if MOVIE_ON else "steps")
CONTROLLER_START = time.time()


def controller_started():
    """Check the disk, record the run's settings, start its progress lines (onstart)."""
    # Each output's predicted size against the free space where it goes: a run that
    # cannot fit stops here, before any job (ncreel.jobs.diskguard).
    try:
        for _note in disk_guard(RUN_CONFIG):
            print(f"ncreel: note: {_note}", file=sys.stderr)
    except NcreelError as err:
        fail(err)
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
