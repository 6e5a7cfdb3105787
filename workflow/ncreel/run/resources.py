"""Memory and runtime each job declares to Snakemake (``resources: mem_mb, runtime``).

Estimates are deliberately simple, explicit formulas; each grows linearly with Snakemake's
``attempt`` so that a job killed for memory is retried asking for more.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable

from ncreel.config.settings import Calibration
from ncreel.core.errors import NcreelError
from ncreel.input.inputcheck import MAX_TIME_STEPS
from ncreel.input.source import BLOCK_BYTES, MAX_BLOCK_CELLS

#: Calibrated memory is multiplied by this: the calibration measures the same code on the
#: same input, so the margin only has to cover frame-to-frame variation (text extents,
#: encoder look-ahead) and a rows pass that outgrows the render pass.
MEM_SAFETY = 1.2
#: Calibrated time is multiplied by this: shared nodes run at varying speed.
RUNTIME_SAFETY = 2.0

#: Resident memory of a Python process with numpy, xarray, netCDF4 and matplotlib imported.
BASE_MB = 250


#: Memory of Snakemake's own processes inside a scheduler job (the job's ``snakemake`` and,
#: on Slurm, the ``srun`` step's): the scheduler counts it against the job's limit, while
#: Snakemake's benchmark ``max_rss`` (and a local run) sees only the rule's own process.
#: Measured on the CI Slurm: shard jobs peaked at 296-339 MB for a 120 MB render process;
#: later, with both outputs, a shard's ``srun`` step peaked at 706 MiB (Slurm's sum of its
#: processes' RSS) while the rule's process tree peaked at 382 MiB: 324 MiB around it.
SCHEDULER_JOB_OVERHEAD_MB = 350

#: What a shard's rows pass holds beyond its data (:func:`_rows_mb`): its libraries
#: (polars, the COPY writer), polars' thread pool and the writer thread's buffers, in MiB.
#: Measured on the demo with rows written beside the frames: the worker peaked at 329 MiB,
#: against the 241.5 MiB calibration measured drawing the same frames alone; of those
#: 87.5 MiB the data terms counted apart (its rows block, the queued blocks) are 35 MiB
#: there, so this over-counts by about that on small grids: a bound, not a fit.
ROWS_PASS_MB = 90
#: The statistics job's counts of each value (:class:`ncreel.jobs.stats._KeyCounts`): at
#: most ``KEY_BINS_MAX`` (2**23) int64 counts, one slice's counts as large, and one
#: slice's keys (``KEY_SLICE``, 2**22, int64). MB.
VALUE_COUNTS_MB = (2 * (1 << 23) + (1 << 22)) * 8 / 1e6

#: ``mem_mb`` (first attempt, MB) of the rule's own process for rules whose memory does
#: not depend on the data: one Python process (:data:`BASE_MB` when it imports the
#: plotting stack) and what it streams; Snakemake's per-job overhead is added apart
#: (:func:`job_overhead_mb`).
FIXED_MEM_MB = {
    "calibrate_render": 2000,  # unknown until measured: one worker and its encoder
    "reduce_cells": BASE_MB,
    "load_database": 150,
    "concat_segments": 150,
    "preview": 150,
    "resources_report": 150,
    "contact_sheet": BASE_MB,
}
#: ``runtime`` (first attempt, minutes) of the rules whose time does not depend on the data.
FIXED_RUNTIME_MIN = {
    "calibrate_render": 10,
    "reduce_cells": 30,
    "load_database": 60,
    "concat_segments": 10,
    "preview": 5,
    "resources_report": 5,
    "contact_sheet": 5,
}


def fixed_mem_mb(rule: str, attempt: int = 1) -> int:
    """``mem_mb`` of `rule`'s own process from :data:`FIXED_MEM_MB`, times `attempt`.

    Raises
    ------
    KeyError
        For a rule whose memory depends on the data (it has its own function here).
    """
    return FIXED_MEM_MB[rule] * max(int(attempt), 1)


def fixed_runtime(rule: str, attempt: int = 1) -> int:
    """``runtime`` (minutes) of `rule` from :data:`FIXED_RUNTIME_MIN`, times `attempt`.

    Raises
    ------
    KeyError
        For a rule whose runtime depends on the data.
    """
    return FIXED_RUNTIME_MIN[rule] * max(int(attempt), 1)


#: Set by the ``pbs-pro`` executor in each of its jobs (``qsub -v``): the MB it added to the
#: job's memory request for the job's own Snakemake process
#: (``snakemake_executor_plugin_pbs_pro``'s ``JOB_OVERHEAD_ENV``).
PBS_PRO_JOB_OVERHEAD_ENV = "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB"


def executor_adds_overhead(executor: str | None, environ=None) -> bool:
    """Whether the executor adds Snakemake's per-job overhead to memory requests itself.

    The ``pbs-pro`` executor asks PBS for ``mem_mb`` plus the job's own Snakemake process
    (its ``pbs-pro-job-overhead-mb``), so the workflow must not add it again: true in the
    run's main process (`executor` is ``pbs-pro``) and inside its jobs (where Snakemake
    runs the local executor, and the executor's ``$SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB`` is
    set). The Slurm and cluster-generic executors add nothing.

    Parameters
    ----------
    executor : str or None
        Name of the run's executor plugin (``pbs-pro``, ``slurm``, ``local``...).
    environ : mapping, optional
        Environment to read (default: ``os.environ``).

    Returns
    -------
    bool
    """
    env = os.environ if environ is None else environ
    return executor == "pbs-pro" or bool(env.get(PBS_PRO_JOB_OVERHEAD_ENV))


def job_overhead_mb(separate_job: bool) -> int:
    """Memory of Snakemake's own processes that a job's limit also has to hold, in MB.

    Parameters
    ----------
    separate_job : bool
        True when the job runs as its own scheduler job (a ``snakemake`` process, and on
        Slurm an ``srun`` step, around the rule's process) and the executor does not add
        that memory itself (:func:`executor_adds_overhead`); False for local runs, for
        ``localrules`` under a scheduler, where no such process exists, and under the
        ``pbs-pro`` executor.

    Returns
    -------
    int
        :data:`SCHEDULER_JOB_OVERHEAD_MB` or 0.
    """
    return SCHEDULER_JOB_OVERHEAD_MB if separate_job else 0


def with_overhead(mem_mb: float, overhead_mb: int) -> float:
    """Return a job's memory limit: the rule's `mem_mb`, at least `overhead_mb`, plus it.

    The scheduler adds up the resident memory of each process of the job (Slurm's
    ``jobacct_gather/linux``, PBS's MoM), and a command the job's Snakemake starts is,
    until it executes its program, a copy of that process with the same resident memory:
    for that moment the rule's share holds a second Snakemake. A busy node stretches the
    moment until the scheduler sees it (PBS killed a 5 MB rule's job at 332 MB against a
    305 MB limit; the same job peaks at 170-210 MB on a quiet node). The ``pbs-pro``
    executor applies the same rule to its own overhead.

    Parameters
    ----------
    mem_mb : float
        The rule's own memory, MB.
    overhead_mb : int
        Snakemake's processes in the job, MB (:func:`job_overhead_mb`); 0 adds nothing.

    Returns
    -------
    float
        ``max(mem_mb, overhead_mb) + overhead_mb``, MB.
    """
    return max(mem_mb, overhead_mb) + overhead_mb if overhead_mb else mem_mb


def with_job_overhead(func: Callable, separate_job: Callable[[], bool]) -> Callable:
    """Wrap a rule's ``mem_mb`` function to add :func:`job_overhead_mb` to its value.

    Parameters
    ----------
    func : callable
        The rule's own ``mem_mb`` function; its signature is kept (``functools.wraps``),
        so Snakemake passes it the same arguments.
    separate_job : callable
        Returns whether the job runs as a separate scheduler job (asked at each call:
        inside the scheduler job Snakemake evaluates resources again and must get the
        mem_mb the scheduler was asked for).

    Returns
    -------
    callable
    """

    @functools.wraps(func)
    def mem_mb(*args, **kwargs):
        return with_overhead(func(*args, **kwargs), job_overhead_mb(separate_job()))

    return mem_mb


def chunk_read_mb(chunk_mb: float) -> float:
    """Memory a series' time chunk costs a job that reads it, in MB (not calibrated).

    Twice the chunk held between reads (:meth:`ncreel.input.source.Series.held_chunk_bytes`,
    `chunk_mb`, MiB): the chunk as decoded and, while it is read, the file's raw values
    before mask-and-scale made the decoded copy.
    """
    return 2 * float(chunk_mb) * 2**20 / 1e6


def statistics_mem_mb(*, ny: int, nx: int, attempt: int = 1,
                      max_block_bytes: int = BLOCK_BYTES, chunk_mb: float = 0.0,
                      workers: int = 1) -> int:
    """``mem_mb`` of the statistics job: one block, its mask, (ny, nx) accumulators, counts.

    The counts of each value (:data:`ncreel.jobs.stats.KEY_BINS_MAX`, int64) come with one
    slice's keys and counts beside them (:data:`VALUE_COUNTS_MB`). A block holds at least
    one whole time step (float64), however large. `chunk_mb` is the time chunk the job's
    series hold between reads (MiB, the sum over the series it reads;
    :meth:`ncreel.input.source.Series.held_chunk_bytes`), counted by :func:`chunk_read_mb`.
    With `workers` > 1 (config ``statistics_processes``) each worker process holds all
    of that, and the job's own process the merged accumulators and counts.
    """
    block = max(max_block_bytes, ny * nx * 8)
    one = (BASE_MB + (3 * block + ny * nx * 40) / 1e6 + chunk_read_mb(chunk_mb)
           + VALUE_COUNTS_MB)
    workers = max(int(workers), 1)
    est = one if workers == 1 else workers * one + BASE_MB + ny * nx * 40 / 1e6 + \
        VALUE_COUNTS_MB
    return int(math.ceil(est * 1.5 / 50) * 50) * max(int(attempt), 1)


def calibrate_mem_mb(*, chunk_mb: float = 0.0, attempt: int = 1) -> int:
    """``mem_mb`` of ``calibrate_render``: :data:`FIXED_MEM_MB` and the time chunk it reads.

    `chunk_mb` as for :func:`statistics_mem_mb` (its probes read the input as a shard
    does), rounded up to 50 MB, times `attempt`.
    """
    est = FIXED_MEM_MB["calibrate_render"] + chunk_read_mb(chunk_mb)
    return int(math.ceil(est / 50) * 50) * max(int(attempt), 1)


def transcode_mem_mb(fmt: str, *, width: int, height: int, attempt: int = 1) -> int:
    """``mem_mb`` of the job making ``movie.webm`` or ``movie.gif`` from the MP4 (ffmpeg).

    Measured peaks at 1920 x 1080: VP9 (libvpx, 2 threads, row-mt) 371 MB; the GIF passes
    decode at full size and scale down, well under that. Modelled as 100 MB plus 150 bytes
    per frame pixel, rounded up to 50 MB.
    """
    est = 100 + 150 * int(width) * int(height) / 1e6
    return int(math.ceil(est / 50) * 50) * max(int(attempt), 1)


def transcode_runtime(fmt: str, *, n_frames: int, width: int, height: int,
                      attempt: int = 1) -> int:
    """``runtime`` (minutes) of the job making ``movie.webm`` or ``movie.gif``.

    VP9 at 1920 x 1080 encodes 3-4 frames/s on two cores (measured), so 1 frame/s per
    1080p-sized frame is allowed, 5 minutes at least.
    """
    seconds = int(n_frames) * int(width) * int(height) / (1920 * 1080)
    return max(5, int(math.ceil(seconds / 60))) * max(int(attempt), 1)


def runtime_minutes(n_frames: int, seconds_per_frame: float = 0.5, attempt: int = 1) -> int:
    """Walltime (``runtime`` resource, minutes) for `n_frames` frames, with a 5-minute floor."""
    return max(5, int(math.ceil(n_frames * seconds_per_frame * 2 / 60))) * max(int(attempt), 1)


#: Seconds per time step of a pass over the whole series (statistics, degradation_state).
SERIES_PASS_SECONDS_PER_STEP = 0.05


def series_pass_runtime(n_time: int, attempt: int = 1) -> int:
    """``runtime`` (minutes) of a job streaming the whole series once.

    Used by statistics and degradation_state; :data:`SERIES_PASS_SECONDS_PER_STEP` per step.
    """
    return runtime_minutes(n_time, SERIES_PASS_SECONDS_PER_STEP, attempt)


def _rows_mb(*, ny: int, nx: int, n_frames: int, max_block_cells: int = MAX_BLOCK_CELLS,
             n_columns: int = 8) -> float:
    # The rows pass holds one block (<= max_block_cells values, at least one time step) and
    # its row columns plus the model's temporaries: ~15 bytes per value and column (120 for
    # field's 8; etr_risk's 25-column time course measured ~365, bench/etr_bench.py --only),
    # plus per-cell arrays (~48 bytes per cell).
    cells = ny * nx
    block = max(min(max_block_cells, n_frames * cells), cells)
    return (block * 15 * max(n_columns, 8) + cells * 48) / 2**20


def rows_step_mem_mb(*, ny: int, nx: int) -> int:
    """Least ``mem_mb`` of a ``process_shard`` job: a process whose rows pass holds one step.

    A lower bound known before calibration, used to refuse a grid no job can hold.
    """
    return int(math.ceil((BASE_MB + _rows_mb(ny=ny, nx=nx, n_frames=1)) * MEM_SAFETY / 10) * 10)


#: Blocks of the frames' read a shard job holds for the rows written beside them: the
#: queue's (:data:`ncreel.jobs.shard.QUEUED_BLOCKS`) plus the one being written.
SHARED_BLOCKS = 3


def shared_blocks_mb(*, ny: int, nx: int, max_block_cells: int = MAX_BLOCK_CELLS) -> float:
    """MiB of the frames' blocks queued for the rows written beside them.

    :data:`SHARED_BLOCKS` copies, each bounded here by a rows block (`max_block_cells`
    values, or one time step) at 8 bytes a value: the frames' blocks are smaller
    (``ncreel.render.segment.RENDER_BLOCK_BYTES``, or one step).
    """
    return SHARED_BLOCKS * max(max_block_cells, ny * nx) * 8 / 2**20


#: Resident memory of the input check's child process (``python -m ncreel.input.identity``: the
#: interpreter, netCDF4 and one file's header), in MB; measured 51 MB on the demo input.
#: A shard job runs it before its first read and after its last, beside its own process.
IDENTITY_CHECK_MB = 60


def render_mem_mb_calibrated(calibration: Calibration, *, ny: int, nx: int, n_frames: int,
                             workers: int = 1, attempt: int = 1, n_columns: int = 8,
                             overlap: bool = False, chunk_mb: float = 0.0) -> int:
    """``mem_mb`` of one ``process_shard`` job, from the ``calibrate_render`` measurement.

    One worker's peak is what calibration measured: its process (interpreter, libraries,
    figure, canvas, one block) plus its ffmpeg. With one worker and both outputs
    (`overlap`) the job writes its COPY rows in a second thread while it renders
    (:class:`ncreel.jobs.shard.ShardRowsWriter`): the rows pass and the blocks queued for
    it (:func:`shared_blocks_mb`) are held at the same time as the worker's peak and its
    encoder, so they add up. Otherwise the rows are streamed after the encoder has
    exited, on top of what the render pass left allocated; with several workers each
    spawned worker adds one worker peak and one encoder. After its last read the job
    checks its inputs in a child process (:data:`IDENTITY_CHECK_MB`) beside what the rows
    pass holds. None of it depends on the number of frames: both passes stream bounded
    blocks. A time chunk read whole is held between reads: the calibrated peak has the
    frames' (the probes read as a shard does); the rows pass adds the table's, `chunk_mb`
    (counted also when the rows share the frames' blocks: an upper bound), and its
    libraries and buffers (:data:`ROWS_PASS_MB`: the probes draw frames only).

    Parameters
    ----------
    calibration : Calibration
        Result of :func:`ncreel.render.calibrate.calibrate_render` (uses ``base_mb``,
        ``worker_peak_mb``, ``encoder_peak_mb`` in MiB).
    ny, nx : int
        Grid size.
    n_frames : int
        Frames in the shard (bounds the rows pass's block).
    workers : int
        Render worker processes (the job's ``threads``).
    attempt : int
        Snakemake's attempt counter (1 on the first try).
    n_columns : int
        Columns of the cell model's table (its rows pass grows with them).
    overlap : bool
        The job writes rows and frames (config ``outputs`` both): with one worker they
        overlap.
    chunk_mb : float
        The time chunk the table's series holds between reads (MiB,
        :meth:`ncreel.input.source.Series.held_chunk_bytes`; 0 when the file's steps are
        read alone).

    Returns
    -------
    int
        Megabytes (rounded up to 10), times `attempt`.
    """
    base = float(calibration.base_mb)
    worker = float(calibration.worker_peak_mb)
    encoder = float(calibration.encoder_peak_mb)
    rows = (_rows_mb(ny=ny, nx=nx, n_frames=n_frames, n_columns=n_columns) + float(chunk_mb)
            + ROWS_PASS_MB)
    if workers <= 1 and overlap:
        est = max(worker + encoder + rows + shared_blocks_mb(ny=ny, nx=nx),
                  worker + rows + IDENTITY_CHECK_MB)
    elif workers <= 1:
        est = max(worker + encoder, worker + rows + IDENTITY_CHECK_MB)
    else:
        est = max(base + workers * (worker + encoder), base + rows + IDENTITY_CHECK_MB)
    return int(math.ceil(est * MEM_SAFETY / 10) * 10) * max(int(attempt), 1)


def render_runtime_calibrated(calibration: Calibration, *, n_frames: int, workers: int = 1,
                              attempt: int = 1) -> int:
    """``runtime`` (minutes) of one ``process_shard`` job from the calibrated seconds per frame.

    Start-up plus ``n_frames`` frames at the calibrated rate (divided among `workers`),
    times :data:`RUNTIME_SAFETY` and `attempt`, with a 5-minute floor (schedulers bill and
    plan in coarse steps anyway).
    """
    seconds = (float(calibration.startup_s)
               + n_frames * float(calibration.seconds_per_frame) / max(int(workers), 1))
    return max(5, int(math.ceil(seconds * RUNTIME_SAFETY / 60))) * max(int(attempt), 1)


_OVER_CAP: set[str] = set()


#: Failures that more memory cannot fix (see :data:`ncreel.run.jobrecord.FAILURE_REASONS`).
# ``after_script``: the script itself ended well, so its memory was enough;
# ``not_retried``: it refused to run (the attempt before it was interrupted).
NOT_MEMORY_FAILURES = ("interrupted", "data", "disk", "after_script", "not_retried")


def memory_attempt(attempts: list[dict], attempt: int) -> int:
    """Return the attempt a job's memory is sized for: 1 plus its memory-like failures.

    Snakemake's ``attempt`` counts every retry; memory is raised only for the previous
    attempts of this run that may have run out of it: killed without an ``end`` record
    (the scheduler's or the kernel's memory kill is SIGKILL), or failed with reason
    ``memory`` or an unclassified ``error``. An interruption (Ctrl-C, logout, walltime's
    SIGTERM), bad input, a full disk or a job that failed after its script ended well
    keeps the memory as it was.

    Parameters
    ----------
    attempts : list of dict
        :func:`ncreel.run.jobrecord.read_attempts` of the job, oldest first.
    attempt : int
        Snakemake's attempt number (1 for the first).

    Returns
    -------
    int
        Between 1 and `attempt`.
    """
    attempt = max(int(attempt), 1)
    previous = attempts[-(attempt - 1):] if attempt > 1 else []
    memory_like = sum(1 for a in previous
                      if a.get("status") in ("killed", "running")
                      or (a.get("status") == "failed"
                          and a.get("reason", "error") not in NOT_MEMORY_FAILURES))
    # An attempt that left no record at all (killed before its script started) counts.
    memory_like += max(0, attempt - 1 - len(previous))
    return min(attempt, 1 + memory_like)


def by_memory_failures(func: Callable, attempts_of: Callable) -> Callable:
    """Wrap a rule's ``mem_mb`` function to size it by :func:`memory_attempt`.

    Parameters
    ----------
    func : callable
        The rule's ``mem_mb`` function; its signature is kept (``functools.wraps``) and
        its ``attempt`` argument replaced by the memory attempt.
    attempts_of : callable
        ``attempts_of(wildcards)`` returns the job's attempts
        (:func:`ncreel.run.jobrecord.read_attempts` of its log's attempts record).

    Returns
    -------
    callable
    """

    @functools.wraps(func)
    def mem_mb(*args, **kwargs):
        if "attempt" in kwargs and int(kwargs["attempt"]) > 1:
            kwargs["attempt"] = memory_attempt(attempts_of(args[0]), kwargs["attempt"])
        return func(*args, **kwargs)

    return mem_mb


def said_over_cap(rule: str, func: Callable, cap_mb: Callable[[], float | None]) -> Callable:
    """Wrap a rule's ``mem_mb`` function so that asking above the cap is said, once per rule.

    Snakemake silently lowers a job's ``mem_mb`` to ``--resources mem_mb`` (a profile's
    limit); a job that then gets less than it declared could be killed for memory with no
    word why. The wrapper returns `func`'s value unchanged and, the first time it exceeds
    ``cap_mb()``, prints one ``ncreel: warning:`` line on stderr.

    Parameters
    ----------
    rule : str
        The rule's name, for the message.
    func : callable
        The rule's ``mem_mb`` function (MB); its signature is kept (``functools.wraps``), so
        Snakemake passes it the same arguments (wildcards, input, threads, attempt).
    cap_mb : callable
        Returns the cap in MB, or None for no cap.

    Returns
    -------
    callable
    """

    @functools.wraps(func)
    def mem_mb(*args, **kwargs):
        value = func(*args, **kwargs)
        cap = cap_mb()
        if cap is not None and value > cap and rule not in _OVER_CAP:
            _OVER_CAP.add(rule)
            print(f"ncreel: warning: {rule} declares mem_mb={int(value)}, above the mem_mb "
                  f"limit {int(cap)} (--resources mem_mb or the profile's resources), which "
                  "Snakemake gives it instead: if it is killed for memory, raise the limit "
                  "or run on a bigger node", file=sys.stderr)
        return value

    return mem_mb


def check_series_size(*, n_time: int, ny: int, nx: int, variable: str,
                      mem_cap_mb: float | None) -> None:
    """Stop, before any job, on a series no job can hold within the memory cap.

    Parameters
    ----------
    n_time, ny, nx : int
        The series' shape.
    variable : str
        Its name, for the message.
    mem_cap_mb : float or None
        The largest ``mem_mb`` one job may declare (Snakemake's ``--resources mem_mb``,
        which silently lowers a larger request to it); None for no cap.

    Raises
    ------
    NcreelError
        More than :data:`~ncreel.input.inputcheck.MAX_TIME_STEPS` steps, or the statistics
        job (per-cell accumulators) or a process_shard's rows pass (one whole time step)
        needs more than `mem_cap_mb`; the message names the size and the limit.
    """
    if n_time > MAX_TIME_STEPS:
        raise NcreelError(f"variable '{variable}' has {n_time} time steps, more than ncreel's "
                          f"limit of {MAX_TIME_STEPS}: split the input into several runs")
    if mem_cap_mb is None:
        return
    needs = {"statistics": statistics_mem_mb(ny=ny, nx=nx),
             "process_shard": rows_step_mem_mb(ny=ny, nx=nx)}
    for rule, mem_mb in needs.items():
        if mem_mb > mem_cap_mb:
            raise NcreelError(
                f"variable '{variable}' has a {ny} x {nx} grid: the {rule} job needs about "
                f"{mem_mb} MB, more than the mem_mb limit of {int(mem_cap_mb)} "
                "(--resources mem_mb / the profile's resources): select a smaller region, "
                "or run on a node with more memory and raise the limit")
