# Parse-time set-up: validate the config, read the input's header. The shard plan is read
# from the calibrate_render checkpoint's output (see shard_plan()).
import os
import signal
import sys
from pathlib import Path

from snakemake.io import apply_wildcards
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from ncreel import resources as res  # noqa: E402
from ncreel.cells import (  # noqa: E402
    cells_settings,
    series_columns,
    upgrade_cells_config,
)
from ncreel.configcheck import (  # noqa: E402
    check_colours,
    check_database,
    check_names,
    coerce_cli_values,
    load_schema,
    report_before_results,
    schema_error_message,
    schema_path,
    unknown_key_message,
    upgrade_renamed_keys,
)
from ncreel.errors import NcreelError  # noqa: E402
from ncreel.identity import input_stamps  # noqa: E402
from ncreel.jobrecord import attempts_path, read_attempts  # noqa: E402
from ncreel.inputcheck import (  # noqa: E402
    check_input_sizes,
    check_series_size,
    check_time_steps,
)
from ncreel.cells.soil import check_run, needs_prepass  # noqa: E402
from ncreel.cluster.runlock import clear_stale_lock, hold_run_lock  # noqa: E402
from ncreel.render.shard import png_sample  # noqa: E402
from ncreel.jobtext import input_link, pass_config_by_file  # noqa: E402
from ncreel.settings import Calibration, SeriesSelection  # noqa: E402
from ncreel.shards import frame_name, plan_shards  # noqa: E402
from ncreel.source import open_selection, resolve_paths  # noqa: E402

SCHEMA = schema_path()


def fail(message):
    """Stop with one line naming the problem (no traceback for bad input)."""
    sys.exit(f"ncreel: error: {message}")


if workflow.is_main_process and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # Started in the background of a script, Snakemake inherits SIGINT ignored and would
    # run on after a Ctrl-C to the script's process group while its jobs stop. An
    # interrupt means stop, for the controller too.
    signal.signal(signal.SIGINT, signal.default_int_handler)


try:
    for _note in upgrade_renamed_keys(config):
        if workflow.is_main_process:
            print(f"ncreel: note: {_note}", file=sys.stderr)
except NcreelError as err:
    fail(err)
_known = load_schema()["properties"]
for _key in config:
    if _key not in _known:
        fail(unknown_key_message(_key))
try:
    # Before anything echoes config values: a password must not reach jobs or messages.
    check_database(config.get("database"))
except NcreelError as err:
    fail(err)
# Model parameters have one key, cells.params; the deprecated cells.etr is moved into it
# before validation, so the schema checks and completes etr_risk's parameters there.
if isinstance(config.get("cells"), dict):
    try:
        config["cells"], _note = upgrade_cells_config(config["cells"])
    except NcreelError as err:
        fail(err)
    if _note and workflow.is_main_process:
        print(f"ncreel: note: {_note}", file=sys.stderr)
# `--config select={level: 0}` (any nested value on the command line) arrives as strings;
# give them their YAML types ('0' -> 0, 'true' -> True) before validation.
coerce_cli_values(config, workflow.config_settings.overwrite_config or {})
try:
    validate(config, str(SCHEMA))
except Exception as err:  # WorkflowError wrapping jsonschema's ValidationError
    _cause = err.__cause__ or err.__context__
    _cause = _cause if hasattr(_cause, "absolute_path") else None
    fail(
        schema_error_message(_cause)
        if _cause is not None
        else "config: does not match workflow/schemas/config.schema.yaml"
    )
try:
    TABLE = check_names(config)
    check_colours(config)
except NcreelError as err:
    fail(err)


def mem_cap_mb():
    """The largest mem_mb a job gets: Snakemake lowers larger requests to --resources mem_mb."""
    cap = workflow.global_resources.get("mem_mb")
    cap = getattr(cap, "value", cap)
    return cap if isinstance(cap, int | float) else None


def separate_job(rule_name):
    """Whether jobs of `rule_name` run as their own scheduler job (Snakemake's processes around
    the rule's own then count against the job's memory); False locally and for localrules.
    """
    plugin = workflow.executor_plugin
    remote = plugin is not None and plugin.common_settings.non_local_exec
    # Inside the scheduler job Snakemake evaluates resources again: the job must see (and
    # record, see ncreel.jobrecord) the mem_mb the scheduler was asked for.
    return (remote or workflow.remote_exec) and rule_name not in workflow._localrules


def rule_mem_mb(rule_name, func=None):
    """The mem_mb of `rule_name`: its own process's (`func`, else ncreel.resources.FIXED_MEM_MB)
    plus Snakemake's per-job overhead where it exists, saying once when above the cap.
    """
    if func is None:
        func = lambda wc, attempt: res.fixed_mem_mb(rule_name, attempt)
    # More memory only after failures more memory can fix (not Ctrl-C, bad input, disk).
    func = res.by_memory_failures(func, lambda wc: job_attempts(rule_name, wc))
    return res.said_over_cap(
        rule_name,
        res.with_job_overhead(func, lambda: separate_job(rule_name)),
        mem_cap_mb,
    )


def job_attempts(rule_name, wildcards):
    """The attempts record of the job of `rule_name` with `wildcards` (ncreel.jobrecord)."""
    log = workflow.get_rule(rule_name).log[0]
    return read_attempts(
        attempts_path(apply_wildcards(str(log), dict(wildcards.items())))
    )


def rule_runtime(rule_name):
    """The runtime of `rule_name` (minutes), from ncreel.resources.FIXED_RUNTIME_MIN."""
    return lambda wc, attempt: res.fixed_runtime(rule_name, attempt)


