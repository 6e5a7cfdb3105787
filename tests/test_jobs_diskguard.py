"""ncreel.jobs.diskguard: each output's predicted size against the free space where it goes,
before any job; the predictions against what the jobs really write."""

from __future__ import annotations

import numpy as np
import pytest
from ncreel.cells import ShardRows, cells_settings
from ncreel.config.settings import CellsSettings
from ncreel.core.errors import NcreelError
from ncreel.input.source import open_series
from ncreel.jobs.diskguard import Need, check_disk, copy_bytes_per_step, predicted_needs
from ncreel.jobs.runconfig import load_config
from ncreel.pg.copytext import open_copy_writer
from snakemake.utils import validate
from test_runconfig import user_config


def _free(avail, device=1):
    return lambda path: (float(avail), f"/scratch/{path}", device)


def test_a_run_that_cannot_fit_stops_naming_both_numbers_and_the_ways_out():
    needs = [Need("table (shard files and the joined file)", "results/r", 4.3e9, 0.0),
             Need("movie", "results/r", 2e8, 0.0)]
    with pytest.raises(NcreelError) as err:
        check_disk(needs, run="r", free=_free(3e8))
    text = str(err.value)
    assert text.startswith("run 'r' needs about 4.5 GB more on the disk of "
                           "/scratch/results/r, which has 300.0 MB free (table")
    for way in ("outputs", "time_range", "cells.region", "cells.compression"):
        assert way in text
    assert "\n" not in text


def test_what_is_written_already_counts_and_a_tight_fit_is_said():
    needs = [Need("table", "results/r", 4e9, 3.9e9)]  # a resumed run: most of it is there
    assert check_disk(needs, run="r", free=_free(3e8)) == []
    notes = check_disk([Need("table", "results/r", 2e8, 0)], run="r", free=_free(3e8))
    assert notes == ["run 'r' needs about 200.0 MB of the 300.0 MB free on the disk of "
                     "/scratch/results/r (table: 200.0 MB)"]


def test_outputs_on_other_disks_are_checked_apart():
    needs = [Need("table", "a", 2e8, 0), Need("movie", "b", 2e8, 0)]

    def free(path):
        return (3e8, f"/{path}", {"a": 1, "b": 2}[path])

    assert check_disk(needs, run="r", free=free) == [
        "run 'r' needs about 200.0 MB of the 300.0 MB free on the disk of /a (table: "
        "200.0 MB)", "run 'r' needs about 200.0 MB of the 300.0 MB free on the disk of /b "
        "(movie: 200.0 MB)"]


@pytest.mark.parametrize("cells", [{}, {"compression": "zstd"}, {"compression": "gzip"},
                                   {"geometry": "text"}])
def test_the_copy_prediction_is_what_the_rows_pass_writes(sample_nc, tmp_path, cells):
    settings = CellsSettings.from_params(cells_settings(cells))
    with open_series(str(sample_nc), "air_temperature", window=(100, 140, 1)) as s:
        rows, per_step = copy_bytes_per_step(s, settings)
        assert rows == 37 * 49
        written = ShardRows.for_series(s, cell_mean=np.zeros((37, 49)), cells=settings)
        path = tmp_path / f"all{settings.suffix}"
        with open_copy_writer(path, settings.compression) as fh:
            for t0, block in s.iter_blocks(0, s.n_time):
                written.write(fh, t0, block)
    ratio = per_step * 40 / path.stat().st_size
    assert 0.8 < ratio < 1.3, ratio


def test_predicted_needs_follow_outputs_and_steps(sample_nc, tmp_path):
    def needs(**values):
        rc = load_config(user_config(input=str(sample_nc), run="g", **values),
                         validate=validate)
        return {n.what.split(" ")[0]: n.total for n in predicted_needs(rc, tmp_path)}

    both = needs()
    assert set(both) == {"table", "movie", "report"}
    assert set(needs(outputs=["movie"])) == {"movie", "report"}
    assert set(needs(outputs=["table"])) == {"table"}
    decade = needs(time_range=[1990, 1999])
    assert decade["table"] == pytest.approx(both["table"] * 10 / 240, rel=0.05)
    assert needs(cells={"compression": "zstd"})["table"] < both["table"] / 2


def test_a_gap_at_the_middle_step_still_predicts_the_table(sample_nc, tmp_path):
    # A record with its middle step missing: the rows are measured on another step.
    import xarray as xr

    with xr.open_dataset(sample_nc, decode_times=False) as ds:
        gap = ds[["air_temperature"]].isel(time=slice(0, 21)).load()
    gap["air_temperature"][10] = np.nan
    gap.to_netcdf(tmp_path / "gap.nc")
    rc = load_config(user_config(input=str(tmp_path / "gap.nc"), run="gap",
                                 outputs=["table"]), validate=validate)
    (table,) = predicted_needs(rc, tmp_path)
    assert table.what.startswith(f"table ({37 * 49:,} rows per step")
    # 21 steps of rows of at least 40 bytes, in the shard files and the joined file
    assert table.total > 2 * 21 * 37 * 49 * 40
    # ncreel inspect measures the same way
    from ncreel.jobs.preflight import inspect

    copy = next(ln for ln in inspect(str(tmp_path / "gap.nc"), "air_temperature")
                if ln.startswith("COPY file"))
    assert f"({37 * 49:,} rows and " in copy and "in step 0)" in copy, copy
