"""The ``qsub`` argument list of a job, the wrapper it runs, and the memory it asks for.

Standard library only.
"""

from __future__ import annotations

import fnmatch
import math
import os
import shlex
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from snakemake_executor_plugin_pbs_pro.state import safe_name

#: Environment variables never handed to ``qsub``, nor to a job: a job's
#: ``Variable_List`` (what ``qsub -v`` gives it) is shown by ``qstat -f`` to every user of
#: the server while ``query_other_jobs`` is true (OpenPBS's default).
SECRET_ENV = ("PGPASSWORD",)

#: What every job is given from the submitting environment, when set (``qsub -v NAME``:
#: the value is qsub's own), instead of all of it (``-V``, which showed every token and
#: cloud key of the user's shell to every user of the server): the run's Python, programs
#: and libraries (``PATH``, ``LD_LIBRARY_PATH``, a virtualenv's or conda's variables,
#: ``PYTHON*``), the locale, and Snakemake's own variables. A name ending in ``*`` is a
#: prefix. The ``pbs-pro-env`` setting and Snakemake's ``--envvars`` add names.
JOB_ENV = ("PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "LC_*", "TZ", "PYTHONPATH",
           "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONUSERBASE", "PYTHONUNBUFFERED",
           "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS", "PYTHONIOENCODING", "VIRTUAL_ENV",
           "CONDA_*", "MAMBA_EXE", "MAMBA_ROOT_PREFIX", "SNAKEMAKE_*")

#: Characters ``qsub -v`` cannot carry in a value: OpenPBS 23.06 refuses a quote
#: ("cannot send environment with the job") and doubles a backslash.
QSUB_V_UNSAFE = ("'", '"', "\\")


def job_env_names(extra: Iterable[str] = (), environ: Mapping[str, str] | None = None
                  ) -> tuple[list[str], list[str]]:
    """Names of the variables a job gets with ``qsub -v``, and those it cannot get.

    Parameters
    ----------
    extra : iterable of str
        More names (or ``PREFIX*``) beside :data:`JOB_ENV`: the ``pbs-pro-env`` setting,
        Snakemake's ``--envvars``.
    environ : mapping, optional
        The submitting environment (default ``os.environ``).

    Returns
    -------
    names : list of str
        Sorted names set in `environ` that :data:`JOB_ENV` or `extra` name, never one of
        :data:`SECRET_ENV`.
    unsafe : list of str
        Those of them left out because their value holds a character ``qsub -v`` cannot
        carry (:data:`QSUB_V_UNSAFE`).
    """
    environ = os.environ if environ is None else environ
    wanted = [w.strip() for w in (*JOB_ENV, *extra) if w and w.strip()]
    names = sorted(n for n in environ if n not in SECRET_ENV
                   and any(fnmatch.fnmatchcase(n, w) for w in wanted))
    unsafe = [n for n in names if any(c in environ[n] for c in QSUB_V_UNSAFE)]
    return [n for n in names if n not in unsafe], unsafe


def qsub_environment(environ=None) -> dict:
    """Return the environment ``qsub``, ``qstat`` and ``qdel`` run with.

    That is `environ` (default ``os.environ``) without :data:`SECRET_ENV`.
    """
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k not in SECRET_ENV}


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=qsub_environment())


def walltime(minutes: float) -> str:
    """PBS ``HH:MM:SS`` for `minutes` (rounded up to whole minutes, at least 1)."""
    total = max(1, int(math.ceil(float(minutes))))
    return f"{total // 60:02d}:{total % 60:02d}:00"

