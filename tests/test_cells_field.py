"""The default 'field' cell model and the series statistics, against xarray."""

import numpy as np
import pytest
import xarray as xr
from ncreel.cells import CellContext, field_columns, field_model
from ncreel.input.source import open_series
from ncreel.jobs.stats import N_BINS, series_statistics


@pytest.fixture(scope="module")
def sample(sample_nc):
    with open_series(str(sample_nc), "air_temperature") as s:
        stats, cell_mean = series_statistics(s, max_block_bytes=37 * 49 * 4 * 50)
        lat, lon = s.cell_coordinates()
        ctx = CellContext(time=s.time_axis(), cell_mean=cell_mean, lat=lat, lon=lon)
        yield s, stats, ctx


def test_cell_mean_and_percentiles_match_xarray(sample, sample_nc):
    _, stats, ctx = sample
    da = xr.open_dataset(sample_nc)["air_temperature"]
    np.testing.assert_allclose(ctx.cell_mean, da.mean("time", dtype=np.float64).values,
                               rtol=0, atol=1e-9)
    values = da.values.astype(np.float64)
    tol = (values.max() - values.min()) / N_BINS
    assert abs(stats["vmin"] - np.percentile(values, 2)) <= tol
    assert abs(stats["vmax"] - np.percentile(values, 98)) <= tol
    assert stats["n_finite"] == 240 * 37 * 49


def test_rows_and_anomaly_match_xarray(sample, sample_nc):
    s, _, ctx = sample
    cols = field_model(s.read(10, 13), 10, ctx)
    assert list(cols) == [name for name, _ in field_columns(ctx)]
    da = xr.open_dataset(sample_nc, decode_times=False)["air_temperature"]
    anomaly = (da - da.astype(np.float64).mean("time")).isel(time=slice(10, 13))
    assert len(cols["value"]) == 3 * 37 * 49
    # cell_id is row-major iy * nx + ix; rows ordered by time then cell_id
    for row in (0, 1, 49, 1812, 3 * 1813 - 1, 2000):
        t, cell = divmod(row, 37 * 49)
        iy, ix = divmod(cell, 49)
        assert cols["time_index"][row] == 10 + t
        assert cols["cell_id"][row] == cell
        assert cols["value"][row] == da.values[10 + t, iy, ix]
        assert cols["lat"][row] == da.latitude.values[iy]
        assert cols["lon"][row] == da.longitude.values[ix]
        assert cols["time_value"][row] == da.time.values[10 + t]
        assert cols["anomaly"][row] == pytest.approx(float(anomaly.values[t, iy, ix]), abs=1e-9)
    assert cols["time"][0] == "1870-06-01T00:00:00"


def test_missing_cells_give_no_rows(eofs_data):
    with open_series(str(eofs_data / "sst_ndjfm_anom.nc"), "sst") as s:
        block = s.read(0, 2)
        ctx = CellContext(time=s.time_axis(), cell_mean=np.zeros((s.ny, s.nx)), lat=None,
                          lon=None, value_type="double precision")
        cols = field_model(block, 0, ctx)
    assert len(cols["value"]) == int(np.isfinite(block).sum()) < block.size
    assert np.isfinite(cols["value"]).all()
    assert np.isnan(cols["lat"]).all()  # no coordinates given: NULL columns


def test_infinite_values_are_rows_nan_is_not(pg_server, pg_conn, tmp_path):
    """±inf is a value (a row, loaded as Infinity); NaN is missing (no row): README agrees."""
    from ncreel.input.timeaxis import TimeAxis
    from ncreel.pg.copytext import open_copy_writer, write_copy_rows
    from ncreel.pg.load import load_copy

    block = np.array([[[1.0, np.inf], [-np.inf, np.nan]]], dtype=np.float32)
    time = TimeAxis(values=np.array([0.0]), labels=["2000-01-01T00:00:00"], calendar="standard",
                    units="days since 2000-01-01", decoded=True)
    ctx = CellContext(time=time, cell_mean=np.array([[1.0, 2.0], [3.0, np.nan]]),
                      lat=None, lon=None)
    cols = field_model(block, 0, ctx)
    assert list(cols["cell_id"]) == [0, 1, 2]
    assert list(cols["value"]) == [1.0, np.inf, -np.inf]
    assert list(cols["anomaly"]) == [0.0, np.inf, -np.inf]
    with open_copy_writer(tmp_path / "c.copy", "none") as fh:
        write_copy_rows(fh, cols)
    load_copy(tmp_path / "c.copy", conninfo=pg_server["conninfo"], table="inf_cells", run="i",
              columns=field_columns(ctx))
    got = pg_conn.execute("select value, anomaly from inf_cells order by cell_id").fetchall()
    assert got == [(1.0, 0.0), (np.inf, np.inf), (-np.inf, -np.inf)]
