"""etr_risk's time course: published numbers and values recomputed here independently.

Reference values are computed in this file (closed forms, brute-force numerical
integration, a per-step loop), never by calling the ncreel.cells.soil function under test.
"""

from __future__ import annotations

import io
import json
import logging
import math
import shutil

import numpy as np
import pytest
import xarray as xr
from cells_data import write_risk_nc
from ncreel.cells import CellContext, ShardRows, cells_settings, etr_risk_model, pec_soil, soil
from ncreel.config.settings import CellsSettings
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.input.timeaxis import TimeAxis

LN2 = math.log(2.0)


def _daily_ctx(n_days=160, ny=1, nx=2, read_variable=None):
    """Daily steps from 2001-01-01 (noleap calendar), days_since = index."""
    import cftime

    dates = [cftime.DatetimeNoLeap(2001, 1, 1) + __import__("datetime").timedelta(days=i)
             for i in range(n_days)]
    time = TimeAxis(values=np.arange(n_days, dtype=float),
                    labels=[d.isoformat() for d in dates], calendar="noleap",
                    units="days since 2001-01-01", decoded=True)
    return CellContext(time=time, cell_mean=np.zeros((ny, nx)), lat=None, lon=None,
                       variable="v", read_variable=read_variable)


def _rows(out, name, cell=0):
    return np.asarray(out[name], dtype=float)[np.asarray(out["cell_id"]) == cell]


def test_published_initial_pec():
    # FOCUS (1997) / EFSA (2017): 100 g/ha into 5 cm at 1.5 g/cm3 -> 0.1333 mg/kg;
    # with 25 % crop interception -> 0.1 mg/kg.
    kw = dict(correction_factor=1.0, assumed_depth_m=0.05, soil_density_kg_m3=1500.0)
    assert pec_soil(application_rate_g_ha=100, interception_percent=0, **kw) == \
        pytest.approx(0.1333, abs=5e-5)
    assert pec_soil(application_rate_g_ha=100, interception_percent=25, **kw) == \
        pytest.approx(0.1, abs=1e-12)


def test_arrhenius_matches_efsa_q10():
    # EFSA (2007/2008): Ea = 65.4 kJ/mol corresponds to Q10 = 2.58 between 10 and 20 C.
    f10 = soil.arrhenius_factor(283.15)
    assert 1.0 / f10 == pytest.approx(2.58, rel=2e-3)
    assert soil.arrhenius_factor(293.15) == pytest.approx(1.0)


