"""Rows/s of the etr_risk time course against the field model on a 0.25° global grid.

Each model computes and writes (COPY text, :func:`ncreel.pg.copytext.write_copy_rows`) the rows
of a synthetic 720 x 1440 grid (1 036 800 cells, one block per step as in a shard job)
for ``--steps`` daily steps, in the same process one after another; the ratio to
``field`` is the figure (same run, same machine). Also the degradation pre-pass speed
(cells x steps per second). Ends with ``key=value`` lines.

    .venv/bin/python bench/etr_bench.py [--steps 4] [--ny 720 --nx 1440]
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from ncreel.cells import (  # noqa: E402
    CellContext,
    check_columns,
    resolve_model,
    soil,  # noqa: E402
)
from ncreel.input.timeaxis import TimeAxis  # noqa: E402
from ncreel.pg.copytext import write_copy_rows  # noqa: E402

TIME_COURSE = {"first_application": "2001-01-01", "application_number": 3,
               "application_interval_days": 1, "dt50_days": 30.0, "plateau_years": 10,
               "interception_percent": 25.0}


def synthetic(n_t: int, ny: int, nx: int):
    """Air-temperature-like float32 field (K) and its context, daily steps from 2001-01-01."""
    rng = np.random.default_rng(0)
    field = (285 + 10 * rng.standard_normal((n_t, ny, nx))).astype(np.float32)
    field[:, : ny // 10] = np.nan  # some missing cells, as over an ocean mask
    d0 = datetime.datetime(2001, 1, 1)
    labels = [(d0 + datetime.timedelta(days=i)).isoformat() for i in range(n_t)]
    time_ax = TimeAxis(values=np.arange(n_t, dtype=float), labels=labels, calendar="standard",
                       units="days since 2001-01-01", decoded=True)
    lat, lon = np.meshgrid(np.linspace(-89.875, 89.875, ny), np.linspace(0.125, 359.875, nx),
                           indexing="ij")

    def read_variable(name, start, stop):
        return field[start:stop].astype(np.float64)

    def ctx():
        return CellContext(time=time_ax, cell_mean=np.zeros((ny, nx)), lat=lat,
                           lon=lon, variable="tas", read_variable=read_variable)
    return field, ctx


def run(name: str, params: dict, field, make_ctx, out: str) -> tuple[int, float]:
    """Rows written and seconds for the model over all steps (one block per step)."""
    model = resolve_model(name, params)
    ctx = make_ctx()
    declared = model.columns(ctx)
    n = 0
    t = time.perf_counter()
    with open(out, "wb") as fh:
        for t0 in range(field.shape[0]):
            n += write_copy_rows(fh, check_columns(name, declared,
                                                   model(field[t0:t0 + 1], t0, ctx)))
    return n, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--ny", type=int, default=720)
    ap.add_argument("--nx", type=int, default=1440)
    ap.add_argument("--only", help="run this case alone (peak RSS of one model)")
    a = ap.parse_args()
    field, make_ctx = synthetic(a.steps, a.ny, a.nx)
    out = os.devnull
    cases = {
        "field": ("field", {}),
        "etr_initial": ("etr_risk", {}),
        "etr_time_course": ("etr_risk", {**soil_defaults(), **TIME_COURSE}),
        "etr_arrhenius": ("etr_risk", {**soil_defaults(), **TIME_COURSE,
                                       "temperature_variable": "tas"}),
    }
    if a.only:
        cases = {a.only: cases[a.only]}
    fig = {}
    run("field", {}, field[:1, :8], lambda: make_ctx(), out)  # warm-up: imports, caches
    for key, (name, params) in cases.items():
        rows, s = run(name, params, field, make_ctx, out)
        fig[f"{key}_rows_per_s"] = round(rows / s)
        fig[f"{key}_columns"] = len(resolve_model(name, params).columns(make_ctx()))
        print(f"# {key}: {rows} rows in {s:.2f} s", file=sys.stderr)
    if a.only:
        import resource

        fig["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        fig["field_bytes_mb"] = round(field.nbytes / 2**20)
        for k, v in fig.items():
            print(f"{k}={v}")
        return
    n_cells = a.ny * a.nx
    f = soil.factor_reader(lambda n, s, e: field[s:e].astype(np.float64), "tas", units="K",
                           ea_kj_mol=65.4, reference_c=20.0, n_cells=n_cells)
    t = time.perf_counter()
    soil.degradation_prepass(f, np.arange(a.steps, dtype=float), np.array([0.0, 1.0]),
                             [0, a.steps // 2], n_cells=n_cells)
    fig["prepass_cell_steps_per_s"] = round(n_cells * a.steps / (time.perf_counter() - t))
    for key in ("etr_initial", "etr_time_course", "etr_arrhenius"):
        fig[f"{key}_fraction_of_field"] = round(fig[f"{key}_rows_per_s"]
                                                / fig["field_rows_per_s"], 3)
    fig["grid"] = f"{a.ny}x{a.nx}"
    fig["steps"] = a.steps
    for k, v in fig.items():
        print(f"{k}={v}")


def soil_defaults() -> dict:
    """Parameters as ``cells_settings`` would pass them (defaults applied)."""
    from ncreel.cells import ETR_DEFAULTS

    return dict(ETR_DEFAULTS)


if __name__ == "__main__":
    main()