RUN = config["run"]
OUT = f"results/{RUN}"
LOGS = f"logs/{RUN}"

try:
    INPUTS = resolve_paths(config["input"])
    INPUT_STAMPS = input_stamps(INPUTS)
    check_input_sizes(INPUTS)
    check_time_steps(INPUTS, config["variable"], config["time_dim"])
    with open_selection(
        SeriesSelection(
            paths=INPUTS,
            variable=config["variable"],
            time_dim=config["time_dim"],
            select=config["select"],
            lat=config["lat"],
            lon=config["lon"],
            time=config["time"],
        )
    ) as _series:
        # Reopened by every job exactly as detected here (files in time order).
        SERIES = _series.spec()
        GRID = {"n_time": _series.n_time, "ny": _series.ny, "nx": _series.nx}
        check_series_size(**GRID, variable=_series.variable, mem_cap_mb=mem_cap_mb())
        TIME_DIM = _series.time_dim
        CELLS = cells_settings(config["cells"])
        # The table's columns, declared by the cell model (imported here, so a bad
        # cells.model stops the run before any job starts).
        CELL_COLUMNS = series_columns(_series, CELLS)
        # etr_risk's time course: dates, temperature variable and units, before any job.
        check_run(_series, CELLS)
        _time = _series.time_axis()
        CELL_NOTE = f"'{_series.variable}' from {', '.join(_series.paths)}" + (
            ""
            if not _time.note
            else (
                f"\ntime could not be decoded ({_time.note}); column time is NULL"
                if not _time.decoded
                else f"\ntime not decoded for some steps ({_time.note}); column time is NULL there"
            )
        )
        if _series.note and workflow.is_main_process:  # repeated times dropped
            print(f"ncreel: note: {_series.note}", file=sys.stderr)
        if _time.note and workflow.is_main_process:
            print(
                f"ncreel: note: {_time.note}; column time is NULL there",
                file=sys.stderr,
            )
except NcreelError as err:
    fail(err)
# What rules declare as input: a path with any but plain characters (a quote, `$`, braces
# that Snakemake would read as a wildcard) as a plain-named link to it; jobs open the real
# paths from SERIES (params, which never pass through a shell).
try:
    RULE_INPUTS = [input_link(p, create=workflow.is_main_process) for p in INPUTS]
except NcreelError as err:
    fail(err)

try:  # a wrong projection name or parameter stops the run before any job or file
    from ncreel.render.maps import map_projection  # noqa: E402

    map_projection(config["map"]["projection"], config["map"]["projection_params"])
except ValueError as err:
    fail(f"config: {err}")

if workflow.is_main_process:
    # No config value on a job's shell command line (Snakemake quotes --config values with
    # repr(), which sh re-parses): jobs read them from a file written once, here, after
    # every check above, so each job sees exactly the values that were checked.
    try:
        pass_config_by_file(workflow.config_settings)
    except NcreelError as err:
        fail(err)

STALE_LOCK_CLEARED = False
if workflow.is_main_process:
    # One run at a time per run, whatever happens to Snakemake's own locks (another run
    # finishing removes them all): taken before Snakemake builds the DAG, which removes
    # incomplete outputs. Dry runs, --unlock and --report of a running run are refused too.
    try:
        hold_run_lock(f"{OUT}/.ncreel-run.lock", RUN)
    except NcreelError as err:
        fail(err)
    # A run killed with kill -9 leaves Snakemake's lock behind; remove it only when that
    # run is certainly dead, so that running the same command again resumes.
    # (Its scheduler jobs still queued are cancelled in scheduler.smk.)
    try:
        STALE_LOCK_CLEARED = clear_stale_lock(".")
    except NcreelError as err:
        fail(err)
    if STALE_LOCK_CLEARED:
        print(
            "ncreel: removed the stale lock of a killed run; resuming", file=sys.stderr
        )

RENDER = {k: config[k] for k in ("width", "height", "dpi", "cmap", "map")}
ENCODE = {k: config[k] for k in ("fps", "crf", "preset")}
RENDER_PROCESSES = config["render_processes"]
MID_T = GRID["n_time"] // 2
MOVIE = f"{OUT}/movie.mp4"
COPY_FILE = f"{OUT}/cells{CELLS['suffix']}"
PREVIEW = f"{OUT}/preview.png"
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
_missing = report_before_results(sys.argv, [MOVIE, PREVIEW, COPY_FILE])
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
    path = checkpoints.calibrate_render.get().output.calibration
    # Called for every shard job's params and resources: built once per calibration.json
    # (keyed by its mtime), or a 10 000-shard DAG would build the plan 10 000s of times.
    stamp = (path, os.stat(path).st_mtime_ns)
    if _PLAN_CACHE.get("stamp") != stamp:
        frames_per_shard = Calibration.from_json(path).frames_per_shard
        plan = {s.name: s for s in plan_shards(GRID["n_time"], frames_per_shard)}
        _PLAN_CACHE.update(stamp=stamp, plan=plan)
    return _PLAN_CACHE["plan"]


_PLAN_CACHE = {}


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
    for rule_ in workflow.rules:
        if rule_.name in ("all", "resources_report", "contact_sheet") or not rule_.log:
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
                    "rule": rule_.name,
                    "job": shard or rule_.name,
                    "benchmark": bench,
                    "log": apply_wildcards(str(rule_.log[0]), wc),
                }
            )
    return jobs


def shard_attempt_logs():
    """Shard name -> its job's log file (the attempts record is next to it)."""
    return {j["job"]: j["log"] for j in report_jobs() if j["rule"] == "process_shard"}
