"""Snakemake executor plugin for PBS Pro (``--executor pbs-pro``).

Every job is submitted with ``qsub`` (an argument list, never a shell string) and asks
for its ``threads``, its ``mem_mb`` plus the job's own Snakemake process, and its
``runtime`` (:mod:`.submit_string`). Ready jobs of the rules named in
``--pbs-pro-array-rules`` that ask for the same resources go out as ONE job array per
batch (:mod:`.arrays`, :mod:`.subjob`). All active jobs are checked with ONE ``qstat -x
-f -t`` per poll (:mod:`.job_status_query`). Ctrl-C deletes the run's jobs
(:mod:`.cancel`); a run started again after a killed one re-attaches to the killed run's
jobs (:mod:`.journal`). See README.md.

The Snakemake side (:class:`Executor`, :class:`ExecutorSettings`, ``common_settings``,
in :mod:`.executor`) is imported when Snakemake first asks for it: the other modules use
the standard library only, so login-node tools (and the array sub-job runner) import
them under any ``python3`` without Snakemake installed.
"""

__version__ = "0.2.0"

#: What Snakemake's plugin registry reads from this package (see :func:`__getattr__`).
_EXECUTOR_NAMES = ("Executor", "ExecutorSettings", "common_settings")


def __getattr__(name: str):
    """Load :mod:`.executor`'s Snakemake classes on first use (PEP 562)."""
    if name in _EXECUTOR_NAMES:
        from snakemake_executor_plugin_pbs_pro import executor

        return getattr(executor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
