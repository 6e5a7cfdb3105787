# Parse-time set-up: one call checks the config and reads the input's header
# (ncreel.jobs.runconfig.load_config), one makes the run's side effects (start_run). The shard
# plan is read from the calibrate_render checkpoint's output (see shard_plan()).
import os
import signal
import sys
from pathlib import Path

from snakemake.io import apply_wildcards
from snakemake.utils import validate

# workflow/ of this copy of ncreel (this file is workflow/rules/common.smk): also when ncreel
# is a module of another workflow, whose own Snakefile is workflow.basedir.
sys.path.insert(0, str(Path(str(workflow.current_basedir)).parent))

from ncreel.run import resources as res
from ncreel.cells.soil import needs_prepass
from ncreel.config.configcheck import (
    check_run_named,
    report_before_results,
    reporting_only,
)
from ncreel.core.errors import NcreelError
from ncreel.run.incomplete import interrupted_outputs
from ncreel.run.jobrecord import attempts_path, read_attempts
from ncreel.run.lastrun import report_config
from ncreel.render.segment import png_sample
from ncreel.jobs.runconfig import load_config, start_run
from ncreel.config.settings import Calibration
from ncreel.run.shardplan import ShardPlanCache, frame_name


def fail(message):
    """Stop with one line naming the problem (no traceback for bad input)."""
    sys.exit(f"ncreel: error: {message}")


# ncreel as a module of another workflow (`module ncreel: ...` and `use rule * from ncreel
# as ncreel_*`, the way snakedeploy deploys workflows): Snakemake names its rules with the
# user's prefix. Whatever finds a rule by name goes through rule_name() or ncreel_rules();
# the report, the job records and the resources keep ncreel's own names.
_MODIFIER = workflow.modifier  # this module's, while its files are parsed


def rule_name(name):
    """The name Snakemake gives ncreel's rule `name` (with the module's prefix, if any)."""
    return _MODIFIER.modify_rulename(name)


def ncreel_rules():
    """ncreel's rules (Snakemake Rule objects) by ncreel's own names, in definition order.

    Only ncreel's: a workflow that uses ncreel as a module has rules of its own. `rules`
    here is this module's namespace, which Snakemake fills under the names as written.
    """
    return {name: proxy.rule for name, proxy in rules._rules.items()}


if workflow.is_main_process and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background of a script, Snakemake inherits SIGINT ignored and would
    # run on after a Ctrl-C to the script's process group while its jobs stop. An
    # interrupt means stop, for the controller too.
    signal.signal(signal.SIGINT, signal.default_int_handler)


# `snakemake --report` without a run file reports the last run made here, with its
# settings (ncreel.run.lastrun): the config is replaced before it is checked.
if workflow.is_main_process and reporting_only(sys.argv):  # the run's own settings
    _given = workflow.config_settings
    for _note in report_config(config, _given.configfiles, _given.config):
        print(f"ncreel: {_note}", file=sys.stderr)


def mem_cap_mb():
    """The largest mem_mb a job gets: Snakemake lowers larger requests to --resources mem_mb."""
    cap = workflow.global_resources.get("mem_mb")
    cap = getattr(cap, "value", cap)
    return cap if isinstance(cap, int | float) else None


def separate_job(name):
    """Whether jobs of ncreel's rule `name` run as their own scheduler job (Snakemake's processes around
    the rule's own then count against the job's memory) and the executor does not add that
    memory itself (pbs-pro does); False locally and for localrules.
    """
    plugin = workflow.executor_plugin
    remote = plugin is not None and plugin.common_settings.non_local_exec
    if res.executor_adds_overhead(plugin.name if remote else None):
        return False
    # Inside the scheduler job Snakemake evaluates resources again: the job must see (and
    # record, see ncreel.run.jobrecord) the mem_mb the workflow declared.
    return (remote or workflow.remote_exec) and rule_name(
        name
    ) not in workflow._localrules


