"""ncreel.jobs.runconfig: the one call common.smk makes to check the config and read the input,
and the one that makes a run's side effects."""

from __future__ import annotations

import os
import types

import numpy as np
import pytest
import xarray as xr
import yaml
from conftest import ROOT
from ncreel.core.errors import NcreelError
from ncreel.jobs.runconfig import load_config, start_run
from snakemake.utils import validate


def user_config(**values) -> dict:
    """config/config.yaml (what a user starts from) with `values` over it."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text()) or {}
    return {**config, **values}


def test_the_demo_config_gives_what_the_rules_declare(sample_nc):
    config = user_config(input=str(sample_nc), run="demo")
    rc = load_config(config, validate=validate)
    assert rc.config is config and config["width"] > 0  # defaults filled in place
    assert (rc.run, rc.out, rc.logs) == ("demo", "results/demo", "logs/demo")
    assert rc.table == "ncreel_demo"
    assert rc.inputs == [str(sample_nc)] and rc.rule_inputs == [str(sample_nc)]
    assert rc.grid == {"n_time": 240, "ny": 37, "nx": 49} and rc.mid_t == 120
    assert rc.time_dim == "time" and rc.series["variable"] == "air_temperature"
    assert rc.cells["suffix"] == ".copy" and rc.copy_file == "results/demo/cells.copy"
    assert rc.cell_columns == [("time_index", "integer"), ("time", "text"),  # 360-day calendar
                               ("time_value", "double precision"), ("cell_id", "bigint"),
                               ("lat", "double precision"), ("lon", "double precision"),
                               ("lon_raw", "double precision"), ("value", "real"),
                               ("anomaly", "double precision")]
    assert rc.table_grid == rc.grid and rc.region is None
    assert rc.contours is None and rc.vectors is None
    assert rc.cell_note.startswith(f"'air_temperature' from {sample_nc}")
    assert rc.render["width"] == config["width"] and set(rc.encode) == {"fps", "crf", "preset"}
    assert rc.notes == ()


def test_load_config_writes_nothing(sample_nc, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    load_config(user_config(input=str(sample_nc), run="quiet"), validate=validate)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("values, message", [
    ({"widht": 10}, r"config key 'widht'.*did you mean 'width'"),
    ({"width": 0}, r"width"),
    ({"map": {"projection": "NoSuchProjection"}}, r"^config: .*NoSuchProjection"),
    ({"variable": "tas"}, r"no variable 'tas'"),
    ({"database": {"url": "postgresql://u:secret@h/db"}}, r"database"),
    # Overlays on panels: a panel's own variable missing, u without v.
    ({"panels": [{}, {"contours": {"variable": "psl"}}]},
     r"^config key 'panels\[1\]\.contours\.variable': .*no variable 'psl'"),
    ({"panels": [{}, {"vectors": {"u": "air_temperature"}}]}, r"panels\.1\.vectors\.v"),
])
def test_bad_config_is_one_line_naming_the_key(sample_nc, values, message):
    with pytest.raises(NcreelError, match=message) as err:
        load_config(user_config(input=str(sample_nc), **values), validate=validate)
    assert "\n" not in str(err.value) and "secret" not in str(err.value)


def test_renamed_and_deprecated_keys_become_notes(sample_nc):
    config = user_config(input=str(sample_nc),
                         cells={"model": "etr_risk", "etr": {"ec50_mg_kg": 2.0}})
    rc = load_config(config, validate=validate)
    assert rc.config["cells"]["params"]["ec50_mg_kg"] == 2.0 and "etr" not in rc.config["cells"]
    assert any("cells.etr" in n for n in rc.notes)


def test_command_line_values_are_typed_before_validation(sample_nc):
    config = user_config(input=str(sample_nc), vmin="null")
    rc = load_config(config, overrides={"vmin": "null"}, validate=validate)
    assert rc.config["vmin"] is None


def test_undecoded_time_is_a_note_and_in_the_table_comment(tmp_path):
    path = tmp_path / "odd time.nc"
    xr.Dataset({"v": (("time", "lat", "lon"), np.zeros((3, 2, 2), np.float32))},
               coords={"time": ("time", [0.0, 1.0, 2.0], {"units": "fortnights since x"}),
                       "lat": ("lat", [0.0, 1.0], {"units": "degrees_north"}),
                       "lon": ("lon", [0.0, 1.0], {"units": "degrees_east"})}
               ).to_netcdf(path)
    rc = load_config(user_config(input=str(path), variable="v"), validate=validate)
    assert any("column time is NULL there" in n for n in rc.notes)
    assert "time could not be decoded" in rc.cell_note
    # A path with a space is declared through a plain-named link (made by start_run).
    assert rc.rule_inputs != [str(path)] and " " not in rc.rule_inputs[0]


def test_start_run_links_inputs_passes_config_by_file_and_locks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "in put.nc"
    xr.Dataset({"v": (("time", "lat", "lon"), np.zeros((2, 2, 2), np.float32))},
               coords={"time": ("time", [0.0, 1.0], {"units": "days since 2000-01-01"}),
                       "lat": ("lat", [0.0, 1.0], {"units": "degrees_north"}),
                       "lon": ("lon", [0.0, 1.0], {"units": "degrees_east"})}
               ).to_netcdf(path)
    given = {"run": "one", "vmin": "null"}  # as Snakemake parses --config run=one vmin=null
    rc = load_config(user_config(input=str(path), variable="v", **given), overrides=given,
                     validate=validate)
    settings = types.SimpleNamespace(config=given, config_args=["run=one vmin=null"],
                                     configfiles=[])
    assert start_run(rc, settings) == ""  # no killed run's lock to clear
    assert os.path.realpath(rc.rule_inputs[0]) == str(path)
    assert not settings.config_args and len(settings.configfiles) == 1  # no values on job lines
    # Jobs read the values as checked (typed), from the file: they convert nothing.
    assert yaml.safe_load(settings.configfiles[0].read_text()) == {"run": "one", "vmin": None}
    assert (tmp_path / "results" / "one" / ".ncreel-run.lock").exists()


def test_normalised_layout_is_checked_before_any_job(sample_nc, tmp_path, monkeypatch):
    """A model without time_index, or a table name too long for <table>_values, stops the
    run when the config is read, with one line naming the key."""
    (tmp_path / "nokeys.py").write_text(
        "from ncreel.cells import cell_model\n\n"
        "@cell_model(columns=lambda ctx: [('cell_id', 'bigint'), ('v', 'real')])\n"
        "def model(block, t0, ctx):\n"
        "    raise AssertionError('not called at parse time')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = user_config(input=str(sample_nc), run="demo",
                         cells={"model": "nokeys:model", "layout": "normalised"})
    with pytest.raises(NcreelError, match="'cells.layout': normalised needs the cell model's "
                                          "columns time_index"):
        load_config(config, validate=validate)
    config = user_config(input=str(sample_nc), run="demo", table="t" * 60,
                         cells={"layout": "normalised"})
    with pytest.raises(NcreelError, match="config key 'table': 't+' is longer than 56 bytes"):
        load_config(config, validate=validate)
    rc = load_config(user_config(input=str(sample_nc), run="demo",
                                 cells={"layout": "normalised"}), validate=validate)
    assert rc.cells["layout"] == "normalised"
    # Integer cell ids: a grid with more cells than the limit stops here too (a grid of
    # 2**31 cells cannot be read in a test: the limit is lowered to the sample's size).
    import ncreel.pg.layout

    monkeypatch.setattr(ncreel.pg.layout, "MAX_CELLS", 37 * 49 - 1)
    with pytest.raises(NcreelError, match=r"'cells.layout': normalised numbers cells with "
                       r"PostgreSQL integer ids \(at most 1812\), and air_temperature has "
                       "1813 cells"):
        load_config(user_config(input=str(sample_nc), run="demo",
                                cells={"layout": "normalised"}), validate=validate)


def test_outputs_steps_levels_and_the_tables_extent(sample_nc, eofs_data, tmp_path):
    from conftest import plev_file

    rc = load_config(user_config(input=str(sample_nc), run="r", outputs=["table"],
                                 time_range=["1990", 1999], time_every=3), validate=validate)
    assert rc.outputs == ("table",) and rc.table_on and not rc.movie_on
    assert rc.window == (130, 140, 3) and rc.grid["n_time"] == 4
    assert rc.series["window"] == [130, 140, 3]
    assert any("showing 4 of 240 steps" in n and "time_index" in n for n in rc.notes)
    movie = load_config(user_config(input=str(sample_nc), run="r", outputs=["movie"],
                                    cells={"model": "no_such_module:model"}),
                        validate=validate)  # no table: its model is never imported
    assert movie.cell_columns == [] and "window" not in movie.series
    # the table's own extent: a country inside the movie's box
    region = load_config(user_config(input=str(sample_nc), run="r",
                                     region={"lon": [-125, -66], "lat": [24, 50]},
                                     cells={"region": "Mexico"}), validate=validate)
    assert region.series["region"]["name"] is None
    assert region.series["table_region"]["name"] == "Mexico"
    assert region.series["table_region"]["key"] == "cells.region"
    assert ("covered_fraction", "double precision") in region.cell_columns
    assert region.table_grid != region.grid
    path = plev_file(eofs_data, tmp_path / "z.nc")
    lev = load_config(user_config(input=str(path), variable="z", run="r",
                                  sel={"plev": "850 hPa"}), validate=validate)
    assert lev.series["select"] == {"plev": 1}


@pytest.mark.parametrize("values, message", [
    ({"time_range": [2200, 2300]}, r"^config key 'time_range': \[2200, 2300\] holds no step"),
    ({"time_range": ["1990-13", 1999]}, r"^config key 'time_range': '1990-13' is not a date"),
    ({"time_every": 0}, r"^config key 'time_every' = 0 must be at least 1"),
    ({"outputs": []}, r"^config key 'outputs'"),
    ({"outputs": ["movie", "csv"]}, r"^config key 'outputs.1' = 'csv' is not one of"),
    ({"cells": {"region": "Atlantis"}}, r"^config 'cells.region': no country named 'Atlantis'"),
    # checked without a table too: a wrong value never passes silently
    ({"outputs": ["movie"], "cells": {"region": "Atlantis"}},
     r"^config 'cells.region': no country named 'Atlantis'"),
    ({"cells": {"region": {"lon": [0, 10], "lat": [0, 10]}}},
     r"^config 'cells.region': lon 0..10, lat 0..10 holds no cell centre"),
    ({"sel": {"latitude": 99}}, r"^config key 'sel.latitude': 99 is not a value"),
])
def test_new_settings_refuse_in_one_line(sample_nc, values, message):
    with pytest.raises(NcreelError, match=message):
        load_config(user_config(input=str(sample_nc), run="r", **values), validate=validate)


def test_a_frame_too_small_for_its_maps_is_one_line_with_a_size_that_fits(sample_nc):
    # Two panels at 160 x 96 passed the 64 x 48-per-panel check; calibrate_render then
    # died with a traceback ("no grid cell is visible in its map area"): the colour bars'
    # tick labels of the data's range leave the maps no room. The same renderer decides now.
    config = user_config(input=str(sample_nc), run="tiny", panels=[{}, {}], width=160,
                         height=96)
    with pytest.raises(NcreelError) as err:
        load_config(config, validate=validate)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(
        "config keys 'width', 'height': a 160 x 96 frame leaves 2 panels no room") and \
        msg.endswith("width: 240, height: 144 fits (or fewer panels, or panel_columns)")
    rc = load_config(user_config(input=str(sample_nc), run="tiny", panels=[{}, {}],
                                 width=240, height=144), validate=validate)
    # ... and that size draws with the run's own colour limits.
    from ncreel.config.settings import RenderSettings
    from ncreel.jobs.stats import panel_statistics
    from ncreel.render.segment import PanelFrames

    render = RenderSettings.from_params(rc.render)
    limits = panel_statistics(render.panels, rc.grid["n_time"])
    PanelFrames(render.panels, render, limits, [str(t) for t in range(240)]).close()


def test_the_panel_limit_is_named(sample_nc):
    with pytest.raises(NcreelError, match=r"^config key 'panels' has 17 entries: it takes "
                                          r"at most 16 \(`ncreel settings panels` says"):
        load_config(user_config(input=str(sample_nc), run="many", panels=[{}] * 17),
                    validate=validate)


def test_cell_polygons_on_a_grid_without_lat_lon_stop_before_any_job(tmp_path):
    # Refused only inside the shard jobs, after statistics and calibration, before.
    from grid_files import write_projected_no_mapping

    path, _ = write_projected_no_mapping(tmp_path / "p.nc")
    config = user_config(input=str(path), variable="v", run="xy", cells={"geometry": "text"})
    with pytest.raises(NcreelError, match=r"^config key 'cells.geometry': the grid has no "
                                          r"latitude/longitude .* set cells.geometry: none"):
        load_config(config, validate=validate, main=False)  # every job's parse too
    load_config(user_config(input=str(path), variable="v", run="xy"), validate=validate)


def test_the_time_chunks_the_series_hold_are_what_the_jobs_count(tmp_path):
    """A file in zlib chunks of 4 steps: a read holds at most 3 steps of a chunk of each
    variable it reads: the movie's grid (its vectors' too), and with cells.region the
    table's cut (its own series)."""
    from test_input_chunks import LAT, LON, NX, NY, write_chunked

    path = write_chunked(tmp_path / "uv.nc", 22, names=("tas", "uas", "vas"))
    held = 3 * NY * NX * 4 / 2**20
    rc = load_config(user_config(input=str(path), variable="tas", run="day"),
                     validate=validate)
    assert rc.chunk_mb == {"statistics": held, "calibrate": held, "shard": held,
                           "prepass": 0.0}
    box = {"lon": [-100, 60], "lat": [-30, 40]}
    rc = load_config(user_config(input=str(path), variable="tas", run="day",
                                 cells={"region": box}, vectors={"u": "uas", "v": "vas"}),
                     validate=validate)
    cut = ((LAT >= -30) & (LAT <= 40)).sum() * ((LON >= -100) & (LON <= 60)).sum()
    cut_held = 3 * cut * 4 / 2**20
    assert rc.chunk_mb == {"statistics": 3 * held + cut_held, "calibrate": 3 * held,
                           "shard": cut_held, "prepass": 0.0}


