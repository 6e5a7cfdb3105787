# Parse-time set-up: validate the config, read the input's header. The shard plan is read
# from the calibrate_render checkpoint's output (see shard_plan()).
import json
import os
import re
import sys
from pathlib import Path

import yaml
from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "workflow"))

from ncreel import resources as res  # noqa: E402
from ncreel.cells import cells_settings, series_columns  # noqa: E402
from ncreel.errors import NcreelError  # noqa: E402
from ncreel.runlock import clear_stale_lock  # noqa: E402
from ncreel.scheduler import cancel_orphan_pbs_jobs, cancel_orphan_slurm_jobs  # noqa: E402
from ncreel.shardrender import png_sample  # noqa: E402
from ncreel.shards import frame_name, plan_shards  # noqa: E402
from ncreel.source import open_series, resolve_paths  # noqa: E402

SCHEMA = Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"


def fail(message):
    """Stop with one line naming the problem (no traceback for bad input)."""
    sys.exit(f"ncreel: error: {message}")


_known = yaml.safe_load(SCHEMA.read_text())["properties"]
for _key in config:
    if _key not in _known:
        fail(f"unknown config key '{_key}' (known keys: {', '.join(sorted(_known))})")
# `--config select={level: 0}` arrives with string values; indices are integers.
if isinstance(config.get("select"), dict):
    config["select"] = {
        k: int(v) if isinstance(v, str) and re.fullmatch(r"-?\d+", v) else v
        for k, v in config["select"].items()
    }
try:
    validate(config, str(SCHEMA))
except Exception as err:  # jsonschema's message names the key and the expected type
    fail(f"config: {' '.join(str(err).split())[:500]}")

if workflow.is_main_process:
    # A run killed with kill -9 leaves Snakemake's lock behind; remove it only when that
    # run is certainly dead, so that running the same command again resumes.
    if clear_stale_lock("."):
        print("ncreel: removed the stale lock of a killed run; resuming", file=sys.stderr)
        # Its Slurm jobs still queued or running would redo work this run redoes.
        for _id in cancel_orphan_slurm_jobs("."):
            print(f"ncreel: cancelled Slurm job {_id} of the killed run", file=sys.stderr)
        for _id in cancel_orphan_pbs_jobs("."):
            print(f"ncreel: deleted PBS job {_id} of the killed run", file=sys.stderr)

RUN = config["run"]
OUT = f"results/{RUN}"
LOGS = f"logs/{RUN}"
TABLE = config["table"] or f"ncreel_{re.sub(r'[^a-z0-9_]', '_', RUN.lower())}"

try:
    INPUTS = resolve_paths(config["input"])
    with open_series(INPUTS, config["variable"], time_dim=config["time_dim"],
                     select=config["select"]) as _series:
        GRID = {"n_time": _series.n_time, "ny": _series.ny, "nx": _series.nx}
        TIME_DIM = _series.time_dim
        CELLS = cells_settings(config["cells"])
        # The table's columns, declared by the cell model (imported here, so a bad
        # cells.model stops the run before any job starts).
        CELL_COLUMNS = series_columns(_series, CELLS)
        _time = _series.time_axis()
        CELL_NOTE = f"'{_series.variable}' from {', '.join(_series.paths)}" + (
            "" if _time.decoded else f"\ntime could not be decoded ({_time.note}); column time is NULL")
except NcreelError as err:
    fail(err)

SERIES = {
    "paths": INPUTS,
    "variable": config["variable"],
    "time_dim": TIME_DIM,
    "select": dict(config["select"]),
}
RENDER = {k: config[k] for k in ("width", "height", "dpi", "cmap")}
ENCODE = {k: config[k] for k in ("fps", "crf", "preset")}
RENDER_THREADS = config["render_threads"]
MID_T = GRID["n_time"] // 2
MOVIE = f"{OUT}/movie.mp4"
COPY_FILE = f"{OUT}/cells{CELLS['suffix']}"
PREVIEW = f"{OUT}/preview.png"


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
        with open(path) as fh:
            frames_per_shard = json.load(fh)["frames_per_shard"]
        plan = {s.name: s for s in plan_shards(GRID["n_time"], frames_per_shard)}
        _PLAN_CACHE.update(stamp=stamp, plan=plan)
    return _PLAN_CACHE["plan"]


_PLAN_CACHE = {}


def shard_pngs(shard):
    """Time indices of `shard` also written as PNG: first, middle, last, every Nth, and
    the run's middle frame (the report's preview)."""
    s = shard_plan()[shard]
    return png_sample(s.start, s.stop, every=config["png_every"], extra=[MID_T])


def mid_shard():
    """Name of the shard holding the run's middle frame."""
    return next(n for n, s in shard_plan().items() if s.start <= MID_T < s.stop)


def job_overhead_mb():
    """Extra mem_mb for Snakemake's own processes when a job runs under a scheduler."""
    plugin = workflow.executor_plugin
    remote = plugin is not None and plugin.common_settings.non_local_exec
    return res.SCHEDULER_JOB_OVERHEAD_MB if remote else 0
