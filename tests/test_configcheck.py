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


def test_schema_error_says_yaml_needs_a_space_after_the_colon():
    import jsonschema
    from ncreel.configcheck import load_schema, schema_error_message

    config = {"input": "x.nc", "variable": "v", "run": "r", "map": {"projection:Robinson": None}}
    err = next(jsonschema.Draft7Validator(load_schema()).iter_errors(config))
    msg = schema_error_message(err)
    assert msg.startswith("config key 'map'") and "space after ':'" in msg, msg