def local_cores():
    """The cores a local run was given (--cores), which its shard plan fills with at least
    as many shards (ncreel.run.shardplan.fill_cores); None under a cluster executor and
    inside its jobs, where each job gets its own cores and the plan is kept as measured.
    Bounded by this machine's cores: `--jobs unlimited` would plan one-step shards.
    """
    plugin = workflow.executor_plugin
    remote = plugin is not None and plugin.common_settings.non_local_exec
    if remote or workflow.remote_exec:
        return None
    cores = workflow.global_resources.get("_cores")
    cores = getattr(cores, "value", cores)
    if not isinstance(cores, int) or cores < 1:
        return None
    return min(cores, os.cpu_count() or cores)


def rule_mem_mb(name, func=None):
    """The mem_mb of ncreel's `name` rule, its own process's (`func`, else
    ncreel.run.resources.FIXED_MEM_MB) plus Snakemake's per-job overhead where it exists,
    saying once when above the cap.
    """
    if func is None:
        func = lambda wc, attempt: res.fixed_mem_mb(name, attempt)
    # More memory only after failures more memory can fix (not Ctrl-C, bad input, disk).
    func = res.by_memory_failures(func, lambda wc: job_attempts(name, wc))
    return res.said_over_cap(
        name,
        res.with_job_overhead(func, lambda: separate_job(name)),
        mem_cap_mb,
    )


def job_attempts(name, wildcards):
    """The attempts record of the job of ncreel's rule `name` with `wildcards`
    (ncreel.run.jobrecord)."""
    log = ncreel_rules()[name].log[0]
    return read_attempts(
        attempts_path(apply_wildcards(str(log), dict(wildcards.items())))
    )


def attempt_resource(wildcards, attempt):
    """Snakemake's attempt number, as the `attempt` resource of each scripted job.

    With it the job's attempts record (ncreel.run.jobrecord) numbers attempts as Snakemake
    does, also after one that ended without a proper end line.
    """
    return attempt


def rule_runtime(name):
    """The runtime of ncreel's rule `name` (minutes), from
    ncreel.run.resources.FIXED_RUNTIME_MIN."""
    return lambda wc, attempt: res.fixed_runtime(name, attempt)


# The whole config pipeline and the input's header: one call (ncreel.jobs.runconfig), then the
# run's side effects (input links, the config file jobs read, the run lock, a killed
# run's stale lock) in the main process only.
# A run file without `run:` would run as config/config.yaml's `run: demo` and replace the
# demo's results: stop before anything is read.
if workflow.is_main_process:
    try:
        check_run_named(
            workflow.config_settings.configfiles or [],
            workflow.config_settings.config,
        )
    except NcreelError as err:
        fail(err)
try:
    RUN_CONFIG = load_config(
        config,
        # Only --config values (Snakemake's overwrite_config also holds the config files').
        overrides=workflow.config_settings.config or {},
        validate=validate,
        mem_cap_mb=mem_cap_mb(),
        main=workflow.is_main_process,
    )
except NcreelError as err:
    fail(err)
if workflow.is_main_process:
    for _note in RUN_CONFIG.notes:
        print(f"ncreel: note: {_note}", file=sys.stderr)
STALE_LOCK_CLEARED = ""
if workflow.is_main_process:
    try:
        STALE_LOCK_CLEARED = start_run(RUN_CONFIG, workflow.config_settings)
    except NcreelError as err:
        fail(err)
    if STALE_LOCK_CLEARED:
        print(
            "ncreel: removed the stale lock of a killed run; resuming", file=sys.stderr
        )

