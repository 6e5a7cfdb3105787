"""PostgreSQL types ncreel decides (``ncreel.pg.types``): values, time, geometry."""

import numpy as np
from ncreel.pg.types import GEOMETRY_TYPES, TIMESTAMP, pg_type_for, time_type, value_type


def test_pg_types():
    assert pg_type_for(np.zeros(1, np.float32)) == "real"
    assert pg_type_for(np.zeros(1)) == "double precision"
    assert pg_type_for(np.zeros(1, np.int64)) == "bigint"
    assert pg_type_for(np.zeros(1, bool)) == "boolean"
    assert pg_type_for(["x"]) == "text"


def test_value_time_and_geometry_types():
    assert value_type(np.float32) == "real" and value_type(np.int16) == "double precision"
    iso = ["1580-01-01T00:00:00", "2000-01-16T00:00:00"]
    assert time_type(iso, "proleptic_gregorian", decoded=True) == TIMESTAMP
    assert time_type(iso, "standard", decoded=True) == "text"  # Julian before 1582-10-15
    assert time_type(iso[1:], "noleap", decoded=True) == "text"
    assert time_type(iso[1:], "standard", decoded=False) == "text"
    assert time_type([None, "10000-01-01T00:00:00"], "standard", decoded=True) == "text"
    assert GEOMETRY_TYPES["postgis"] == "geometry(MultiPolygon, 4326)"
