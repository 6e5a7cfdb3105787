"""Cell models: field, etr_risk (hand-computed values), user models and their contract."""

from __future__ import annotations

import io
import textwrap

import numpy as np
import polars as pl
import pytest
from cells_data import write_risk_nc
from ncreel.cells import (
    CellContext,
    CellGeometry,
    ShardRows,
    cells_settings,
    check_columns,
    corners_from_centres,
    etr_risk_model,
    field_model,
    pec_soil,
    resolve_model,
    risk_level,
    series_columns,
)
from ncreel.config.settings import CellsSettings
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.input.timeaxis import TimeAxis


def _ctx(n_t=2, ny=2, nx=2, read_variable=None, variable="v"):
    time = TimeAxis(values=np.arange(n_t, dtype=float), labels=[f"2000-01-0{i + 1}T00:00:00"
                                                                for i in range(n_t)],
                    calendar="standard", units="days since 2000-01-01", decoded=True)
    lat, lon = np.meshgrid(np.arange(ny, dtype=float), np.arange(nx, dtype=float),
                           indexing="ij")
    return CellContext(time=time, cell_mean=np.zeros((ny, nx)), lat=lat, lon=lon,
                       variable=variable, read_variable=read_variable)


def test_pec_soil_matches_focus_textbook_value():
    # FOCUS: 1 kg/ha into 5 cm of soil at 1.5 g/cm3 -> 1.333 mg/kg.
    pec = pec_soil(application_rate_g_ha=1000, interception_percent=0, correction_factor=1,
                   assumed_depth_m=0.05, soil_density_kg_m3=1500)
    assert pec == pytest.approx(1000 / (100 * 5 * 1.5))


def test_etr_risk_matches_hand_computation():
    # Interception per cell at step 0 and 1 (percent); one NaN.
    icpt = np.array([[[25.0, 100.0], [97.0, 99.7]],
                     [[0.0, np.nan], [50.0, 10.0]]])
    ctx = _ctx(read_variable=lambda name, a, b: icpt[a:b])
    block = np.ones((2, 2, 2), dtype=np.float32)
    block[1, 1, 1] = np.nan  # no row for this cell and step
    out = etr_risk_model(block, 0, ctx, application_rate_g_ha=1000.0, correction_factor=2.0,
                         assumed_depth_m=0.05, soil_density_kg_m3=1500.0, ec50_mg_kg=0.5,
                         thresholds=[0.01, 0.1, 1.0], interception_variable="icpt")
    # By hand: PEC = 1000 g/ha * (1 - I/100) * 2 * 1000 mg/g / (10000 m2/ha * 0.05 m * 1500
    # kg/m3) = 2.6667 * (1 - I/100) mg/kg; ETR = PEC / 0.5.
    pec = [2.0, 0.0, 0.08, 0.008, 8 / 3, None, 4 / 3]
    etr = [4.0, 0.0, 0.16, 0.016, 16 / 3, None, 8 / 3]
    cls = ["high", "very low", "medium", "low", "high", None, "high"]
    assert list(out["cell_id"]) == [0, 1, 2, 3, 0, 1, 2]
    assert list(out["time_index"]) == [0, 0, 0, 0, 1, 1, 1]
    for k in range(7):
        if pec[k] is None:
            assert np.isnan(out["pec_soil_mg_kg"][k]) and np.isnan(out["etr"][k])
        else:
            assert out["pec_soil_mg_kg"][k] == pytest.approx(pec[k], abs=1e-12)
            assert out["etr"][k] == pytest.approx(etr[k], abs=1e-12)
    assert out["risk_class"].to_list() == cls
    assert out["time"].to_list()[4] == "2000-01-02T00:00:00"


def test_etr_constant_interception_and_bad_thresholds():
    ctx = _ctx()
    out = etr_risk_model(np.ones((1, 2, 2)), 0, ctx, interception_percent=50.0)
    assert np.allclose(out["pec_soil_mg_kg"], 1000 * 0.5 / (10 * 0.05 * 1500))
    with pytest.raises(NcreelError, match="thresholds"):
        etr_risk_model(np.ones((1, 2, 2)), 0, ctx, thresholds=[1.0, 0.1, 0.01])


def test_risk_level_edges():
    lv = risk_level(np.array([0.0, 0.01, 0.0999, 0.1, 1.0, np.inf, np.nan]), [0.01, 0.1, 1.0])
    assert lv.tolist() == [0, 1, 1, 2, 3, 3, -1]


