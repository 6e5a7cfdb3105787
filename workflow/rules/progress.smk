# The controller's terminal (and its batch job's log): the run's shard counts, frames/s and
# ETA at a bounded rate while it runs, and a final line (ncreel.progress.RunWatch, from
# the files `ncreel status` reads). Polling starts in onstart (scheduler.smk: Snakemake
# keeps one onstart handler); -n, --dag and --report never reach it, nor do jobs
# (Snakemake starts them with --no-hooks).
from snakemake.logging import logger

from ncreel.progress import watch_run  # noqa: E402

PROGRESS = watch_run(".", RUN, logger.info)


onsuccess:
    PROGRESS.finish(ok=True)


onerror:
    PROGRESS.finish(ok=False)