def test_single_application_twa_closed_form_and_numerical():
    dt50 = 12.0
    k = LN2 / dt50
    ctx = _daily_ctx()
    out = etr_risk_model(np.ones((160, 1, 2), np.float32), 0, ctx,
                         application_rate_g_ha=100.0, interception_percent=25.0,
                         applications=[{"date": "2001-01-11"}], dt50_days=dt50)
    pec0 = 0.1  # the published 25 % interception value
    age = np.arange(160) - 10.0
    act = _rows(out, "pec_act_mg_kg")
    assert act == pytest.approx(np.where(age >= 0, pec0 * np.exp(-k * age), 0.0), rel=1e-12)
    for w in (7, 21, 28, 50, 100):
        twa = _rows(out, f"pec_twa_{w}d_mg_kg")
        # FOCUS: w days after the application, PEC_twa = PEC0 (1 - e^-kw) / (kw).
        assert twa[10 + w] == pytest.approx(pec0 * (1 - math.exp(-k * w)) / (k * w), rel=1e-12)
        # Every step: brute-force average of the concentration over the last w days.
        for t in (12, 10 + w // 2, 10 + w, 140):
            s = np.linspace(max(t - w, 10), t, 200_001)  # zero before the application
            c = pec0 * np.exp(-k * (s - 10))
            assert twa[t] == pytest.approx(np.trapezoid(c, s) / w, rel=1e-6, abs=1e-12)
        assert np.argmax(twa) == 10 + w  # the TWA peaks w days after the application


def test_multiple_applications_sum_max_and_flags():
    dt50, ec50, noec = 20.0, 0.8, 0.5
    k = LN2 / dt50
    # Cell 0: interception 0 %, cell 1: 50 %, cell 2 missing interception (NULLs).
    icpt = np.array([[0.0, 50.0, np.nan]])
    ctx = _daily_ctx(n_days=120, nx=3, read_variable=lambda name, a, b: icpt)
    out = etr_risk_model(np.ones((120, 1, 3)), 0, ctx, interception_variable="icpt",
                         first_application="2001-01-05", application_number=3,
                         application_interval_days=10, application_rate_g_ha=300.0,
                         dt50_days=dt50, ec50_mg_kg=ec50, noec_mg_kg=noec,
                         long_term_twa_days=28, twa_windows_days=[28])
    days = np.arange(120.0)
    for cell, frac in ((0, 1.0), (1, 0.5)):
        pec0 = 300.0 * frac / (10 * 0.05 * 1500)  # mg/kg per application
        ref = sum(np.where(days >= d, pec0 * np.exp(-k * (days - d)), 0.0) for d in (4, 14, 24))
        act = _rows(out, "pec_act_mg_kg", cell)
        assert act == pytest.approx(ref, rel=1e-12, abs=1e-15)
        # Maximum over a fine grid (not only the daily steps) and its time.
        s = np.arange(0, 120, 0.001)
        fine = sum(np.where(s >= d, pec0 * np.exp(-k * (s - d)), 0.0) for d in (4, 14, 24))
        assert _rows(out, "pec_season_max_mg_kg", cell)[0] == pytest.approx(fine.max(), rel=1e-9)
        times = np.asarray(out["pec_season_max_time"].to_list())[np.asarray(out["cell_id"]) == cell]
        assert set(times) == {"2001-01-25T00:00:00"} and abs(s[fine.argmax()] - 24) < 1e-6
        etr_a = _rows(out, "etr_acute", cell)
        assert etr_a == pytest.approx(ref / ec50, rel=1e-12, abs=1e-15)
        flags = np.asarray(out["etr_acute_exceeded"].to_list())[np.asarray(out["cell_id"]) == cell]
        assert flags.tolist() == (ref / ec50 > 0.1).tolist()
        twa = _rows(out, "pec_twa_28d_mg_kg", cell)
        t = 60
        s = np.linspace(t - 28, t, 200_001)
        c = sum(np.where(s >= d, pec0 * np.exp(-k * (s - d)), 0.0) for d in (4, 14, 24))
        assert twa[t] == pytest.approx(np.trapezoid(c, s) / 28, rel=1e-6)
        assert _rows(out, "etr_long_term", cell)[t] == pytest.approx(twa[t] / noec, rel=1e-12)
    # Unknown interception: PEC 0 before the first application, NULL from it on.
    act2 = _rows(out, "pec_act_mg_kg", 2)
    assert (act2[:4] == 0).all() and np.isnan(act2[4:]).all()
    missing = (np.asarray(out["cell_id"]) == 2) & (np.asarray(out["time_index"]) >= 4)
    assert set(np.asarray(out["etr_acute_exceeded"].to_list(), object)[missing]) == {None}
    assert set(np.asarray(out["pec_season_max_time"].to_list(), object)[missing]) == {None}


def test_plateau_against_year_by_year_sum():
    dt50, n = 200.0, 4
    k = LN2 / dt50
    ctx = _daily_ctx(n_days=30)
    common = dict(applications=[{"date": "2001-01-03", "rate_g_ha": 600.0},
                                {"date": "2001-01-20", "rate_g_ha": 400.0}],
                  dt50_days=dt50, tillage_depth_m=0.2)
    out = etr_risk_model(np.ones((30, 1, 2)), 0, ctx, plateau_years=n, **common)
    year_dose = 1000.0 / (10 * 0.05 * 1500)  # both applications' initial PEC, mg/kg
    # Each earlier year y = 1..n leaves e^(-k 365 y) of its dose, mixed from 5 into 20 cm.
    ref = sum(year_dose * (0.05 / 0.2) * math.exp(-k * 365 * y) for y in range(1, n + 1))
    plat = _rows(out, "pec_plateau_mg_kg")
    assert plat[0] == pytest.approx(ref, rel=1e-12)
    season = 400 / (10 * 0.05 * 1500) + 600 / (10 * 0.05 * 1500) * math.exp(-k * 17)
    assert _rows(out, "pec_max_mg_kg")[0] == pytest.approx(ref + season, rel=1e-12)
    inf = etr_risk_model(np.ones((30, 1, 2)), 0, ctx, plateau_years=math.inf, **common)
    far = sum(year_dose * 0.25 * math.exp(-k * 365 * y) for y in range(1, 2000))
    assert _rows(inf, "pec_plateau_mg_kg")[0] == pytest.approx(far, rel=1e-9)


def _temperature_nc(path, n_time=9):
    """Monthly-ish steps of 30 days (360_day calendar) with a varying temperature in K."""
    shutil.copy(write_risk_nc(path.with_suffix(".tmp.nc"), n_time=n_time), path)
    ds = xr.open_dataset(path, decode_times=False).load()
    ds.close()
    ds["time"].attrs["calendar"] = "360_day"
    rng = np.random.default_rng(3)
    soil_t = (278 + 20 * rng.random((n_time, 3, 4))).astype(np.float64)
    soil_t[min(4, n_time - 1), 2, 3] = np.nan  # a gap: that cell's PEC is NULL from then on
    ds["soil_t"] = (("time", "lat", "lon"), soil_t, {"units": "K"})
    ds.to_netcdf(path)
    return path, soil_t


def _reference_arrhenius_pec(soil_t, days, app_days, pec0, k):
    """Per-step loop: τ accumulates f(T_i) (d_{i+1} − d_i); doses decay with e^(−k Δτ)."""
    n_t = len(days)
    out = np.zeros((n_t,) + soil_t.shape[1:])
    ea_r = 65400.0 / 8.314462618
    f = np.exp(-ea_r * (1 / soil_t - 1 / 293.15))
    tau = np.zeros(soil_t.shape[1:])
    tau_at = []
    for i in range(n_t):
        for d in app_days:
            if days[i] <= d < (days[i + 1] if i + 1 < n_t else np.inf):
                tau_at.append(tau + f[i] * (d - days[i]))
        out[i] = sum(np.where(days[i] >= d, c0 * np.exp(-k * (tau - ta)), 0.0)
                     for d, ta, c0 in zip(app_days, tau_at, pec0, strict=False))
        if i + 1 < n_t:
            tau = tau + f[i] * (days[i + 1] - days[i])
    return out


@pytest.mark.parametrize("starts", [[0], [0, 2, 5, 7]])
def test_arrhenius_shards_match_one_pass(tmp_path, starts):
    path, soil_t = _temperature_nc(tmp_path / "t.nc")
    cells = cells_settings({"model": "etr_risk", "params": {
        "applications": [{"date": "2000-01-16"}, {"date": "2000-03-11", "rate_g_ha": 500.0}],
        "dt50_days": 30.0, "temperature_variable": "soil_t", "twa_windows_days": [7]}})
    got = {}
    with open_series(str(path), "tas") as s:
        soil.check_run(s, cells)
        state = soil.write_series_degradation_state(s, cells["params"], starts,
                                                    tmp_path / "d.npy", tmp_path / "d.json")
        assert state["steps"] == starts
        bounds = [*starts, s.n_time]
        for a, b in zip(bounds, bounds[1:], strict=False):  # each shard: a fresh job
            rows = ShardRows.for_series(
                s, cell_mean=np.zeros((3, 4)), cells=CellsSettings.from_params(cells),
                state={"degradation": soil.read_degradation_state(tmp_path / "d.npy",
                                                                  tmp_path / "d.json")})
            for t in range(a, b):  # one step per block: the clock carries on between blocks
                out = rows.rows(t, s.read(t, t + 1))
                for ti, c, v in zip(out["time_index"], out["cell_id"], out["pec_act_mg_kg"],
                                    strict=True):
                    got[(int(ti), int(c))] = v
        buf = io.BytesIO()
        rows.write(buf, s.n_time - 1, s.read(s.n_time - 1, s.n_time))
    days = np.arange(9) * 30.0  # 360_day: 2000-01-01 + 30 d steps
    ref = _reference_arrhenius_pec(soil_t, days, [15.0, 70.0],
                                   [1000.0 / 750.0, 500.0 / 750.0], LN2 / 30.0)
    for (t, c), v in got.items():
        iy, ix = divmod(c, 4)
        r = ref[t, iy, ix]
        if np.isnan(r):
            assert np.isnan(v)
        else:
            assert v == pytest.approx(r, rel=1e-10, abs=1e-14), (t, c)
    assert np.isnan(got[(5, 11)]) and not np.isnan(got[(4, 11)])
    assert len(got) == 9 * 12 - 1  # the missing tas cell at step 1 gives no row


def test_settings_checks_and_etr_deprecation(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        c = cells_settings({"model": "etr_risk", "etr": {"ec50_mg_kg": 2.0}})
    assert c["params"]["ec50_mg_kg"] == 2.0
    assert "'cells.etr' is deprecated: move ec50_mg_kg to cells.params" in caplog.text
    with pytest.raises(NcreelError, match="both set ec50_mg_kg"):
        cells_settings({"model": "etr_risk", "etr": {"ec50_mg_kg": 2.0},
                        "params": {"ec50_mg_kg": 3.0}})
    with pytest.raises(NcreelError, match="cells.model is 'field'"):
        cells_settings({"model": "field", "etr": {"ec50_mg_kg": 2.0}})
    with pytest.raises(NcreelError, match="unknown setting"):
        cells_settings({"model": "etr_risk", "params": {"ec_50": 2.0}})
    with pytest.raises(NcreelError, match="'cells.params.dt50_days': must be > 0"):
        cells_settings({"model": "etr_risk", "params": {"first_application": "2000-01-02",
                                                     "dt50_days": 0}})
    with pytest.raises(NcreelError, match="plateau_years.*needs dt50_days"):
        cells_settings({"model": "etr_risk", "params": {"first_application": "2000-01-02",
                                                     "plateau_years": math.inf}})
    path, _ = _temperature_nc(tmp_path / "t.nc", n_time=3)
    with open_series(str(path), "tas") as s:
        for etr, match in [
            ({"first_application": "1999-12-01"}, "1999-12-01T00:00:00 is outside the series"),
            ({"first_application": "2000-02-31"}, "not a date of calendar"),
            ({"first_application": "2000-01-02", "temperature_variable": "soil_t",
              "temperature_units": "degC"}, "'soil_t' has units 'K'"),
            ({"first_application": "2000-01-02", "temperature_variable": "nope"},
             "no variable 'nope'"),
            ({"interception_variable": "icpt"}, "no variable 'icpt'"),
        ]:
            with pytest.raises(NcreelError, match=match):
                soil.check_run(s, cells_settings({"model": "etr_risk", "params": etr}))
        # 360_day has 2000-02-30.
        soil.check_run(s, cells_settings({"model": "etr_risk",
                                          "params": {"first_application": "2000-02-30"}}))


def test_temperature_units_in_any_udunits_spelling_are_accepted(tmp_path):
    import netCDF4

    path, _ = _temperature_nc(tmp_path / "t.nc", n_time=3)
    for spelling, ok in (("deg_C", True), ("degree_Celsius", True), ("K", False),
                         ("Celsius degrees please", False)):
        with netCDF4.Dataset(path, "a") as nc:
            nc["soil_t"].units = spelling
        etr = {"first_application": "2000-01-02", "temperature_variable": "soil_t",
               "temperature_units": "degC"}
        with open_series(str(path), "tas") as s:
            settings = cells_settings({"model": "etr_risk", "params": etr})
            if ok:
                soil.check_run(s, settings)
            else:
                with pytest.raises(NcreelError, match=f"'soil_t' has units '{spelling}'"):
                    soil.check_run(s, settings)


@pytest.mark.integration
def test_workflow_runs_prepass_and_independent_shards(tmp_path, pg_server):
    """snakemake on a tiny file, 3 shards: the table equals one in-process pass."""
    from workflow_run import make_workdir, psql_load, snakemake

    (tmp_path / "w").mkdir()
    work = make_workdir(tmp_path / "w")
    path, _ = _temperature_nc(work / "t.nc")
    etr = {"applications": [{"date": "2000-01-16"}, {"date": "2000-03-11"}],
           "dt50_days": 30.0, "temperature_variable": "soil_t", "plateau_years": 3,
           "twa_windows_days": [7, 21]}
    (work / "etr.yaml").write_text(json.dumps({
        "input": "t.nc", "variable": "tas", "run": "etr", "width": 160, "height": 96,
        "dpi": 40, "preset": "ultrafast", "frames_per_shard": 3, "calibration_frames": 2,
        "cells": {"model": "etr_risk", "params": etr}}))
    snakemake(work, "--configfile", "etr.yaml")
    res = work / "results/etr"
    assert json.loads((res / "degradation_state.json").read_text())["steps"] == [0, 3, 6]
    with open_series(str(path), "tas") as s:
        cells = cells_settings({"model": "etr_risk", "params": etr})
        rows = ShardRows.for_series(s, cell_mean=np.zeros((3, 4)),
                                    cells=CellsSettings.from_params(cells))
        buf = io.BytesIO()
        rows.write(buf, 0, s.read(0, s.n_time))  # one block, pre-pass in-process
    got = [ln.split("\t") for ln in (res / "cells.copy").read_text().splitlines()]
    want = [ln.split("\t") for ln in buf.getvalue().decode().splitlines()]
    assert len(got) == len(want) == 9 * 12 - 1
    for g, w in zip(got, want, strict=True):  # equal up to rounding (sums in another order)
        for a, b in zip(g, w, strict=True):
            if a != b:
                assert float(a) == pytest.approx(float(b), rel=1e-12), (g, w)
    psql_load(pg_server, res)
    import psycopg

    with psycopg.connect(host=pg_server["host"], user="postgres", dbname="postgres") as conn:
        n, flagged, tmax = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE etr_acute_exceeded), "
            "max(pec_season_max_time) FROM ncreel_etr").fetchone()
    assert n == 9 * 12 - 1 and flagged > 0 and tmax == "2000-03-11T00:00:00"


def test_render_memory_grows_with_model_columns():
    from ncreel.config.settings import Calibration
    from ncreel.run.resources import render_mem_mb_calibrated

    cal = Calibration(width=960, height=540, dpi=100, preset="medium", crf=18, probe_frames=64,
                      base_mb=150.0, worker_peak_mb=250.0, encoder_peak_mb=60.0,
                      encoder_cpu_s_per_frame=0.01, startup_s=2.0, seconds_per_frame=0.05,
                      render_s_per_frame=0.03, target_minutes=10, frames_per_shard=100,
                      workers=1)
    kw = dict(ny=720, nx=1440, n_frames=10)
    field = render_mem_mb_calibrated(cal, **kw)
    assert render_mem_mb_calibrated(cal, **kw, n_columns=8) == field
    # etr_risk with the Arrhenius time course: 25 columns, measured ~365 bytes per value.
    assert render_mem_mb_calibrated(cal, **kw, n_columns=25) >= (250 + 1_036_800 * 365 / 2**20)