def test_field_model_rows_skip_missing_cells():
    ctx = _ctx()
    block = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    block[0, 1, 0] = np.nan
    out = field_model(block, 3, ctx.__class__(**{**ctx.__dict__,
                                                 "time": TimeAxis(np.arange(5.0),
                                                                  [str(i) for i in range(5)],
                                                                  "standard", "", True)}))
    assert list(out["time_index"]) == [3, 3, 3, 4, 4, 4, 4]
    assert list(out["cell_id"]) == [0, 1, 3, 0, 1, 2, 3]
    assert out["value"].dtype == np.float32


def _user_module(tmp_path, body):
    (tmp_path / "mymodels.py").write_text(textwrap.dedent(body))
    return tmp_path


GOOD = """
import numpy as np
from ncreel.cells import cell_model

def cols(ctx, scale=1.0):
    return [("cell_id", "bigint"), ("scaled", "double precision"), ("hot", "boolean")]

@cell_model(columns=cols)
def scaled(block, t0, ctx, scale=1.0):
    flat = block.reshape(block.shape[0], -1)
    t, cell = np.nonzero(np.isfinite(flat))
    v = flat[t, cell] * scale
    return {"cell_id": cell, "scaled": v, "hot": v > 2}

@cell_model(columns=cols)
def wrong_dtype(block, t0, ctx, scale=1.0):
    return {"cell_id": np.zeros(2), "scaled": np.zeros(2), "hot": np.zeros(2, bool)}

@cell_model(columns=cols)
def wrong_names(block, t0, ctx, scale=1.0):
    return {"cell_id": np.zeros(2, int), "scaled": np.zeros(2)}

@cell_model(columns=cols)
def wrong_length(block, t0, ctx, scale=1.0):
    return {"cell_id": np.zeros(2, int), "scaled": np.zeros(3), "hot": np.zeros(2, bool)}

def no_columns(block, t0, ctx):
    return {}

@cell_model(columns=lambda ctx: [("run", "text")])
def reserved(block, t0, ctx):
    return {}
"""


def test_user_model_plugs_in_and_writes(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_user_module(tmp_path, GOOD)))
    m = resolve_model("mymodels:scaled", {"scale": 2.0})
    ctx = _ctx()
    decl = m.columns(ctx)
    out = check_columns(m.name, decl, m(np.ones((1, 2, 2), np.float32), 0, ctx))
    assert out["scaled"].dtype == np.float64 and out["cell_id"].dtype == np.int64
    assert out["hot"].tolist() == [False] * 4


@pytest.mark.parametrize("fn, match", [
    ("wrong_dtype", "column 'cell_id' \\(bigint\\): needs integer"),
    ("wrong_names", "returned columns differ from columns\\(\\): missing \\['hot'\\]"),
    ("wrong_length", "column 'scaled' has 3 rows"),
])
def test_user_model_output_is_validated(tmp_path, monkeypatch, fn, match):
    monkeypatch.syspath_prepend(str(_user_module(tmp_path, GOOD)))
    m = resolve_model(f"mymodels:{fn}")
    ctx = _ctx()
    with pytest.raises(NcreelError, match=f"cell model 'mymodels:{fn}': {match}"):
        check_columns(m.name, m.columns(ctx), m(np.ones((1, 2, 2)), 0, ctx))


def test_bad_model_names(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_user_module(tmp_path, GOOD)))
    with pytest.raises(NcreelError, match="unknown model 'nope'"):
        resolve_model("nope")
    with pytest.raises(NcreelError, match="cannot import 'no_such_pkg.mod'"):
        resolve_model("no_such_pkg.mod:fn")
    with pytest.raises(NcreelError, match="columns"):
        resolve_model("mymodels:no_columns")
    with pytest.raises(NcreelError, match="column 'run' is reserved"):
        resolve_model("mymodels:reserved").columns(_ctx())


def test_real_column_rejects_float64():
    with pytest.raises(NcreelError, match="'real' needs float32"):
        check_columns("m", [("x", "real")], {"x": np.zeros(2)})


def test_geometry_from_cf_bounds_and_midpoints(tmp_path):
    path = write_risk_nc(tmp_path / "r.nc")
    with open_series(str(path), "tas") as s:
        lat, lon = s.cell_coordinates()
        g = CellGeometry.from_dataset(s._dataset(0), y_dim=s.y_dim, x_dim=s.x_dim,
                                      lat=lat, lon=lon)
    # lat 40,45,50 with bounds +-0.9 * 2.5; lon -10,-5,0,5 with bounds +-0.9 * 2.5.
    poly = g.polygons(np.array([0])).to_list()[0]
    assert poly == ("SRID=4326;MULTIPOLYGON(((-12.25 37.75,-7.75 37.75,-7.75 42.25,-12.25 42.25,"
                    "-12.25 37.75)))")
    assert corners_from_centres(np.array([0.0, 1.0, 3.0])).tolist() == [-0.5, 0.5, 2.0, 4.0]


