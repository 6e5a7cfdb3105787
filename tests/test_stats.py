"""Series statistics (colour limits, cell means) for any field, against numpy on all values.

Narrow-range float32 fields (fewer than N_BINS float32 steps between min and max), constant
fields, integers and missing steps, each written as a small NetCDF file by the test.
"""

import json

import numpy as np
import pytest
import xarray as xr
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.jobs.stats import (
    N_BINS,
    colour_range,
    probe_statistics,
    series_statistics,
    write_statistics,
)

LAT = ("lat", [10.0, 20.0, 30.0], {"units": "degrees_north"})
LON = ("lon", [0.0, 40.0, 80.0, 120.0], {"units": "degrees_east"})


def write(path, values, encoding=None):
    n = values.shape[0]
    ds = xr.Dataset({"tas": (("time", "lat", "lon"), values, {"units": "K"})},
                    coords={"time": ("time", np.arange(n, dtype=np.float64),
                                     {"units": "days since 2000-01-01", "axis": "T"}),
                            "lat": LAT, "lon": LON})
    ds.to_netcdf(path, encoding={"tas": encoding or {}})
    return str(path)


def stats_of(path, **kw):
    # Blocks of two steps: the histogram is filled over several blocks.
    with open_series(path, "tas") as s:
        return series_statistics(s, max_block_bytes=2 * 12 * 8, **kw)


def numpy_truth(path):
    with xr.open_dataset(path) as ds:
        values = ds["tas"].values
    finite = values[np.isfinite(values)]
    return finite, np.percentile(finite.astype(np.float64), [2, 98])


@pytest.mark.parametrize("spread", [1.3, 1.75])
def test_narrow_float32_percentiles_are_numpys(tmp_path, spread):
    # 1.3 K and 1.75 K around 290 K in float32: 43 000 / 57 000 float32 steps, fewer than
    # N_BINS; a float32 histogram of N_BINS bins over that range cannot be built.
    rng = np.random.default_rng(3)
    values = (290.0 + rng.uniform(0, spread, (40, 3, 4))).astype(np.float32)
    path = write(tmp_path / "narrow.nc", values)
    stats, cell_mean = stats_of(path)
    finite, (p2, p98) = numpy_truth(path)
    assert stats["binning"] == "values"
    assert stats["vmin"] == pytest.approx(p2, abs=1e-9, rel=1e-12)
    assert stats["vmax"] == pytest.approx(p98, abs=1e-9, rel=1e-12)
    assert (stats["min"], stats["max"]) == (float(finite.min()), float(finite.max()))
    np.testing.assert_allclose(cell_mean, values.astype(np.float64).mean(axis=0), rtol=1e-15)


def test_float32_a_few_steps_apart_is_exact(tmp_path):
    # Three distinct float32 values one step apart: the percentiles are among them.
    base = np.float32(290.0)
    steps = np.array([base, np.nextafter(base, np.float32(300)),
                      np.nextafter(np.nextafter(base, np.float32(300)), np.float32(300))])
    values = np.resize(steps, (5, 3, 4)).astype(np.float32)
    path = write(tmp_path / "steps.nc", values)
    stats, _ = stats_of(path)
    _, (p2, p98) = numpy_truth(path)
    assert (stats["vmin"], stats["vmax"]) == (p2, p98)
    assert stats["vmax"] > stats["vmin"]


def test_integers_are_exact(tmp_path):
    rng = np.random.default_rng(4)
    values = rng.integers(0, 7, (30, 3, 4)).astype(np.int16)
    path = write(tmp_path / "int.nc", values)
    stats, cell_mean = stats_of(path, percentiles=(5.0, 97.5))
    with xr.open_dataset(path) as ds:
        truth = ds["tas"].values.astype(np.float64)
    assert stats["binning"] == "integers"
    np.testing.assert_array_equal([stats["vmin"], stats["vmax"]],
                                  np.percentile(truth, [5, 97.5]))
    np.testing.assert_allclose(cell_mean, truth.mean(axis=0), rtol=1e-15)


