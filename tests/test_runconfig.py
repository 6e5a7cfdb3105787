"""ncreel.runconfig: the one call common.smk makes to check the config and read the input,
and the one that makes a run's side effects."""

from __future__ import annotations

import os
import types

import numpy as np
import pytest
import xarray as xr
import yaml
from conftest import ROOT
from ncreel.errors import NcreelError
from ncreel.runconfig import load_config, start_run
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
