"""Typed settings (ncreel.config.settings): round trips through params/JSON, bad values named."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
from ncreel.cells import cells_settings
from ncreel.config.settings import (
    Calibration,
    CellsSettings,
    EncodeSettings,
    MapSettings,
    RenderSettings,
    SeriesSelection,
)
from ncreel.core.errors import NcreelError
from ncreel.region.selection import open_selection

SERIES = {"paths": ["a.nc", "b.nc"], "variable": "forecast/tas", "time_dim": None,
          "select": {"level": 0}, "lat": None, "lon": "nav_lon", "time": None,
          "steps": [[0, 0, 3], [1, 1, 4]]}
MAP = {"coastlines": None, "borders": True, "projection": "Robinson",
       "projection_params": {"central_longitude": 180}}
RENDER = {"width": 160, "height": 96, "dpi": 100, "cmap": "viridis", "map": MAP}
ENCODE = {"fps": 12, "crf": 18, "preset": "medium"}
CELLS = {"model": "etr_risk", "params": {"ec50_mg_kg": 10.0}, "geometry": "text",
         "compression": "zstd", "compression_level": None, "suffix": ".copy.zst",
         "layout": "normalised"}
# A calibration.json as the calibrate_render checkpoint wrote it before typed settings.
CALIBRATION_JSON = """{
  "width": 160,
  "height": 96,
  "dpi": 100,
  "preset": "medium",
  "crf": 18,
  "probe_frames": 4,
  "base_mb": 82.5,
  "worker_peak_mb": 163.7,
  "encoder_peak_mb": 52.2,
  "encoder_cpu_s_per_frame": 0.0277,
  "startup_s": 1.51,
  "seconds_per_frame": 0.4173,
  "render_s_per_frame": 0.0101,
  "target_minutes": 10,
  "frames_per_shard": 120,
  "workers": 2
}
"""

CASES = [(SeriesSelection, SERIES), (MapSettings, MAP), (RenderSettings, RENDER),
         (EncodeSettings, ENCODE), (CellsSettings, CELLS),
         (Calibration, json.loads(CALIBRATION_JSON))]


@pytest.mark.parametrize(("cls", "params"), CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_params_round_trip(cls, params):
    obj = cls.from_params(params)
    assert obj.to_params() == params
    assert cls.from_params(obj.to_params()) == obj
    assert pickle.loads(pickle.dumps(obj)) == obj  # render workers get it by pickle
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, dataclasses.fields(obj)[0].name, None)


@pytest.mark.parametrize(("cls", "params"), CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_missing_and_unknown_settings_are_named(cls, params):
    key = next(iter(params))
    with pytest.raises(NcreelError, match=rf"setting '{cls.KEY}\.{key}': missing"):
        cls.from_params({k: v for k, v in params.items() if k != key})
    with pytest.raises(NcreelError, match=rf"setting '{cls.KEY}\.colour': unknown"):
        cls.from_params({**params, "colour": 1})
    with pytest.raises(NcreelError, match=rf"settings '{cls.KEY}': expected a mapping"):
        cls.from_params([params])


@pytest.mark.parametrize(("cls", "params", "key", "value"), [
    (SeriesSelection, SERIES, "paths", []),
    (SeriesSelection, SERIES, "paths", "a.nc"),
    (SeriesSelection, SERIES, "variable", ""),
    (SeriesSelection, SERIES, "select", {"level": "0"}),
    (SeriesSelection, SERIES, "time_dim", 3),
    (SeriesSelection, SERIES, "steps", [[[0, 3]]]),
    (MapSettings, MAP, "coastlines", "yes"),
    (MapSettings, MAP, "projection_params", [180]),
    (RenderSettings, RENDER, "width", 0),
    (RenderSettings, RENDER, "height", 96.5),
    (RenderSettings, RENDER, "dpi", float("nan")),
    (RenderSettings, RENDER, "map", "Robinson"),
    (EncodeSettings, ENCODE, "fps", 0),
    (EncodeSettings, ENCODE, "crf", 52),
    (EncodeSettings, ENCODE, "crf", True),
    (CellsSettings, CELLS, "geometry", "wkb"),
    (CellsSettings, CELLS, "compression", "bzip2"),
    (CellsSettings, CELLS, "suffix", ".copy.gz"),
    (CellsSettings, CELLS, "compression_level", 0),
    (CellsSettings, CELLS, "layout", "long"),
    (Calibration, json.loads(CALIBRATION_JSON), "frames_per_shard", 0),
    (Calibration, json.loads(CALIBRATION_JSON), "seconds_per_frame", -1.0),
])
def test_bad_values_name_the_setting(cls, params, key, value):
    with pytest.raises(NcreelError, match=rf"setting '{cls.KEY}\.{key}': must be"):
        cls.from_params({**params, key: value})


def test_nested_map_is_named_under_render():
    with pytest.raises(NcreelError, match=r"setting 'render\.map\.borders': must be"):
        RenderSettings.from_params({**RENDER, "map": {**MAP, "borders": None}})
    with pytest.raises(NcreelError, match=r"setting 'render\.map\.borders': missing"):
        RenderSettings.from_params({**RENDER, "map": {"coastlines": None}})


def test_calibration_json_file_is_unchanged_by_a_round_trip(tmp_path):
    old = tmp_path / "calibration.json"
    old.write_text(CALIBRATION_JSON)
    cal = Calibration.from_json(old)
    assert cal.frames_per_shard == 120 and cal.encoder_peak_mb == 52.2
    new = tmp_path / "again.json"
    cal.to_json(new)
    assert new.read_bytes() == old.read_bytes()


def test_bad_calibration_file_is_named(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text("{")
    with pytest.raises(NcreelError, match=rf"calibration file '{path}': .*delete it"):
        Calibration.from_json(path)
    path.write_text(CALIBRATION_JSON.replace('"workers": 2', '"workers": "2"'))
    with pytest.raises(NcreelError, match=r"'calibration\.workers': must be an integer"):
        Calibration.from_json(path)
    with pytest.raises(FileNotFoundError):  # not planned yet: callers say so
        Calibration.from_json(tmp_path / "none.json")


def test_cells_from_config_normalises_like_the_rules():
    cells = CellsSettings.from_params(cells_settings(
        {"model": "field", "geometry": "none", "compression": "gzip",
         "compression_level": 9, "params": {}, "etr": {}}))
    assert (cells.model, cells.params, cells.suffix) == ("field", {}, ".copy.gz")
    with pytest.raises(NcreelError, match=r"cells\.params' and 'cells\.etr' both"):
        cells_settings({"model": "etr_risk", "params": {"ec50_mg_kg": 1.0},
                        "etr": {"ec50_mg_kg": 2.0}})


def test_selection_opens_the_series_it_names(sample_nc):
    sel = SeriesSelection(paths=(str(sample_nc),), variable="air_temperature", time_dim=None,
                          select={}, lat=None, lon=None, time=None)
    with open_selection(sel) as s:
        assert s.n_time > 0 and s.variable == "air_temperature"
        again = SeriesSelection.from_params(s.spec())
    assert again.time_dim == "time" and again.paths == sel.paths
    with pytest.raises(NcreelError, match="no variable 'tas'"):
        open_selection(dataclasses.replace(sel, variable="tas"))