def test_wide_float64_with_gaps_is_within_one_bin(tmp_path):
    # Two clusters far apart with the 2nd percentile's rank between them: the answer lies
    # in the empty gap, which no bin's count can place without both order statistics.
    rng = np.random.default_rng(5)
    values = np.where(rng.uniform(size=(50, 3, 4)) < 0.02, rng.uniform(0, 1, (50, 3, 4)),
                      rng.uniform(1e3, 2e3, (50, 3, 4)))
    path = write(tmp_path / "wide.nc", values)
    stats, _ = stats_of(path)
    finite, (p2, p98) = numpy_truth(path)
    tol = (finite.max() - finite.min()) / N_BINS
    assert stats["binning"] == "linear"
    assert abs(stats["vmin"] - p2) <= tol
    assert abs(stats["vmax"] - p98) <= tol


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fields_either_side_of_zero(tmp_path, dtype):
    # Anomalies: float64 order keys of -x and +x are more than 2**63 apart.
    values = np.random.default_rng(6).normal(0.0, 3.0, (20, 3, 4)).astype(dtype)
    path = write(tmp_path / "anom.nc", values)
    stats, _ = stats_of(path)
    finite, (p2, p98) = numpy_truth(path)
    tol = (finite.max() - finite.min()) / N_BINS
    assert stats["binning"] == "linear"
    assert abs(stats["vmin"] - p2) <= tol and abs(stats["vmax"] - p98) <= tol


def test_missing_steps_and_cells(tmp_path):
    values = np.arange(6 * 12, dtype=np.float32).reshape(6, 3, 4)
    values[2] = np.nan           # a whole step missing
    values[:, 0, 0] = np.nan     # a cell never present
    path = write(tmp_path / "gaps.nc", values, {"_FillValue": -999.0})
    stats, cell_mean = stats_of(path)
    finite, (p2, p98) = numpy_truth(path)
    assert stats["n_finite"] == finite.size == 5 * 11
    assert stats["vmin"] == pytest.approx(p2, rel=1e-12)
    assert stats["vmax"] == pytest.approx(p98, rel=1e-12)
    assert np.isnan(cell_mean[0, 0])
    present = np.isfinite(values)
    truth = np.where(present, values, 0).sum(axis=0, dtype=np.float64) / np.maximum(
        present.sum(axis=0), 1)
    np.testing.assert_allclose(cell_mean.reshape(-1)[1:], truth.reshape(-1)[1:])


@pytest.mark.parametrize("value", [290.0, 0.0, -3.0])
def test_constant_field_gets_a_range_around_it(tmp_path, value):
    path = write(tmp_path / "const.nc", np.full((4, 3, 4), value, np.float32))
    with open_series(path, "tas") as s:
        stats = write_statistics(s, tmp_path / "stats.json", tmp_path / "mean.npy")
    margin = abs(value) * 0.05 or 0.05
    assert (stats["vmin"], stats["vmax"]) == (value - margin, value + margin)
    assert (stats["min"], stats["max"]) == (value, value)
    assert stats["widened"].endswith("a constant field")
    assert json.loads((tmp_path / "stats.json").read_text())["vmax"] == value + margin


def test_configured_limit_beyond_the_data_keeps_it(tmp_path):
    values = np.linspace(280, 290, 4 * 12, dtype=np.float32).reshape(4, 3, 4)
    path = write(tmp_path / "f.nc", values)
    with open_series(path, "tas") as s:
        stats = write_statistics(s, tmp_path / "stats.json", tmp_path / "mean.npy",
                                 vmin=300.0)
    assert stats["vmin"] == 300.0 and stats["vmax"] == pytest.approx(315.0)
    assert "configured limit" in stats["widened"]


def test_all_missing_field_stops_with_one_line(tmp_path):
    """A blank movie or an empty table is not a result: the statistics job says so."""
    values = np.full((3, 3, 4), np.nan, np.float32)
    path = write(tmp_path / "empty.nc", values, {"_FillValue": -999.0})
    with open_series(path, "tas") as s:
        for outputs, said in ((("movie", "table"), "the movie would be blank and the table "
                                                    "would have no row"),
                              (("movie",), "so the movie would be blank:"),
                              (("table",), "so the table would have no row:")):
            with pytest.raises(NcreelError) as err:
                write_statistics(s, tmp_path / "stats.json",
                                 tmp_path / "mean.npy" if "table" in outputs else None,
                                 outputs=outputs)
            assert str(err.value).startswith(f"'tas' of {path} has no value (all missing) "
                                             "in the 3 step(s)"), err.value
            assert said in str(err.value) and "time_range" in str(err.value)
    assert not (tmp_path / "stats.json").exists() and not (tmp_path / "mean.npy").exists()
    # The limits of a field without data (a probe's first steps): 0..1, said.
    assert colour_range(np.nan, np.nan)[2] == "no finite value in the series: 0..1"