RUN = RUN_CONFIG.run
OUT = RUN_CONFIG.out
LOGS = RUN_CONFIG.logs
TABLE = RUN_CONFIG.table
INPUTS = RUN_CONFIG.inputs
INPUT_STAMPS = RUN_CONFIG.input_stamps
RULE_INPUTS = RUN_CONFIG.rule_inputs
SERIES = RUN_CONFIG.series
GRID = RUN_CONFIG.grid
TABLE_GRID = RUN_CONFIG.table_grid
# The time chunks (MiB) each job's reads hold: statistics, calibrate, shard, prepass.
CHUNK_MB = RUN_CONFIG.chunk_mb
REGION = RUN_CONFIG.region
CONTOURS = RUN_CONFIG.contours
VECTORS = RUN_CONFIG.vectors
TIME_DIM = RUN_CONFIG.time_dim
CELLS = RUN_CONFIG.cells
CELL_COLUMNS = RUN_CONFIG.cell_columns
CELL_NOTE = RUN_CONFIG.cell_note
RENDER = RUN_CONFIG.render
ENCODE = RUN_CONFIG.encode
RENDER_PROCESSES = config["render_processes"]
MID_T = RUN_CONFIG.mid_t
MOVIE = RUN_CONFIG.movie
COPY_FILE = RUN_CONFIG.copy_file
# cells.layout normalised: the cells and steps COPY files beside COPY_FILE (the values),
# per shard and for the run.
NORMALISED = CELLS["layout"] == "normalised"
TABLE_FILES = (
    {k: f"{OUT}/cells_{k}{CELLS['suffix']}" for k in ("cells", "steps")}
    if NORMALISED
    else {}
)
SHARD_TABLE_FILES = (
    {k: f"{OUT}/cells/{{shard}}_{k}{CELLS['suffix']}" for k in ("cells", "steps")}
    if NORMALISED
    else {}
)
PREVIEW = RUN_CONFIG.preview
# Config outputs: what the run makes. Rules of an output not made are not in the DAG;
# OUTPUTS_PARAM is in the params of the jobs that do less without it (only when not both:
# the params, and so the jobs, of a run of both stay as they were).
MOVIE_ON = RUN_CONFIG.movie_on
TABLE_ON = RUN_CONFIG.table_on
OUTPUTS_PARAM = {} if MOVIE_ON and TABLE_ON else {"outputs": list(RUN_CONFIG.outputs)}
MOVIE_OUTPUTS = (
    [MOVIE, *[f"{OUT}/movie.{fmt}" for fmt in sorted(set(config["formats"]) - {"mp4"})]]
    + [PREVIEW]
    if MOVIE_ON
    else []
)
if workflow.is_main_process and any(
    a == "--report" or a.startswith("--report=") for a in sys.argv[1:]
):
    # The report is that of the run the config names: say which, so that a report
    # written without the run's --configfile is not taken for another run's.
    print(
        f"ncreel: note: reporting run '{RUN}' ({OUT}/); for another run give its "
        "--configfile",
        file=sys.stderr,
    )
_missing = report_before_results(
    sys.argv,
    [*([MOVIE, PREVIEW] if MOVIE_ON else []), *([COPY_FILE] if TABLE_ON else [])],
)
if _missing and workflow.is_main_process:
    fail(
        f"run '{RUN}' has no results to report yet ({_missing} missing): run the same "
        "command without --report first (or add --report-after-run)"
    )


wildcard_constraints:
    shard=r"\d{5}",


def shard_plan():
    """The run's shards by name, in time order.

    Their length is ``frames_per_shard`` as resolved by the calibrate_render checkpoint
    (configured, or what fills ``target_shard_minutes`` at the measured speed) and stored
    in its calibration.json, so rerunning the same command reads back the same plan.
    """
    plan = _SHARD_PLAN.plan(
        checkpoints.calibrate_render.get().output.calibration, GRID["n_time"]
    )
    redo_interrupted(plan)
    return plan


_SHARD_PLAN = ShardPlanCache()  # built once per calibration.json, not once per job
_REDO_CHECKED = []
# What an interrupted earlier run left, read before this run starts a job: the marks of
# this run's own running jobs (statistics, still running when the calibration ends and
# the shards join the DAG) are not an interrupted run's.
_LEFT_INCOMPLETE = (
    interrupted_outputs(OUT)
    if workflow.is_main_process and not reporting_only(sys.argv)
    else []
)


