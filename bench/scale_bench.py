"""Scale benchmark (``make bench-scale``): thousands of shards, few submissions, one qstat.

Prints ``key=value`` lines at the end:

- ``dag_seconds_<N>``, ``dag_rss_mb_<N>``: wall time and peak RSS of ``snakemake -n`` on a
  plan of N shards (a synthetic NetCDF with a long time axis, 3 x 4 cells, 2 frames per
  shard), after its calibrate_render checkpoint ran; for ``--baseline`` and ``--shards``
  shards, and their ratio (10x the shards should cost about 10x, not 100x).
- ``submissions_per_1000_shards`` (PBS, arrays on) and ``..._no_arrays``: ``qsub`` calls
  the pbs-pro executor makes for 1000 ready jobs of an array rule, through the cheyenne
  profile. Counted on a DRY PATH: ``qsub``/``qstat`` on PATH are recording stand-ins that
  create each job's outputs and report it finished (1000 real sub-jobs would take ~25 min
  on 2 cores). ``status_calls_1000_shards`` and ``max_ids_per_status_call`` from the same
  run.
- with ``--pbs-shards N`` (needs the real PBS server, ``/opt/pbs/bin``): the demo
  workflow with N shards of 2 tiny frames through ``--profile profiles/cheyenne`` on the
  real server: ``pbs_run_seconds_<N>``, ``pbs_submissions_<N>``, ``status_calls_per_poll``
  (most ``qstat`` calls within one poll, counted by a pass-through shim that logs and
  runs the real ``qstat``), ``pbs_max_ids_per_status_call`` and
  ``pbs_overhead_s_per_shard`` (PBS ``resources_used.walltime`` of each sub-job minus
  the seconds its process_shard benchmark measured, averaged).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cells_bench import make_big_nc, measure  # noqa: E402

FRAMES_PER_SHARD = 2
TINY = ["width=160", "height=96", "dpi=40", "preset=ultrafast", "calibration_frames=16"]


def env(**extra) -> dict:
    e = dict(os.environ)
    e.pop("SNAKEMAKE_PROFILE", None)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT / "workflow"),
                                       *filter(None, [e.get("PYTHONPATH")])])
    e["PATH"] = f"{Path(sys.executable).parent}:{e['PATH']}"
    e.update(extra)
    return e


def copy_workflow(work: Path) -> Path:
    work.mkdir(parents=True)
    for name in ("Snakefile", "config", "envs", "workflow", "profiles"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, work / name)
    return work


def workflow_with_shards(base: Path, n_shards: int) -> tuple[Path, list[str]]:
    """Copy the workflow beside a synthetic input of `n_shards` x 2 time steps."""
    work = copy_workflow(base / f"shards{n_shards}")
    make_big_nc(work / "in.nc", n_shards * FRAMES_PER_SHARD, 3, 4)
    cfg = [f"input={work / 'in.nc'}", "variable=tas", "run=scale",
           f"frames_per_shard={FRAMES_PER_SHARD}", *TINY]
    return work, cfg


def dag(base: Path, n_shards: int) -> dict:
    work, cfg = workflow_with_shards(base, n_shards)
    smk = [sys.executable, "-m", "snakemake", "--config", *cfg]
    subprocess.run([*smk, "--cores", "2", "--", "results/scale/calibration.json"], cwd=work,
                   env=env(), check=True, capture_output=True)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        wall, rss, text = measure([*smk, "-n"])
    finally:
        os.chdir(cwd)
    m = re.search(r"^process_shard\s+(\d+)", text, re.M)
    if not m or int(m.group(1)) != n_shards:
        raise SystemExit(f"dry run did not plan {n_shards} shards:\n{text[-3000:]}")
    return {f"dag_seconds_{n_shards}": wall, f"dag_rss_mb_{n_shards}": rss}


# ----------------------------------------------------------------------------- dry path

QSUB_STANDIN = r'''#!PYTHON
# Recording stand-in for qsub (bench only): logs its argv, "runs" the job by creating the
# outputs Snakemake's jobscript declares and recording exit status 0, prints a job id.
import json, os, sys
from pathlib import Path
state = Path(os.environ["SCALE_STATE"])
with open(state / "qsub.log", "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\n")
n = len((state / "qsub.log").read_text().splitlines())
script = Path(sys.argv[-1])
def done(jobscript, jobid):
    for line in Path(jobscript).read_text().splitlines():
        if line.startswith("# properties = "):
            for out in json.loads(line[15:])["output"]:
                Path(out).parent.mkdir(parents=True, exist_ok=True)
                Path(out).touch()
    marker = Path(".snakemake/pbs-pro") / (jobid.replace("[", "_").replace("]", "_") + ".exit")
    marker.write_text("0\n")
if "-J" in sys.argv:
    jobs = json.loads(script.with_suffix(".json").read_text())["jobs"]
    for e in jobs:
        done(e["jobscript"], f"{n}[{e['index']}].bench")
    (state / f"{n}.size").write_text(str(len(jobs)))
    print(f"{n}[].bench")
else:
    done(str(script)[: -len(".pbs.sh")], f"{n}.bench")
    print(f"{n}.bench")
'''

QSTAT_STANDIN = r'''#!PYTHON
# Recording stand-in for qstat (bench only): every job is finished with Exit_status 0.
import json, os, sys, time
from pathlib import Path
if sys.argv[1:] == ["--version"]:  # the executor's start-up check, not a status call
    print("pbs_version = bench stand-in")
    sys.exit(0)
state = Path(os.environ["SCALE_STATE"])
ids = [a for a in sys.argv[1:] if not a.startswith("-")]
with open(state / "qstat.log", "a") as fh:
    fh.write(json.dumps({"t": time.time(), "ids": ids}) + "\n")
for i in ids:
    subs = [i]
    if "[]" in i:
        n = i.split("[")[0]
        subs += [f"{n}[{k}].bench" for k in range(int((state / f"{n}.size").read_text()))]
    for s in subs:
        print(f"Job Id: {s}\n    job_state = F\n    Exit_status = 0\n")
'''

MANY = """
rule all:
    input: expand("out/{i}.txt", i=range(N))