def test_statistics_compute_only_what_the_outputs_need(tmp_path):
    """outputs [table]: no colour limits (no second pass) but cell means; [movie]: the
    limits and no cell_mean.npy; stats.json records the outputs."""
    rng = np.random.default_rng(3)
    path = write(tmp_path / "t.nc", rng.normal(280, 5, (6, 3, 4)).astype("f4"))
    finite, (p2, p98) = numpy_truth(path)
    with open_series(path, "tas") as s:
        table = write_statistics(s, tmp_path / "a.json", tmp_path / "a.npy",
                                 outputs=("table",))
        movie = write_statistics(s, tmp_path / "b.json", None, outputs=("movie",))
    assert table["vmin"] is None and table["vmax"] is None and table["binning"] is None
    assert table["outputs"] == ["table"] and (tmp_path / "a.npy").exists()
    with xr.open_dataset(path) as ds:
        np.testing.assert_allclose(np.load(tmp_path / "a.npy"), ds["tas"].mean("time"),
                                   rtol=1e-6)
    assert json.loads((tmp_path / "a.json").read_text())["vmin"] is None
    assert movie["outputs"] == ["movie"] and not (tmp_path / "b.npy").exists()
    assert movie["vmin"] == pytest.approx(p2, rel=1e-6)
    assert movie["vmax"] == pytest.approx(p98, rel=1e-6)


def test_probe_statistics_are_the_first_steps_limits(tmp_path):
    """calibrate_render's limits: those of the first steps, computed as the whole series'
    are (numpy's percentiles, configured limits, widening), without reading further."""
    rng = np.random.default_rng(5)
    values = rng.normal(280, 5, (6, 3, 4)).astype("f4")
    values[2:] += 100.0  # later steps far off: the probe must not see them
    path = write(tmp_path / "t.nc", values)
    first = values[:2].astype(np.float64)
    with open_series(path, "tas") as s:
        probe = probe_statistics(s, 2)
        configured = probe_statistics(s, 2, vmin=250.0)
        whole = write_statistics(s, tmp_path / "s.json", None, outputs=("movie",))
        assert probe_statistics(s, 99)["probe_steps"] == 6
    assert probe["probe_steps"] == 2
    assert probe["vmin"] == pytest.approx(np.percentile(first, 2), rel=1e-6)
    assert probe["vmax"] == pytest.approx(np.percentile(first, 98), rel=1e-6)
    assert (probe["min"], probe["max"]) == (first.min(), first.max())
    assert configured["vmin"] == 250.0 and configured["vmax"] == probe["vmax"]
    assert whole["vmax"] > probe["vmax"] + 50.0
    assert probe["widened"] is None


@pytest.mark.parametrize("lo, hi, vmin, vmax, expected", [
    (1.0, 2.0, None, None, (1.0, 2.0, None)),
    (1.0, 2.0, 0.0, None, (0.0, 2.0, None)),
    (np.nan, np.nan, None, None, (0.0, 1.0, "no finite value in the series: 0..1")),
    (4.0, 4.0, None, None, (3.8, 4.2, "widened 5 % around 4: a constant field")),
    (1.0, 2.0, 3.0, None, (3.0, 3.15, "widened 5 % around 3: the configured limit "
                                      "leaves no room for the computed other")),
    (np.nan, np.nan, None, 5.0, (4.75, 5.0, "widened 5 % around 5: the configured limit "
                                            "leaves no room for the computed other")),
])
def test_colour_range(lo, hi, vmin, vmax, expected):
    got = colour_range(lo, hi, vmin, vmax)
    assert got[:2] == pytest.approx(expected[:2]) and got[2] == expected[2]


def test_a_field_away_from_zero_is_read_once_and_exact(tmp_path):
    """Kelvin temperatures (200..330 K, float32): every value counted in the first pass,
    the percentiles numpy's exactly, no second read. Blocks that widen the range on
    either side keep the counts of the earlier ones."""
    rng = np.random.default_rng(7)
    values = rng.uniform(250, 260, (40, 3, 4)).astype(np.float32)
    values[10] = rng.uniform(200, 210, (3, 4))  # later blocks: lower, then higher
    values[30] = rng.uniform(320, 330, (3, 4))
    values[5, 1, 1] = np.nan
    path = write(tmp_path / "k.nc", values)
    stats, _ = stats_of(path)
    finite, (p2, p98) = numpy_truth(path)
    assert stats["reads"] == 1 and stats["binning"] == "values"
    assert (stats["vmin"], stats["vmax"]) == (pytest.approx(p2, rel=1e-12),
                                              pytest.approx(p98, rel=1e-12))
    assert (stats["min"], stats["max"]) == (float(finite.min()), float(finite.max()))