def redo_interrupted(plan):
    """Redo the jobs whose outputs an interrupted run left (marked incomplete, present).

    Snakemake checks incomplete marks when it first builds the DAG, not for the jobs it
    adds after reading a checkpoint (every shard and what follows): it would take their
    outputs as done, with no metadata. They are forced as --rerun-incomplete forces the
    others (Snakemake's own DAG.forcefiles); once per run, in the controller, while the
    DAG is being built (shard_plan() is first called from the rules' input functions).
    """
    dag = workflow.dag
    if (
        _REDO_CHECKED
        or dag is None
        or not workflow.is_main_process
        or reporting_only(sys.argv)  # a report redoes nothing
    ):
        return
    _REDO_CHECKED.append(True)
    # Still there, and not a shard of an earlier plan (its outputs are not in this DAG).
    found = [p for p in _LEFT_INCOMPLETE if os.path.lexists(p) and in_plan(p, plan)]
    if found:
        dag.forcefiles.update(found)
        shown = ", ".join(found[:3]) + (
            f" and {len(found) - 3} more" if found[3:] else ""
        )
        print(
            f"ncreel: note: redoing the jobs of {len(found)} output(s) an interrupted "
            f"run left ({shown})",
            file=sys.stderr,
        )


def in_plan(path, plan):
    """False for a shard's output (cells/, segments/, frames/) whose shard is not in `plan`."""
    rel = os.path.relpath(path, OUT).split(os.sep)
    if len(rel) < 2 or rel[0] not in ("cells", "segments", "frames"):
        return True
    return rel[1][:5] in plan


def plan_shard(name):
    """The shard called `name` in the plan; one error line naming the valid range if none."""
    plan = shard_plan()
    if name not in plan:
        names = list(plan)
        fail(
            f"shard {name} is not in the plan of run '{RUN}': it has {len(names)} shard(s), "
            f"{names[0]}..{names[-1]} ({next(iter(plan.values())).n_frames} frames each, "
            f"from {OUT}/calibration.json); ask for one of those"
        )
    return plan[name]


def shard_pngs(shard):
    """Time indices of `shard` also written as PNG: first, middle, last, every Nth, and
    the run's middle frame (the report's preview)."""
    s = plan_shard(shard)
    return png_sample(s.start, s.stop, every=config["png_every"], extra=[MID_T])


def mid_shard():
    """Name of the shard holding the run's middle frame."""
    return next(n for n, s in shard_plan().items() if s.start <= MID_T < s.stop)


def report_jobs():
    """Every job of the run that has a log: rule, display name, benchmark TSV and log file,
    from the rules' own benchmark:/log: declarations (jobs of the shard wildcard expanded
    over the plan). Rules that did not run in this configuration have neither file and are
    left out of the report."""
    jobs = []
    for name, rule_ in ncreel_rules().items():
        if name in ("all", "resources_report", "contact_sheet") or not rule_.log:
            continue
        names = set(rule_.wildcard_names)
        if names == {"shard"}:
            shards = list(shard_plan())
        elif not names:
            shards = [None]
        else:
            continue
        for shard in shards:
            wc = {"shard": shard} if shard else {}
            bench = (
                apply_wildcards(str(rule_.benchmark), wc) if rule_.benchmark else None
            )
            jobs.append(
                {
                    "rule": name,
                    "job": shard or name,
                    "benchmark": bench,
                    "log": apply_wildcards(str(rule_.log[0]), wc),
                }
            )
    return jobs


def shard_attempt_logs():
    """Shard name -> its job's log file (the attempts record is next to it)."""
    return {j["job"]: j["log"] for j in report_jobs() if j["rule"] == "process_shard"}
