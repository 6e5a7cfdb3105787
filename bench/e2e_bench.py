"""Whole-workflow benchmark at the resolution users have (``make bench-e2e``).

An ERA5-like file (``bench/era5like.py``: hourly 2 m temperature on the 0.25° grid,
721 × 1440, NetCDF-4 zlib) run through the workflow itself, ``snakemake --cores 2``, one
case at a time, each in its own copy of the workflow. Ends with ``key=value`` lines:

- ``e2e_movie_only_vs_encode_floor``: wall time of a 240-step ``outputs: [movie]`` run on
  per-step chunks ÷ the time ffmpeg alone takes to re-encode that movie with the same
  preset and crf and 2 threads (the floor: no run can make the movie faster than encoding
  it). Target ≤ 3.
- ``e2e_day_chunks_vs_step_chunks``: the same run on a file chunked a day (24 steps) per
  chunk ÷ on per-step chunks. Target ≤ 1.2.
- ``e2e_both_vs_polars_1thread``: a 48-step run with both outputs (per-step chunks) ÷ the
  time polars' single-threaded ``DataFrame.write_csv`` takes to write the same rows (the
  table's columns, made beforehand, not timed). Target ≤ 2.0.
- ``copy_writer_fraction_of_polars``: rows/s of ncreel's row path for the same rows (model
  columns computed, coerced and written as COPY text) ÷ polars' ``write_csv`` of them
  ready-made, both on one thread. Target ≥ 0.75.

and the parts: ``e2e_<case>_seconds``, ``encode_floor_seconds``, ``polars_write_seconds``,
``rows``. ``--smoke`` runs every case on a tiny grid in seconds (a CI test runs it): its
ratios mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from era5like import make_era5like  # noqa: E402
from scale_bench import copy_workflow  # noqa: E402

TARGETS = {"e2e_movie_only_vs_encode_floor": ("<=", 3.0),
           "e2e_day_chunks_vs_step_chunks": ("<=", 1.2),
           "e2e_both_vs_polars_1thread": ("<=", 2.0),
           "copy_writer_fraction_of_polars": (">=", 0.75)}


def env() -> dict:
    e = dict(os.environ)
    e.pop("SNAKEMAKE_PROFILE", None)
    e["PATH"] = f"{Path(sys.executable).parent}:{e['PATH']}"
    return e


def run_case(base: Path, name: str, nc: Path, outputs: list[str], extra: dict) -> dict:
    """Run the workflow on `nc`; return its wall time and outputs."""
    work = copy_workflow(base / name)
    run_file = work / "run.yaml"
    run_file.write_text(json.dumps({"input": str(nc), "variable": "t2m", "run": name,
                                    "outputs": outputs, **extra}))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
                        str(run_file)], cwd=work, env=env(), capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"case {name} failed:\n{r.stderr[-4000:]}")
    out = work / "results" / name
    return {"seconds": wall, "out": out, "movie": out / "movie.mp4"}


def encode_floor(movie: Path, preset: str, crf: int) -> float:
    """Seconds ffmpeg takes to re-encode `movie` as ncreel encodes, on 2 threads."""
    from ncreel.render.movie import ffmpeg_executable, x264_args

    with tempfile.TemporaryDirectory() as tmp:
        argv = [ffmpeg_executable(), "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
                "-i", str(movie), *x264_args(crf=crf, preset=preset), "-threads", "2",
                "-movflags", "+faststart", str(Path(tmp) / "floor.mp4")]
        t = time.perf_counter()
        subprocess.run(argv, check=True)
        return time.perf_counter() - t


def child_rows(nc: str, n_steps: str, out: str) -> dict:
    """In a child with one polars thread: ncreel's row path vs polars on the same rows."""
    import numpy as np
    import polars as pl
    from ncreel.cells import ShardRows, cells_settings
    from ncreel.config.settings import CellsSettings
    from ncreel.input.source import open_series
    from ncreel.pg.copytext import _to_polars

    options = {"include_header": False, "separator": "\t", "null_value": "\\N",
               "quote_style": "never", "line_terminator": "\n",
               "datetime_format": "%Y-%m-%dT%H:%M:%S%.f"}
    n_steps = int(n_steps)
    series = open_series([nc], "t2m")
    block0 = series.read(0, 1)
    rows = ShardRows.for_series(series, cell_mean=block0[0], cells=CellsSettings.from_params(
        cells_settings({})))
    ours = theirs = 0.0
    n = 0
    with open(out, "wb") as fh:
        for t in range(n_steps):
            block = series.read(t, t + 1)
            a = time.perf_counter()
            n += rows.write(fh, t, block)
            ours += time.perf_counter() - a
        # polars alone: the same columns, made and converted beforehand (not timed).
        fh.seek(0)
        fh.truncate()
        for t in range(n_steps):
            cols = rows.rows(t, series.read(t, t + 1))
            df = pl.DataFrame([_to_polars(k, v) for k, v in cols.items()])
            a = time.perf_counter()
            df.write_csv(fh, **options)
            theirs += time.perf_counter() - a
    series.close()
    assert np.isfinite(ours)
    return {"rows": n, "ours_s": ours, "polars_s": theirs,
            "threads": pl.thread_pool_size()}


