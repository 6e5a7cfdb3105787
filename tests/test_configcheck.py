"""Parse-time checks of config values (``ncreel.config.configcheck``): run and table names."""

import pytest


@pytest.mark.parametrize("run, table, expected", [
    ("ok", "t\n", "config key 'table'"),
    ("ok", "s.t\n", "config key 'table'"),
    ("ok", "a.b.c", "config key 'table'"),
    ("ok", "t" * 64, r"64 bytes, PostgreSQL names are at most 63: shorten it$"),
    ("ok", "s." + "é" * 32, r"'table': '(é){32}' is 64 bytes.*: shorten it$"),
    ("r" * 57, None, r"config key 'run'.*: shorten run to at most 56 characters, or set 'table'$"),
    ("r" * 56, None, ("ncreel_" + "r" * 56,)),
    ("a-b.C", None, ("ncreel_a_b_c",)),
    ("ok", "select", ("select",)),  # quoted in SQL: reserved words and case are kept
    ("ok", "Geo.MixedCase", ("Geo", "MixedCase")),
])
def test_check_names(run, table, expected):
    from ncreel.config.configcheck import check_names
    from ncreel.core.errors import NcreelError
    from ncreel.pg.sql import table_name

    if isinstance(expected, tuple):
        assert table_name(check_names({"run": run, "table": table})) == expected
    else:
        with pytest.raises(NcreelError, match=expected):
            check_names({"run": run, "table": table})


@pytest.mark.parametrize("cfg, expected", [
    ({"cmap": "notacmap", "vmin": None, "vmax": None}, "config key 'cmap' = 'notacmap'"),
    ({"cmap": "Viridis", "vmin": None, "vmax": None}, "similar: viridis"),
    ({"cmap": "viridis", "vmin": 300, "vmax": 200}, "vmin must be below vmax"),
    ({"cmap": "viridis", "vmin": 1, "vmax": 1}, "vmin must be below vmax"),
    ({"cmap": "viridis", "vmin": 1, "vmax": None}, None),
    ({"cmap": "RdBu_r", "vmin": -1, "vmax": 1}, None),
])
def test_check_colours(cfg, expected):
    # Before: a bad cmap failed in calibrate_render with a traceback; vmin >= vmax gave a
    # one-colour movie without a word.
    from ncreel.config.configcheck import check_colours
    from ncreel.core.errors import NcreelError

    if expected is None:
        check_colours(cfg)
    else:
        with pytest.raises(NcreelError, match=expected):
            check_colours(cfg)


def test_nested_cli_values_get_yaml_types():
    # `--config 'map={coastlines: false}'` arrived as 'false' and failed the schema;
    # projection_params {central_longitude: 180} reached cartopy as '180'.
    from ncreel.config.configcheck import coerce_cli_values

    given = {"map": {"coastlines": "false", "projection_params": {
        "central_longitude": "-100", "standard_parallels": ["33", "45.5"]}},
        "cells": {"compression_level": "5", "model": "field"}, "select": {"level": "0"},
        "run": "x"}
    config = {"map": {"coastlines": "false", "borders": "true", "projection": "Robinson",
                      "projection_params": {"central_longitude": "-100",
                                            "standard_parallels": ["33", "45.5"]}},
              "cells": {"compression_level": "5", "model": "field"},
              "select": {"level": "0"}, "run": "x"}
    coerce_cli_values(config, given)
    assert config["map"] == {"coastlines": False, "borders": "true",  # from a file: kept
                             "projection": "Robinson", "projection_params": {
                                 "central_longitude": -100, "standard_parallels": [33, 45.5]}}
    assert config["cells"] == {"compression_level": 5, "model": "field"}
    assert config["select"] == {"level": 0} and config["run"] == "x"


def test_report_before_results(tmp_path):
    # `snakemake --report` of a run without results ended in a multi-line WorkflowError.
    from ncreel.config.configcheck import report_before_results

    movie = str(tmp_path / "movie.mp4")
    assert report_before_results(["snakemake", "--report", "r.html"], [movie]) == movie
    assert report_before_results(["snakemake", "--report=r.html"], [movie]) == movie
    assert report_before_results(["snakemake", "--report", "r.html", "--report-after-run"],
                                 [movie]) is None
    assert report_before_results(["snakemake", "--cores", "2"], [movie]) is None
    (tmp_path / "movie.mp4").write_bytes(b"x")
    assert report_before_results(["snakemake", "--report"], [movie]) is None