@pytest.mark.parametrize("case", ["across_zero", "far_later_block", "float64"])
def test_fields_counting_cannot_hold_are_read_twice(tmp_path, case):
    """Values on both sides of zero span most float32 bit patterns, a later block may
    leave the counted span, float64 values lie too densely: a second read, as before."""
    rng = np.random.default_rng(8)
    values = rng.uniform(-5, 5, (20, 3, 4)).astype(np.float32)
    if case == "far_later_block":
        values = rng.uniform(250, 260, (20, 3, 4)).astype(np.float32)
        values[15] = 2.0e6
    if case == "float64":
        values = rng.uniform(250, 260, (20, 3, 4))
    path = write(tmp_path / f"{case}.nc", values)
    stats, _ = stats_of(path)
    finite, (p2, p98) = numpy_truth(path)
    assert stats["reads"] == 2
    tol = (finite.max() - finite.min()) / N_BINS
    assert stats["vmin"] == pytest.approx(p2, abs=tol)
    assert stats["vmax"] == pytest.approx(p98, abs=tol)


@pytest.mark.parametrize("case", ["negative", "signed_zeros"])
def test_counted_fields_below_and_at_zero_are_exact(tmp_path, case):
    """Counting in the first pass is exact whatever the sign: a field below zero (°C in
    winter, float32) and one whose smallest values are 0.0 and -0.0 (the same key)."""
    rng = np.random.default_rng(9)
    values = rng.uniform(-30, -20, (20, 3, 4)).astype(np.float32)
    if case == "signed_zeros":
        tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
        values = rng.integers(0, 50, (20, 3, 4)).astype(np.float32) * tiny
        values[3, 1, 2], values[4, 0, 0] = -0.0, 0.0
    path = write(tmp_path / f"{case}.nc", values)
    stats, _ = stats_of(path)
    finite, (p2, p98) = numpy_truth(path)
    assert stats["reads"] == 1 and stats["binning"] == "values"
    assert (stats["vmin"], stats["vmax"]) == (pytest.approx(p2, rel=1e-12, abs=0),
                                              pytest.approx(p98, rel=1e-12, abs=0))


def test_without_cell_means_the_statistics_are_the_same(tmp_path):
    rng = np.random.default_rng(10)
    values = rng.uniform(250, 260, (12, 3, 4)).astype(np.float32)
    values[2, 0, 1] = np.nan
    path = write(tmp_path / "m.nc", values)
    with_means, cell_mean = stats_of(path)
    without, none = stats_of(path, means=False)
    assert none is None and cell_mean.shape == (3, 4)
    assert without == with_means


def _case_values(case):
    rng = np.random.default_rng(11)
    values = rng.uniform(250, 260, (40, 3, 4)).astype(np.float32)
    if case == "kelvin":  # counted: one read; parts widen the range either side
        values[3] = rng.uniform(200, 210, (3, 4))
        values[35] = rng.uniform(320, 330, (3, 4))
    else:  # each part counts alone, not both together: a second read, in the workers
        values[20:] = rng.uniform(2.0e6, 2.0e6 + 1, (20, 3, 4))
        values[24:30] = np.nan  # and a stretch with no value at all
    values[5, 1, 1] = np.nan
    return values


@pytest.mark.parametrize("case", ["kelvin", "parts_apart"])
def test_statistics_in_worker_processes_are_one_processs(tmp_path, case):
    """Parts read by 2 worker processes merge into what one process finds: the same
    limits, counts, extremes and reads (exactly), and the same cell means to float64
    rounding."""
    import functools

    from ncreel.jobs.stats import _ranges

    path = write(tmp_path / f"{case}.nc", _case_values(case))
    with open_series(path, "tas") as s:
        assert _ranges(s, 2) == [(0, 20), (20, 40)]
    one, mean_one = stats_of(path)
    two, mean_two = stats_of(path, workers=2,
                                 reopen=functools.partial(open_series, path, "tas"))
    assert two == one
    np.testing.assert_allclose(mean_two, mean_one, rtol=1e-14, atol=0)
    assert np.array_equal(np.isnan(mean_two), np.isnan(mean_one))
    finite, (p2, p98) = numpy_truth(path)
    assert one["n_finite"] == finite.size
    assert one["reads"] == (1 if case == "kelvin" else 2)
    if case == "kelvin":
        assert (one["vmin"], one["vmax"]) == (pytest.approx(p2, rel=1e-12),
                                              pytest.approx(p98, rel=1e-12))