def test_shard_rows_with_geometry_and_interception_variable(tmp_path, pg_conn):
    path = write_risk_nc(tmp_path / "r.nc")
    cells = cells_settings({"model": "etr_risk", "geometry": "text",
                            "params": {"interception_variable": "intercept"}})
    with open_series(str(path), "tas") as s:
        rows = ShardRows.for_series(s, cell_mean=np.zeros((s.ny, s.nx)),
                                    cells=CellsSettings.from_params(cells))
        decl = series_columns(s, cells)
        buf = io.BytesIO()
        n = rows.write(buf, 0, s.read(0, 3))
        icpt = s.read_variable("intercept", 0, 3)
    assert decl == rows.columns and decl[-1] == ("geom", "text")
    assert n == 3 * 12 - 1  # one missing tas cell at step 1
    cols = ", ".join(f"{c} {t}" for c, t in decl)
    pg_conn.execute(f"CREATE TEMP TABLE etr ({cols})")
    with pg_conn.cursor() as cur, cur.copy("COPY etr FROM STDIN") as copy:
        copy.write(buf.getvalue())
    got = pg_conn.execute("SELECT time_index, cell_id, interception_percent, pec_soil_mg_kg, "
                          "risk_class, geom, time FROM etr ORDER BY time_index, cell_id"
                          ).fetchall()
    by_key = {(r[0], r[1]): r for r in got}
    ti, cid, i_pct, pec, cls, geom, _ = by_key[(0, 5)]
    assert i_pct == icpt[0, 1, 1]
    assert pec == pytest.approx(1000 * (1 - icpt[0, 1, 1] / 100) / (10 * 0.05 * 1500))
    assert geom.startswith("SRID=4326;MULTIPOLYGON(((") and geom.count(",") == 4
    assert by_key[(2, 5)][3] is None and by_key[(2, 5)][4] is None  # NaN interception
    assert (1, 0) not in by_key


def test_polars_series_text_columns_are_accepted():
    out = check_columns("m", [("c", "text")], {"c": pl.Series(["a", None])})
    assert out["c"].to_list() == ["a", None]


def test_geometry_midpoints_and_curvilinear():
    lat, lon = np.meshgrid([10.0, 20.0], [0.0, 1.0, 3.0], indexing="ij")
    g = CellGeometry.from_dataset(_NoVars(), y_dim="lat",
                                  x_dim="lon", lat=lat, lon=lon)
    assert g.polygons(np.array([5])).to_list() == [
        "SRID=4326;MULTIPOLYGON(((2.0 15.0,4.0 15.0,4.0 25.0,2.0 25.0,2.0 15.0)))"]
    curv = CellGeometry.from_dataset(_NoVars(), y_dim="y", x_dim="x", lat=lat + lon * 0.1,
                                     lon=lon)
    assert curv.polygons(np.array([0])).to_list()[0].startswith("SRID=4326;MULTIPOLYGON(((-0.5 ")


class _NoVars:
    variables: dict = {}


def test_geometry_rows_are_written_in_bounded_slices(tmp_path):
    path = write_risk_nc(tmp_path / "r.nc")
    cells = cells_settings({"model": "field", "geometry": "text"})
    outs = []
    with open_series(str(path), "tas") as s:
        for chunk in (5, 10_000):
            rows = ShardRows.for_series(s, cell_mean=np.zeros((s.ny, s.nx)),
                                    cells=CellsSettings.from_params(cells))
            rows.geometry_chunk_rows = chunk
            buf = io.BytesIO()
            assert rows.write(buf, 0, s.read(0, 6)) == 6 * 12 - 1
            outs.append(buf.getvalue())
    assert outs[0] == outs[1] and outs[0].count(b"\n") == 71


def test_field_params_and_etr_without_model_are_refused():
    # field takes no parameters: cells.params were silently dropped; cells.etr without a
    # model said "cells.model is None" although the model defaults to field.
    from ncreel.core.errors import NcreelError

    with pytest.raises(NcreelError, match=r"'cells.params' \(x\): cells.model 'field' takes no"):
        cells_settings({"model": "field", "params": {"x": 1}})
    with pytest.raises(NcreelError, match=r"cells.model is 'field': set cells.model to etr_risk"):
        cells_settings({"etr": {"interception_percent": 30}})
    assert cells_settings({"model": "field", "params": {}})["params"] == {}