def test_top_level_cli_null_is_null_where_allowed():
    # `--config table=null` made a table named "null"; `vmin=null` failed the schema.
    from ncreel.config.configcheck import coerce_cli_values

    given = {"table": "null", "vmin": "null", "run": "null", "cmap": "viridis"}
    config = dict(given, width=160)
    coerce_cli_values(config, given)
    assert config == {"table": None, "vmin": None, "run": "null", "cmap": "viridis",
                      "width": 160}


def test_schema_error_says_yaml_needs_a_space_after_the_colon():
    import jsonschema
    from ncreel.config.configcheck import load_schema, schema_error_message

    config = {"input": "x.nc", "variable": "v", "run": "r", "map": {"projection:Robinson": None}}
    err = next(jsonschema.Draft7Validator(load_schema()).iter_errors(config))
    msg = schema_error_message(err)
    assert msg.startswith("config key 'map.") and "space after ':'" in msg, msg


# Words of JSON schema's own messages that a user should never have to read.
_SCHEMA_WORDS = ("Additional properties", "does not match", "is not valid under",
                 "is not of type", "is a required property", "validator", "schema's")


def _errors(config):
    import jsonschema
    from ncreel.config.configcheck import load_schema

    base = {"input": "x.nc", "variable": "v", "run": "r"}
    return list(jsonschema.Draft202012Validator(load_schema()).iter_errors({**base, **config}))


@pytest.mark.parametrize("config, expected", [
    ({"coastline": True}, "config key 'coastline' is not a setting of ncreel: did you mean "
                          "'map.coastlines'?"),
    ({"map": {"coastline": True}}, "config key 'map.coastline' is not a setting of ncreel: "
                                   "did you mean 'map.coastlines'?"),
    ({"colour": "red"}, "did you mean 'cmap'?"),
    ({"frames_per_shards": 3}, "did you mean 'frames_per_shard'?"),
    ({"run": "my run"}, "config key 'run' = 'my run' is not accepted: use letters, digits, "
                        "'_', '.' and '-', starting with a letter or digit"),
    ({"preset": "fastest"}, "config key 'preset' = 'fastest' is not one of: ultrafast"),
    ({"width": "wide"}, "config key 'width' must be a whole number, not 'wide'"),
    ({"fps": 0}, "config key 'fps' = 0 must be above 0"),
    ({"crf": 60}, "config key 'crf' = 60 must be at most 51"),
    ({"variable": ""}, "config key 'variable' must not be empty"),
    ({"select": {"level": "a"}}, "config key 'select.level' must be a whole number, not 'a'"),
    ({"cells": {"model": "bad model"}}, "config key 'cells.model' = 'bad model' is not "
                                        "accepted: use field, etr_risk, or package.module"),
])
def test_schema_errors_are_plain_sentences(config, expected):
    from ncreel.config.configcheck import schema_error_message

    messages = [schema_error_message(e) for e in _errors(config)]
    assert len(messages) == 1, messages
    assert expected in messages[0], messages[0]
    assert not any(w in messages[0] for w in _SCHEMA_WORDS), messages[0]


def test_every_key_with_a_wrong_type_names_the_key_plainly():
    from ncreel.cli import iter_settings
    from ncreel.config.configcheck import schema_error_message

    for key, node in iter_settings():
        if "." in key or node.get("type") is None:
            continue
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        wrong = [] if "array" in types else {"wrong": 1} if "object" not in types else "x"
        if "string" in types and "object" not in types:
            wrong = {"wrong": 1}
        for err in _errors({key: wrong}):
            message = schema_error_message(err)
            assert message.startswith(f"config key '{key}"), (key, message)
            assert not any(w in message for w in _SCHEMA_WORDS), (key, message)