rule shard:
    output: "out/{i}.txt"
    threads: 1
    resources: mem_mb=400, runtime=5
    shell: "echo {wildcards.i} > {output}"
"""


def dry_submissions(base: Path, n: int, arrays: bool) -> dict:
    work = base / f"dry_{n}_{int(arrays)}"
    (work / "bin").mkdir(parents=True)
    for name, text in (("qsub", QSUB_STANDIN), ("qstat", QSTAT_STANDIN)):
        path = work / "bin" / name
        path.write_text(text.replace("PYTHON", sys.executable, 1))
        path.chmod(0o755)
    (work / "Snakefile").write_text(MANY.replace("N", str(n), 1))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", str(ROOT / "profiles/cheyenne"),
         "--pbs-pro-array-rules", "shard" if arrays else "none",
         "--seconds-between-status-checks", "1", "--latency-wait", "1"],
        cwd=work, capture_output=True, text=True,
        env=env(PATH=f"{work / 'bin'}:{os.environ['PATH']}", SCALE_STATE=str(work),
                PBS_ACCOUNT="bench"))
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-4000:])
    qsubs = (work / "qsub.log").read_text().splitlines()
    qstats = [json.loads(x) for x in (work / "qstat.log").read_text().splitlines()]
    key = f"submissions_per_{n}_shards" + ("" if arrays else "_no_arrays")
    out = {key: len(qsubs)}
    if arrays:
        out[f"status_calls_{n}_shards"] = len(qstats)
        out["max_ids_per_status_call"] = max(len(q["ids"]) for q in qstats)
    return out


# ----------------------------------------------------------------------------- real PBS

QSTAT_SHIM = r'''#!/bin/sh
# Pass-through counter (bench only): log the call, then run the REAL qstat.
[ "$*" = --version ] || printf '%s %s\n' "$(date +%s.%N)" "$*" >> "$SCALE_STATE/qstat.calls"
exec /opt/pbs/bin/qstat "$@"
'''


def walltime_s(text: str) -> int:
    h, m, s = (int(x) for x in text.split(":"))
    return h * 3600 + m * 60 + s


def real_pbs(base: Path, n_shards: int, poll: int = 10) -> dict:
    from ncreel.cluster import pbs

    work, cfg = workflow_with_shards(base, n_shards)
    (work / "bin").mkdir()
    (work / "bin" / "qstat").write_text(QSTAT_SHIM)
    (work / "bin" / "qstat").chmod(0o755)
    e = env(PATH=f"{work / 'bin'}:/opt/pbs/bin:{os.environ['PATH']}",
            SCALE_STATE=str(work), PBS_ACCOUNT="bench",
            SNAKEMAKE_PBS_PRO_QUEUE=os.environ.get("SNAKEMAKE_PBS_PRO_QUEUE", "workq"))
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/cheyenne",
                           "--seconds-between-status-checks", str(poll), "--latency-wait", "5",
                           "--config", *cfg, "--", "results/scale/cells.copy"],
                          cwd=work, capture_output=True, text=True, env=e)
    wall = time.perf_counter() - t
    (work / "snakemake.out").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-4000:])
    calls = [ln.split(" ", 1) for ln in (work / "qstat.calls").read_text().splitlines()]
    # A poll's calls all start within a second; polls are `poll` seconds apart.
    times = sorted(float(c[0]) for c in calls)
    per_poll, start = [], None
    for x in times:
        if start is None or x - start > poll / 2:
            per_poll.append(0)
            start = x
        per_poll[-1] += 1
    ids_per_call = [len([a for a in c[1].split() if not a.startswith("-")]) for c in calls]
    arrays = re.findall(r"as PBS job array (\S+) ", proc.stdout + proc.stderr)
    qsubs = list((work / "logs/pbs").glob("*.qsub"))
    recs = pbs.parse_torque(subprocess.run(["/opt/pbs/bin/qstat", "-x", "-f", "-t", *arrays],
                                           capture_output=True, text=True).stdout)
    manifests = [json.loads(p.read_text())["jobs"]
                 for p in sorted((work / ".snakemake/pbs-pro/arrays").glob("*.json"))]
    overheads = []
    for array_id, entries in zip(arrays, manifests, strict=True):
        for ent in entries:
            rec = recs[array_id.replace("[]", f"[{ent['index']}]")]
            shard = ent["wildcards"]["shard"]
            tsv = (work / f"results/scale/benchmarks/process_shard/{shard}.tsv").read_text()
            head, vals = tsv.splitlines()[:2]
            render_s = float(dict(zip(head.split("\t"), vals.split("\t"), strict=True))["s"])
            overheads.append(walltime_s(rec["resources_used.walltime"]) - render_s)
    return {f"pbs_run_seconds_{n_shards}": wall, f"pbs_submissions_{n_shards}": len(qsubs),
            f"pbs_arrays_{n_shards}": len(arrays), "status_calls_per_poll": max(per_poll),
            "pbs_max_ids_per_status_call": max(ids_per_call),
            "pbs_overhead_s_per_shard": sum(overheads) / len(overheads)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=10000)
    ap.add_argument("--baseline", type=int, default=1000)
    ap.add_argument("--submit-shards", type=int, default=1000)
    ap.add_argument("--pbs-shards", type=int, default=0,
                    help="also run this many shards on the real PBS server (0: skip)")
    args = ap.parse_args()
    results: dict[str, float] = {}

    def report(new: dict) -> None:
        # Printed as soon as measured, so a later failing part loses nothing.
        results.update(new)
        for key, value in new.items():
            print(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}",
                  flush=True)

    with tempfile.TemporaryDirectory(prefix="ncreel-scale-") as tmp:
        base = Path(tmp)
        for n in (args.baseline, args.shards):
            report(dag(base, n))
        report({"dag_seconds_ratio": results[f"dag_seconds_{args.shards}"]
                / results[f"dag_seconds_{args.baseline}"],
                "dag_shards_ratio": args.shards / args.baseline})
        for arrays in (True, False):
            report(dry_submissions(base, args.submit_shards, arrays))
        if args.pbs_shards:
            report(real_pbs(base, args.pbs_shards))


if __name__ == "__main__":
    main()