def parse_walltime(text: str) -> int:
    """Minutes in a ``HH:MM:SS`` walltime."""
    parts = [int(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return h * 60 + m + (1 if s else 0)

def job_name(props: dict, prefix: str = "nc") -> str:
    """Return a PBS-safe job name: ``[A-Za-z0-9_.-]``, starting with a letter, <= 64."""
    if props.get("type") == "group":
        base = f"group_{props.get('groupid', '')}"
    else:
        wc = "_".join(str(v) for v in (props.get("wildcards") or {}).values())
        base = f"{props.get('rule', 'job')}_{wc}" if wc else str(props.get("rule", "job"))
    name = safe_name(f"{prefix}_{base}", limit=64)
    return name if name[0].isalpha() else f"j{name}"[:64]

#: Resident memory of the Snakemake process that runs a job inside its PBS job (with the
#: job's shells), in MB; PBS's MoM counts it against the job's ``mem`` as it counts the
#: rule's own processes. Measured on OpenPBS 23.06 with Snakemake 9.27 (Python 3.11): for
#: a Snakefile that imports nothing, a rule that only sleeps used ``resources_used.mem`` =
#: 173 MB, of which the job's ``python -m snakemake`` process had a peak (``VmHWM``) of
#: 160 MB; a Snakefile that imports the scientific stack at parse time (ncreel's: numpy,
#: xarray, matplotlib) adds about 70 MB to that (226 MB peak for ``snakemake -n``), and its
#: shard jobs used 515-545 MB for a rule process declared at 300 MB. 300 covers both; the
#: setting ``pbs-pro-job-overhead-mb`` changes it.
DEFAULT_JOB_OVERHEAD_MB = 300

#: Environment variable that tells a job's own Snakemake how many MB the executor added
#: to its ``mem`` request (so a workflow that adds such an overhead itself can leave it out).
JOB_OVERHEAD_ENV = "SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB"


def request_mem_mb(mem_mb: float, job_overhead_mb: int = DEFAULT_JOB_OVERHEAD_MB) -> int:
    """Return the ``mem`` (MB) to ask PBS for: the rule's `mem_mb` plus Snakemake's own.

    A PBS job runs the rule inside a ``snakemake`` process of its own, and MoM kills the
    job (``Exit_status`` −27, JOB_EXEC_KILL_MEM) when all its processes together exceed
    ``mem``: a rule declaring ``mem="5MB"`` would be killed at once. So the request is the
    rule's own declared memory (what its commands need) plus `job_overhead_mb`, and the
    rule's share is at least `job_overhead_mb`: MoM adds up the resident memory of each
    process of the job, and a command the job's Snakemake starts is, until it executes
    its program, a fork of that process with the same resident memory, so for that moment
    Snakemake counts twice. On a busy node the moment is long enough for MoM to see it:
    a rule declaring 5 MB (``mem=305mb``) whose Snakemake started commands in a loop was
    killed at 332 MB while four other processes kept both cores busy, and two CI jobs at
    ``mem=305mb`` and ``mem=320mb`` were killed at 376-408 MB two seconds after they
    started; the same jobs peak at 170-210 MB on a quiet node.

    Parameters
    ----------
    mem_mb : float
        The job's ``mem_mb`` resource, MB (Snakemake derives it from ``mem`` too).
    job_overhead_mb : int
        Memory of the job's own Snakemake process, MB (:data:`DEFAULT_JOB_OVERHEAD_MB`).

    Returns
    -------
    int
        ``max(ceil(mem_mb), job_overhead_mb) + job_overhead_mb``, MB.

    Raises
    ------
    ValueError
        When `job_overhead_mb` is negative.
    """
    if job_overhead_mb < 0:
        raise ValueError(f"pbs-pro-job-overhead-mb must be 0 or more, got {job_overhead_mb}")
    return max(int(math.ceil(float(mem_mb))), int(job_overhead_mb)) + int(job_overhead_mb)


def build_qsub(props: dict, jobscript: str, *, queue: str | None, account: str | None,
               log_dir: str, max_walltime: str | None = None, node_cores: int | None = None,
               node_mem_gb: int | None = None, default_mem_mb: int = 1000,
               default_runtime: int = 30, extra_l: list[str] | None = None,
               prefix: str = "nc", array_size: int | None = None,
               log_tag: str | None = None, job_overhead_mb: int = 0,
               env: Iterable[str] = ()) -> list[str]:
    """Return the ``qsub`` argument list for one Snakemake job (no shell involved).

    One ``-l select=1:ncpus=N:mem=XMB,walltime=HH:MM:SS`` (Slurm's Torque wrapper keeps
    only the last ``-l``, PBS Pro accepts the combined form). With `node_cores` the job
    asks for a whole node (``ncpus=node_cores:mem=node_mem_gbGB``): for queues that
    charge whole nodes anyway (Derecho ``main``). With `array_size` N (>= 2, OpenPBS
    refuses smaller ranges) the job is an array ``-J 0-(N-1)`` whose sub-jobs all get
    these resources, each its own log ``<name>.<log_tag>.<index>.log``. The ``mem`` asked
    for is :func:`request_mem_mb` of the job's ``mem_mb`` and `job_overhead_mb`, which the
    job's own Snakemake learns from ``$SNAKEMAKE_PBS_PRO_JOB_OVERHEAD_MB`` (``qsub -v``).
    The job gets the variables named in `env` (:func:`job_env_names`) from qsub's
    environment, ``-v NAME,...``, and no others (never ``-V``).
    """
    res = props.get("resources") or {}
    threads = max(1, int(props.get("threads") or 1))
    mem_mb = request_mem_mb(res.get("mem_mb") or default_mem_mb, job_overhead_mb)
    minutes = float(res.get("runtime") or default_runtime)
    if max_walltime:
        minutes = min(minutes, parse_walltime(max_walltime))
    if node_cores:
        if threads > node_cores:
            raise ValueError(f"job wants {threads} cores; a node has {node_cores}")
        chunk = f"select=1:ncpus={node_cores}"
        chunk += f":mem={node_mem_gb}GB" if node_mem_gb else ""
    else:
        chunk = f"select=1:ncpus={threads}:mem={mem_mb}MB"
    limits = ",".join([chunk, f"walltime={walltime(minutes)}", *(extra_l or [])])
    name = job_name(props, prefix)
    tag = log_tag or props.get("jobid", "x")
    if array_size is not None:
        if array_size < 2:
            raise ValueError(f"a PBS job array needs at least 2 sub-jobs, got {array_size}")
        log = Path(log_dir) / f"{name}.{tag}.^array_index^.log"
    else:
        log = Path(log_dir) / f"{name}.{tag}.log"
    cmd = ["qsub", "-N", name, "-j", "oe", "-o", str(log), "-l", limits]
    # Always set, 0 included: it also tells the job's own Snakemake (and the workflow) that
    # this executor submitted it, which decides itself whether a failed job is resubmitted.
    variables = [n for n in env if n != JOB_OVERHEAD_ENV]
    variables.append(f"{JOB_OVERHEAD_ENV}={int(job_overhead_mb)}")
    cmd += ["-v", ",".join(variables)]
    if array_size is not None:
        cmd += ["-J", f"0-{array_size - 1}"]
    if account:
        cmd += ["-A", account]
    if queue:
        cmd += ["-q", queue]
    return [*cmd, str(jobscript)]

def write_wrapper(jobscript: str | os.PathLike, state_dir: str | os.PathLike) -> Path:
    """Write a job script that runs `jobscript` and records its exit status by job id."""
    jobscript = Path(jobscript).resolve()
    state = Path(state_dir).resolve()
    state.mkdir(parents=True, exist_ok=True)
    wrapper = jobscript.with_name(jobscript.name + ".pbs.sh")
    wrapper.write_text(
        "#!/bin/bash\n"
        "# Written by snakemake_executor_plugin_pbs_pro: runs the Snakemake jobscript,\n"
        "# records its exit status.\n"
        f"/bin/sh {shlex.quote(str(jobscript))}\n"
        "status=$?\n"
        'id="${PBS_JOBID:-${SLURM_JOB_ID:-unknown}}"\n'
        "name=$(printf '%s' \"$id\" | tr -c 'A-Za-z0-9_.-' '_')\n"
        f"dir={shlex.quote(str(state))}\n"
        "printf '%s\\n' \"$status\" > \"$dir/$name.exit.tmp\" && "
        "mv -f \"$dir/$name.exit.tmp\" \"$dir/$name.exit\"\n"
        'exit "$status"\n'
    )
    wrapper.chmod(0o755)
    return wrapper

class QsubError(RuntimeError):
    """``qsub`` refused a job (its message says why: unknown queue, bad resources...)."""

def run_qsub(cmd: list[str], runner=_run) -> str:
    """Run the ``qsub`` argument list `cmd` (no shell); return the job id it printed.

    The exact command is saved next to the job's log (``-o`` path, suffix ``.qsub``)
    for post-mortems.

    Raises
    ------
    QsubError
        If ``qsub`` fails or prints no job id.
    """
    log = cmd[cmd.index("-o") + 1].replace(".^array_index^", "")
    Path(log).with_suffix(".qsub").write_text(shlex.join(cmd) + "\n")
    proc = runner(cmd, timeout=120)
    if proc.returncode != 0:
        raise QsubError(f"{shlex.join(cmd)} failed (exit {proc.returncode}): "
                        f"{proc.stderr.strip()}")
    jobid = proc.stdout.strip().splitlines()[0].strip() if proc.stdout.strip() else ""
    if not jobid:
        raise QsubError(f"qsub printed no job id: {shlex.join(cmd)}")
    return jobid