def rows_baseline(nc: Path, n_steps: int, work: Path) -> dict:
    e = env()
    e["POLARS_MAX_THREADS"] = "1"
    r = subprocess.run([sys.executable, __file__, "--child", "rows", str(nc), str(n_steps),
                        str(work / "rows.copy")], env=e, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-4000:])
    (work / "rows.copy").unlink(missing_ok=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs="+")
    ap.add_argument("--smoke", action="store_true", help="tiny grid: checks it runs")
    ap.add_argument("--movie-steps", type=int, default=240)
    ap.add_argument("--both-steps", type=int, default=48)
    ap.add_argument("--work", default=None, help="keep the runs here (default: a temp dir)")
    args = ap.parse_args()
    if args.child:
        print(json.dumps({"rows": child_rows}[args.child[0]](*args.child[1:])))
        return
    grid = {"ny": 721, "nx": 1440}
    extra = {}
    if args.smoke:
        grid = {"ny": 19, "nx": 36}
        args.movie_steps, args.both_steps = 48, 6
        extra = {"width": 160, "height": 96, "dpi": 40, "calibration_frames": 4}
    with tempfile.TemporaryDirectory(prefix="ncreel-e2e-", dir=args.work) as tmp:
        base = Path(tmp)
        files = {}
        for chunks in ("step", "day"):
            t = time.perf_counter()
            files[chunks] = make_era5like(base / f"era5like_{chunks}.nc", args.movie_steps,
                                          chunks=chunks, **grid)
            print(f"# {files[chunks].name}: {files[chunks].stat().st_size / 1e6:.0f} MB, "
                  f"made in {time.perf_counter() - t:.1f} s", flush=True)
        both_nc = make_era5like(base / "era5like_both.nc", args.both_steps, chunks="step",
                                **grid)
        res = {}
        for name, nc, outputs in (("movie_step", files["step"], ["movie"]),
                                  ("movie_day", files["day"], ["movie"]),
                                  ("both_step", both_nc, ["movie", "table"])):
            res[name] = run_case(base, name, nc, outputs, extra)
            print(f"# {name}: {res[name]['seconds']:.1f} s", flush=True)
        from ncreel.config.configcheck import schema_defaults

        defaults = schema_defaults()
        floor = encode_floor(res["movie_step"]["movie"], extra.get("preset",
                             defaults["preset"]), extra.get("crf", defaults["crf"]))
        rows = rows_baseline(both_nc, args.both_steps, base)
        print(f"# rows: {rows}", flush=True)
    out = {"e2e_movie_step_seconds": res["movie_step"]["seconds"],
           "e2e_movie_day_seconds": res["movie_day"]["seconds"],
           "e2e_both_step_seconds": res["both_step"]["seconds"],
           "encode_floor_seconds": floor, "polars_write_seconds": rows["polars_s"],
           "rows": rows["rows"],
           "e2e_movie_only_vs_encode_floor": res["movie_step"]["seconds"] / floor,
           "e2e_day_chunks_vs_step_chunks": (res["movie_day"]["seconds"]
                                             / res["movie_step"]["seconds"]),
           "e2e_both_vs_polars_1thread": res["both_step"]["seconds"] / rows["polars_s"],
           "copy_writer_fraction_of_polars": rows["polars_s"] / rows["ours_s"]}
    for key, value in out.items():
        print(f"{key}={value:.3f}" if isinstance(value, float) else f"{key}={value}")
    if not args.smoke:
        for key, (op, target) in TARGETS.items():
            met = out[key] <= target if op == "<=" else out[key] >= target
            print(f"# {key} {op} {target}: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
