"""COPY writer property tests: random rows through a real PostgreSQL server and back."""

from __future__ import annotations

import datetime as dt
import io
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ncreel.pg.copytext import write_copy_rows

SPECIAL = "\\\t\n\r\b\f\v\x01\x7f. N\\N\\.é€😀"
texts = st.one_of(st.none(), st.just(""), st.just("\\."), st.just("\\N"),
                  st.text(alphabet=st.sampled_from(SPECIAL), max_size=12),
                  st.text(alphabet=st.characters(blacklist_characters="\x00",
                                                 blacklist_categories=("Cs",)), max_size=20))
f64 = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                st.sampled_from([5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                                 -0.0, 0.1, 1e308, 1e-300, 123456789.125]))
f32 = st.one_of(st.floats(width=32, allow_nan=True, allow_infinity=True),
                st.sampled_from([1e-45, -1e-45, 1.17549435e-38, 3.4028235e38, -0.0, 0.1,
                                 16777217.0]))
ints = st.integers(min_value=-2**63, max_value=2**63 - 1)
bools = st.one_of(st.none(), st.booleans())
stamps = st.one_of(st.none(), st.datetimes(min_value=dt.datetime(1, 1, 1),
                                           max_value=dt.datetime(9999, 12, 31, 23, 59, 59)))
rows = st.lists(st.tuples(texts, f64, f32, ints, bools, stamps), min_size=1, max_size=40)

DDL = ("CREATE TABLE IF NOT EXISTS rt (t text, d double precision, r real, i bigint, "
       "b boolean, ts timestamp)")


def _bits64(x):
    return None if x is None else np.float64(x).tobytes()


def _copy_in(conn, data: bytes) -> list[tuple]:
    conn.execute(DDL)
    conn.execute("TRUNCATE rt")
    with conn.cursor() as cur, cur.copy("COPY rt FROM STDIN") as copy:
        copy.write(data)
    # real::float8 is exact, so the float32 value comes back bit for bit.
    return conn.execute("SELECT t, d, r::float8, i, b, ts FROM rt").fetchall()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rows)
def test_random_rows_roundtrip_through_postgres(pg_conn, rows):
    t, d, r, i, b, ts = zip(*rows, strict=True)
    buf = io.BytesIO()
    n = write_copy_rows(buf, {
        "t": pl.Series(t, dtype=pl.Utf8),
        "d": np.array(d, dtype=np.float64),
        "r": np.array(r, dtype=np.float32),
        "i": np.array(i, dtype=np.int64),
        "b": pl.Series(b, dtype=pl.Boolean),
        "ts": pl.Series(ts, dtype=pl.Datetime("us")),
    })
    assert n == len(rows)
    back = _copy_in(pg_conn, buf.getvalue())
    assert len(back) == len(rows)
    for row, got in zip(rows, back, strict=True):
        tt, dd, rr, ii, bb, tss = row
        assert got[0] == tt
        # NaN is NULL by design; everything else comes back bit-exact (incl. -0.0, inf).
        assert _bits64(got[1]) == (None if math.isnan(dd) else _bits64(dd))
        want_r = None if math.isnan(rr) else _bits64(float(np.float32(rr)))
        assert _bits64(got[2]) == want_r
        assert got[3] == ii and got[4] == bb and got[5] == tss


def test_known_edge_values_exactly(pg_conn):
    d = np.array([5e-324, 1e308, -0.0, np.inf, -np.inf, np.nan, 0.1, 1 / 3])
    r = np.array([1e-45, 3.4028235e38, -0.0, np.inf, -np.inf, np.nan, 0.1, 1 / 3],
                 dtype=np.float32)
    buf = io.BytesIO()
    write_copy_rows(buf, {"t": ["a\tb", "c\\d", "e\nf", "g\rh", "", None, "\\.", "\\N"],
                          "d": d, "r": r, "i": np.arange(8), "b": np.ones(8, bool),
                          "ts": np.array(["2000-02-29T12:00:00.000001"] * 8, "datetime64[us]")})
    text = buf.getvalue().decode()
    assert "\\.\n" not in text.replace("\\\\.", "")  # no end-of-data marker, escaped dots
    assert text.splitlines()[5].split("\t")[:3] == ["\\N", "\\N", "\\N"]
    back = _copy_in(pg_conn, buf.getvalue())
    assert [x[0] for x in back] == ["a\tb", "c\\d", "e\nf", "g\rh", "", None, "\\.", "\\N"]
    for k in range(8):
        assert _bits64(back[k][1]) == (None if np.isnan(d[k]) else _bits64(d[k]))
        assert _bits64(back[k][2]) == (None if np.isnan(r[k]) else _bits64(float(r[k])))
    assert back[0][5] == dt.datetime(2000, 2, 29, 12, 0, 0, 1)


def test_nul_in_text_is_rejected():
    with pytest.raises(ValueError, match="NUL"):
        write_copy_rows(io.BytesIO(), {"t": ["a\x00b"]})


def test_length_mismatch_is_rejected():
    with pytest.raises(ValueError, match="differ in length"):
        write_copy_rows(io.BytesIO(), {"a": np.arange(3), "b": np.arange(4)})