def test_a_missing_required_key_is_named():
    import jsonschema
    from ncreel.config.configcheck import load_schema, schema_error_message

    errs = jsonschema.Draft202012Validator(load_schema()).iter_errors({"input": "a", "run": "r"})
    assert [schema_error_message(e) for e in errs] == [
        "config key 'variable' is required: set it in the run file (`ncreel config` writes "
        "one) or with --config variable=..."]


@pytest.mark.parametrize("files, overrides, refused", [
    ([{"input": "tas_*.nc", "variable": "tas"}], {}, True),   # forgot run: would be the demo
    ([{"variable": "tas"}], {}, True),
    ([{"input": "tas_*.nc", "variable": "tas", "run": "tas_day"}], {}, False),
    ([{"input": "tas_*.nc"}], {"run": "tas_day"}, False),      # run given with --config
    ([{"input": "tas_*.nc"}, {"run": "tas_day"}], {}, False),  # in a second run file
    ([{"database": {"url": "postgresql:///x"}}], {}, False),   # adds loading to the demo run
    ([{"formats": ["mp4", "gif"]}], {}, False),
    ([], {"input": "t.nc", "variable": "tas"}, False),         # --config only: not a run file
])
def test_a_run_file_of_its_own_data_must_name_its_run(tmp_path, files, overrides, refused):
    import json

    from ncreel.config.configcheck import check_run_named
    from ncreel.core.errors import NcreelError

    paths = []
    for i, doc in enumerate(files):
        paths.append(tmp_path / f"run{i}.yaml")
        paths[-1].write_text(json.dumps(doc))  # JSON is YAML
    if refused:
        with pytest.raises(NcreelError, match=r"^run file .*run0\.yaml sets input/variable "
                           r"but no run: .*results/demo/.*add a line `run: NAME`"):
            check_run_named(paths, overrides)
    else:
        check_run_named(paths, overrides)


def test_snakemake_stops_a_run_file_without_run_before_writing_anything(tmp_path):
    """config/config.yaml (the demo's) is read first: a user's run file that forgot `run:`
    would have written results/demo/ over the demo's results."""
    from workflow_run import make_workdir, snakemake

    work = make_workdir(tmp_path)
    (work / "my_run.yaml").write_text("input: tas_day_*.nc\nvariable: tas\n")
    proc = snakemake(work, "-n", "--configfile", "my_run.yaml", check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ncreel: error:")]
    assert proc.returncode != 0 and lines == [
        f"ncreel: error: run file {work / 'my_run.yaml'} sets input/variable but no run: it "
        "would run as "
        "the demo (results/demo/, table ncreel_demo) and replace the demo's results; add a "
        "line `run: NAME` (outputs then go to results/NAME/)"], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert not (work / "results").exists()


def test_region_table_is_deprecated_for_cells_region():
    from ncreel.config.configcheck import upgrade_renamed_keys
    from ncreel.core.errors import NcreelError

    config = {"region": {"name": "France", "table": "global"}, "cells": {"model": "field"}}
    assert upgrade_renamed_keys(config) == [
        "config key 'region.table' is deprecated: write cells.region: global"]
    assert config == {"region": {"name": "France"},
                      "cells": {"model": "field", "region": "global"}}
    config = {"region": {"lon": [0, 10], "lat": [0, 10], "table": "region"}}
    assert upgrade_renamed_keys(config) == [
        "config key 'region.table' is deprecated: region is the default (the table has the "
        "movie's cells); remove it"]
    assert config == {"region": {"lon": [0, 10], "lat": [0, 10]}}
    both = {"region": {"name": "France", "table": "global"},
            "cells": {"region": {"file": "f.geojson"}}}
    with pytest.raises(NcreelError, match="'region.table' and 'cells.region' are both set"):
        upgrade_renamed_keys(both)
    odd = {"region": {"name": "France", "table": "globl"}}  # the schema names it
    assert upgrade_renamed_keys(odd) == [] and odd["region"]["table"] == "globl"


def test_dates_yaml_reads_in_time_range_are_text_again():
    import datetime

    from ncreel.config.configcheck import coerce_dates

    config = {"time_range": [datetime.date(1990, 6, 1),
                             datetime.datetime(1999, 12, 31, 18, 0)]}
    coerce_dates(config)
    assert config["time_range"] == ["1990-06-01", "1999-12-31 18:00:00"]
