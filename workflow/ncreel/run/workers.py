"""Run one job's parts in fresh worker processes, in order, and stop them together.

A shard's render workers (:func:`ncreel.render.segment.render_shard`) and the statistics'
time ranges (:func:`ncreel.jobs.stats.series_statistics`) use it: each part is a call
of a module-level function in a ``spawn`` process (no inherited pyplot, file or thread
state), and a stop signal or a failed part stops every other part at once.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor


@contextlib.contextmanager
def worker_pool(n: int) -> Iterator[Callable[[Sequence[tuple[Callable, tuple, dict]]], list]]:
    """Yield a runner of calls in `n` worker processes, kept for several rounds of calls.

    A job whose second round depends on the first (the statistics' second pass) starts
    its processes, and imports its modules in them, once.

    Parameters
    ----------
    n : int
        Worker processes: at least the calls of any one round.

    Yields
    ------
    callable
        ``run(calls)``: as :func:`run_in_workers`, in this pool.
    """
    ctx = multiprocessing.get_context("spawn")
    with _main_not_reimported(), ProcessPoolExecutor(
            max_workers=n, mp_context=ctx, initializer=_worker_signals) as pool:
        def run(calls):
            futures = [pool.submit(fn, *args, **kwargs) for fn, args, kwargs in calls]
            try:
                return [f.result() for f in futures]  # in submission order
            except BaseException:
                # Interrupted (or a part failed): stop the other workers now; leaving
                # the pool would wait for each to finish its whole part.
                for child in multiprocessing.active_children():
                    child.terminate()
                raise

        yield run


def run_in_workers(calls: Sequence[tuple[Callable, tuple, dict]]) -> list:
    """Run each ``(function, args, kwargs)`` of `calls` in its own worker process.

    Parameters
    ----------
    calls : sequence of (callable, tuple, dict)
        Module-level functions (picklable, as are their arguments) with their positional
        and keyword arguments; one worker process each, all at once.

    Returns
    -------
    list
        Each call's return value, in the order of `calls`.

    Raises
    ------
    BaseException
        The first failed call's exception (in the order of `calls`), or the interrupt
        that stopped the parent; the other workers are terminated first rather than
        waited for.
    """
    with worker_pool(len(calls)) as run:
        return run(calls)


def _worker_signals() -> None:
    # A worker stops at once and quietly on a stop signal (the job's process group gets
    # Ctrl-C, the scheduler's kill): the job itself says why, in one line.
    from ncreel.run.logs import STOP_SIGNALS

    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda signum, frame: os._exit(128 + signum))


@contextlib.contextmanager
def _main_not_reimported():
    # A spawned child re-runs the parent's __main__ file to find pickled functions. Under
    # Snakemake that file is the rule's script, which fails outside Snakemake (no
    # `snakemake` object) and would redo the job; the workers only need ncreel, so hide
    # the main file from multiprocessing while the pool starts its processes.
    main = sys.modules.get("__main__")
    saved = getattr(main, "__file__", None)
    if saved is not None:
        del main.__file__
    try:
        yield
    finally:
        if saved is not None:
            main.__file__ = saved
