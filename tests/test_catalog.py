"""Input from an intake-esm catalog (ncreel.input.catalog) over real sample files (catalogs.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr
from catalogs import make_catalog, sample
from ncreel.core.errors import NcreelError
from ncreel.input.catalog import select_dataset
from ncreel.input.source import open_series, resolve_paths


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    return make_catalog(tmp_path_factory.mktemp("catalog"))


def query(catalog, **q):
    return {"catalog": str(catalog), "query": q}


def test_a_query_joins_its_dataset_along_time_as_the_one_file(catalog):
    chosen = select_dataset(query(catalog, source_id="HadCM3", experiment_id="A1B"),
                            "air_temperature")
    # The CSV lists the 2020-2099 file first: the join_existing attribute orders them.
    assert [p.rsplit("_", 1)[1] for p in chosen.paths] == ["1860-1939.nc", "1940-2019.nc",
                                                           "2020-2099.nc"]
    assert chosen.key == "HadCM3.A1B.Ayr" and chosen.join_dim == "time"
    with open_series(query(catalog, experiment_id="A1B"), "air_temperature") as s:
        got, labels, paths = s.read(0, s.n_time), s.time_axis().labels, s.paths
    assert paths == chosen.paths
    with xr.open_dataset(sample("A1B_north_america.nc"), decode_times=False) as ds:
        want = ds["air_temperature"].values
    with open_series(str(sample("A1B_north_america.nc")), "air_temperature") as s:
        assert labels == s.time_axis().labels
    np.testing.assert_array_equal(got, want)


def test_a_zarr_asset_and_a_list_of_values(catalog):
    q = query(catalog, experiment_id=["E1", "B2"], member_id="r1i1p1")
    (store,) = resolve_paths(q, "air_temperature")
    assert store.endswith(".zarr")
    with open_series(q, "air_temperature") as s:
        got = s.read(0, s.n_time)
    with xr.open_dataset(sample("E1_north_america.nc"), decode_times=False) as ds:
        np.testing.assert_array_equal(got, ds["air_temperature"].values)


def test_the_variable_picks_from_a_union_of_variables(catalog, tmp_path):
    # OSTIA is another dataset; with the variable its one asset is chosen, the variable
    # column need not be in the query.
    chosen = select_dataset(query(catalog, source_id="OSTIA"), "surface_temperature")
    assert chosen.paths == (str(sample("ostia_monthly.nc")),) and chosen.join_dim is None
    with pytest.raises(NcreelError, match=r"the assets the query matches hold variable_id "
                                          r"surface_temperature, not 'tas': set variable"):
        select_dataset(query(catalog, source_id="OSTIA"), "tas")


@pytest.mark.parametrize("q, message", [
    ({"experiment_id": "E1"},
     "the query matches 2 datasets, ncreel shows one: column member_id has r1i1p1, r2i1p1; "
     "add member_id: VALUE to input.query"),
    ({"source_id": "HadCM3"},
     "the query matches 3 datasets, ncreel shows one: column experiment_id has A1B, E1; "
     "column member_id has r1i1p1, r2i1p1; add experiment_id: VALUE to input.query"),
    ({"experiment_id": "historical"},
     "no asset has experiment_id historical (it has A1B, E1, analysis)"),
    ({"experiment_id": "A1B", "member_id": "r2i1p1"},
     "no asset matches all of input.query (experiment_id: A1B, member_id: r2i1p1); each "
     "value exists, but not together"),
])
def test_queries_matching_none_or_many_are_one_line(catalog, q, message):
    with pytest.raises(NcreelError) as err:
        select_dataset(query(catalog, **q), "air_temperature")
    assert str(err.value) == f"config key 'input.catalog': catalog '{catalog}': {message}"


def test_a_column_the_catalog_lacks_lists_its_columns(catalog):
    with pytest.raises(NcreelError, match=r"^config key 'input.query': catalog '.*' has no "
                                          r"column 'model' \(its columns: source_id, "
                                          r"experiment_id, member_id, table_id"):
        select_dataset(query(catalog, model="HadCM3"), "air_temperature")


def test_bad_catalogs_are_one_line(tmp_path):
    with pytest.raises(NcreelError, match=r"catalog '.*nope\.json': file not found$"):
        select_dataset({"catalog": str(tmp_path / "nope.json")})
    (tmp_path / "bad.json").write_text('{"esmcat_version": "0.1.0", "id": ')
    with pytest.raises(NcreelError) as err:
        select_dataset({"catalog": str(tmp_path / "bad.json")})
    assert "bad.json': not an ESM collection catalog that intake-esm can read (" in \
        str(err.value) and "\n" not in str(err.value)
    cat = make_catalog(tmp_path / "nocsv")
    (tmp_path / "nocsv" / "catalog.csv").unlink()
    with pytest.raises(NcreelError, match=r"catalog.json': not an ESM collection catalog that "
                                          r"intake-esm can read \(.*catalog\.csv"):
        select_dataset({"catalog": str(cat), "query": {"experiment_id": "A1B"}})


def test_assets_ncreel_cannot_read_are_named(tmp_path):
    row = {"source_id": "CESM2", "experiment_id": "historical", "member_id": "r1i1p1f1",
           "table_id": "Amon", "variable_id": "tas", "time_range": "185001-201412"}
    remote = make_catalog(tmp_path / "s3", rows=[
        {**row, "format": "zarr", "path": "s3://ncar-cesm2-lens/atm/monthly/tas.zarr"}])
    with pytest.raises(NcreelError, match=r"asset 's3://ncar-cesm2-lens/atm/monthly/tas\.zarr' "
                                          r"is not a local path"):
        select_dataset({"catalog": str(remote)}, "tas")
    ref = make_catalog(tmp_path / "ref", rows=[{**row, "format": "reference",
                                                "path": "/glade/refs/tas.json"}])
    with pytest.raises(NcreelError, match=r"asset '/glade/refs/tas\.json' is of format "
                                          r"'reference'; ncreel reads NetCDF files and Zarr"):
        select_dataset({"catalog": str(ref)}, "tas")
    missing = make_catalog(tmp_path / "gone", rows=[{**row, "format": "netcdf",
                                                     "path": str(tmp_path / "tas.nc")}])
    with pytest.raises(NcreelError, match=r"input '.*tas\.nc': file not found"):
        resolve_paths({"catalog": str(missing)}, "tas")


def test_several_assets_without_a_join_are_refused(tmp_path):
    cat = make_catalog(tmp_path, aggregation={
        "variable_column_name": "variable_id",
        "groupby_attrs": ["source_id", "experiment_id", "member_id", "table_id"],
        "aggregations": [{"type": "union", "attribute_name": "variable_id"}]})
    with pytest.raises(NcreelError, match=r"dataset HadCM3\.A1B\.r1i1p1\.Ayr has 3 assets and "
                                          r"the catalog's aggregation_control has no "
                                          r"join_existing aggregation"):
        select_dataset({"catalog": str(cat), "query": {"experiment_id": "A1B"}},
                       "air_temperature")


def test_without_aggregation_control_every_asset_is_a_dataset(tmp_path):
    cat = make_catalog(tmp_path, aggregation={})
    assert "aggregation_control" not in json.loads(cat.read_text())
    with pytest.raises(NcreelError, match=r"the query matches 3 datasets, ncreel shows one: "
                                          r"column .*time_range has 1860-1939, 1940-2019, "
                                          r"2020-2099"):
        select_dataset({"catalog": str(cat), "query": {"experiment_id": "A1B"}})
    chosen = select_dataset({"catalog": str(cat), "query": {"experiment_id": "A1B",
                                                            "time_range": "1940-2019"}})
    assert len(chosen.paths) == 1 and chosen.paths[0].endswith("_1940-2019.nc")


def test_inspect_takes_a_catalog_and_its_query(catalog, tmp_path, capsys):
    from ncreel.cli import main

    code = main(["inspect", str(catalog), "air_temperature", "--query", "experiment_id=A1B",
                 "--no-preview"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "input: 3 file(s): " in out.out and "1860-1939.nc ... " in out.out
    assert "frames: first '1860', last '2099'" in out.out
    code = main(["inspect", str(catalog), "air_temperature", "--query", "experiment_id=E1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("ncreel: error: config key "
                                                             "'input.catalog'")
    assert "column member_id has r1i1p1, r2i1p1" in err[0]


def test_the_answer_is_kept_for_the_same_catalog_files(tmp_path):
    # Every job reads the workflow again: the search is made once per catalog version.
    cat = make_catalog(tmp_path / "c")
    q = query(cat, experiment_id="A1B")
    first = select_dataset(q, "air_temperature", cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    csv = tmp_path / "c" / "catalog.csv"
    st = csv.stat()
    text = csv.read_bytes()
    csv.write_bytes(b"x" * len(text))  # unreadable, same size and time: the kept answer
    os.utime(csv, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert select_dataset(q, "air_temperature", cache_dir=tmp_path / "cache") == first
    # A catalog changed (a row less): searched again.
    csv.write_bytes(b"\n".join(ln for ln in text.splitlines() if b"1860-1939" not in ln))
    again = select_dataset(q, "air_temperature", cache_dir=tmp_path / "cache")
    assert len(again.paths) == 2 and again.paths == first.paths[1:]
