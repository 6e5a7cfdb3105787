"""COPY text encoding, checked against a real PostgreSQL server."""

import io

import numpy as np
import pytest
from ncreel.pg.copytext import concatenate, write_copy_rows

SPECIAL = ["plain", "tab\there", "new\nline", "carriage\rreturn", "back\\slash", "\\N",
           "", "\\.", "both\t\\\n\r", "ünïcødé ✓", None]


def encode(columns):
    buf = io.BytesIO()
    write_copy_rows(buf, columns)
    return buf.getvalue()


def test_escapes_exactly_as_documented():
    data = encode({"s": ["a\tb", "c\nd", "e\rf", "g\\h", None, ""]})
    assert data == b"a\\tb\nc\\nd\ne\\rf\ng\\\\h\n\\N\n\n"


def test_nan_is_null_and_floats_round_trip():
    f32 = np.array([np.nan, 288.12345, 1e-45, -0.0, np.inf], dtype=np.float32)
    lines = encode({"f": f32}).decode().splitlines()
    assert lines[0] == "\\N"
    assert np.float32(lines[1]) == f32[1]
    assert np.float32(lines[2]) == f32[2]


def test_a_categorical_column_is_written_as_its_text():
    """A model's time labels come as a categorical column: the same bytes as the text,
    escaped when a label needs it, NUL refused."""
    import polars as pl

    labels = ["2000-01-01T00:00:00", None, "2000-01-01T01:00:00", "2000-01-01T00:00:00"]
    for values in (labels, [*labels, "tab\there", "back\\slash"]):
        text = encode({"t": pl.Series(values, dtype=pl.Utf8), "i": np.arange(len(values))})
        assert encode({"t": pl.Series(values, dtype=pl.Categorical),
                       "i": np.arange(len(values))}) == text
    assert b"tab\\there" in text
    with pytest.raises(ValueError, match="NUL byte"):
        encode({"t": pl.Series(["a\x00b"], dtype=pl.Categorical)})


def test_nul_byte_rejected():
    with pytest.raises(ValueError, match="column 's': text contains a NUL byte"):
        encode({"s": ["a\x00b"]})


def test_length_mismatch_rejected():
    with pytest.raises(ValueError, match="columns differ in length"):
        encode({"a": np.zeros(2), "b": np.zeros(3)})


def test_round_trip_through_postgres(pg_conn):
    f32 = np.array([0.1, np.nan, 3.4028235e38, -1.1754944e-38, 1e-45, 7.0, -0.0, np.inf,
                    -np.inf, 1.5, 2.5], dtype=np.float32)
    f64 = np.array([0.1, 1e308, np.nan, 5e-324, -2.2250738585072014e-308, np.pi, -0.0,
                    1 / 3, 1e-10, 123456789.123456789, -np.inf])
    cols = {"id": np.arange(len(SPECIAL), dtype=np.int64), "s": SPECIAL, "r": f32, "d": f64,
            "b": np.array([True, False] * 5 + [True])}
    pg_conn.execute("create temp table t (id bigint, s text, r real, d double precision,"
                    " b boolean)")
    with pg_conn.cursor() as cur, cur.copy("COPY t FROM STDIN") as copy:
        copy.write(encode(cols))
    rows = pg_conn.execute("select s, r, d, b from t order by id").fetchall()
    assert [r[0] for r in rows] == SPECIAL
    for (_, r, d, b), want_r, want_d, want_b in zip(rows, f32, f64, cols["b"], strict=True):
        assert (r is None) == np.isnan(want_r)
        assert r is None or np.float32(r) == want_r and np.signbit(r) == np.signbit(want_r)
        assert (d is None) == np.isnan(want_d)
        assert d is None or d == want_d and np.signbit(d) == np.signbit(want_d)
        assert b == want_b


def test_concatenate_keeps_order(tmp_path):
    parts = []
    for i in range(3):
        p = tmp_path / f"{i}.copy"
        p.write_bytes(f"{i}\tx\n".encode() * (i + 1))
        parts.append(p)
    out = tmp_path / "all.copy"
    assert concatenate(parts, out, chunk_bytes=3) == out.stat().st_size
    assert out.read_bytes() == b"0\tx\n1\tx\n1\tx\n2\tx\n2\tx\n2\tx\n"
    assert not (tmp_path / "all.copy.part").exists()