def test_a_layout_that_fitted_is_not_built_again_for_the_same_run(sample_nc, tmp_path,
                                                                  monkeypatch):
    """Building the frame is most of a dry run's time: once a run has started with a
    layout that fits, its later commands skip it; another size, or a replaced input,
    builds it again, and a job's own Snakemake never does."""
    import shutil
    from types import SimpleNamespace

    import ncreel.jobs.runconfig as runconfig

    monkeypatch.chdir(tmp_path)
    sample_nc = shutil.copy(sample_nc, tmp_path / "in.nc")
    built = []
    check = runconfig._check_frame
    monkeypatch.setattr(runconfig, "_check_frame",
                        lambda *a: (built.append(a[1]["width"]), check(*a)))

    def start(width, **kw):
        rc = load_config(user_config(input=str(sample_nc), run="r", width=width),
                         validate=validate, **kw)
        start_run(rc, SimpleNamespace(config={}, configfiles=[]))
        (tmp_path / "results/r/.ncreel-run.lock").unlink(missing_ok=True)
        return rc

    assert start(320).frame_fitted and not start(320).frame_fitted
    start(400)
    start(320)
    assert built == [320, 400]
    assert len(list((tmp_path / runconfig.FRAME_CHECK_DIR).iterdir())) == 2
    os.utime(sample_nc, ns=(0, os.stat(sample_nc).st_mtime_ns + 10**9))
    start(320)
    assert built == [320, 400, 320]
    start(500, main=False)
    assert built == [320, 400, 320]
