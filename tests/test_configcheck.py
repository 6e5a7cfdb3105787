"""Parse-time checks of config values (``ncreel.configcheck``): run and table names."""

import pytest


@pytest.mark.parametrize("run, table, expected", [
    ("ok", "t\n", "config key 'table'"),
    ("ok", "s.t\n", "config key 'table'"),
    ("ok", "a.b.c", "config key 'table'"),
    ("ok", "t" * 64, "64 bytes"),
    ("r" * 57, None, "config key 'run'"),
    ("r" * 56, None, ("ncreel_" + "r" * 56,)),
    ("a-b.C", None, ("ncreel_a_b_c",)),
    ("ok", "select", ("select",)),  # quoted in SQL: reserved words and case are kept
    ("ok", "Geo.MixedCase", ("Geo", "MixedCase")),
])
def test_check_names(run, table, expected):
    from ncreel.configcheck import check_names
    from ncreel.errors import NcreelError
    from ncreel.pg.copytext import table_name

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
    from ncreel.configcheck import check_colours
    from ncreel.errors import NcreelError

    if expected is None:
        check_colours(cfg)
    else:
        with pytest.raises(NcreelError, match=expected):
            check_colours(cfg)


def test_nested_cli_values_get_yaml_types():
    # `--config 'map={coastlines: false}'` arrived as 'false' and failed the schema;
    # projection_params {central_longitude: 180} reached cartopy as '180'.
    from ncreel.configcheck import coerce_cli_values

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
    from ncreel.configcheck import report_before_results

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
    from ncreel.configcheck import coerce_cli_values

    given = {"table": "null", "vmin": "null", "run": "null", "cmap": "viridis"}
    config = dict(given, width=160)
    coerce_cli_values(config, given)
    assert config == {"table": None, "vmin": None, "run": "null", "cmap": "viridis",
                      "width": 160}


def test_schema_error_says_yaml_needs_a_space_after_the_colon():
    import jsonschema
    from ncreel.configcheck import load_schema, schema_error_message

    config = {"input": "x.nc", "variable": "v", "run": "r", "map": {"projection:Robinson": None}}
    err = next(jsonschema.Draft7Validator(load_schema()).iter_errors(config))
    msg = schema_error_message(err)
    assert msg.startswith("config key 'map'") and "space after ':'" in msg, msg
