"""An intake-esm catalog (ESM collection spec: JSON + CSV of assets) over real sample files.

The files are iris-sample-data's HadCM3 runs and OSTIA analysis, as a data centre keeps
them: the A1B run split into three files along time (rows of the CSV out of time order),
the E1 run twice (member r1i1p1 as a Zarr store, r2i1p1 as the NetCDF file), OSTIA monthly
SST. The format is that of intake-esm's own test catalogs (tests/sample-catalogs/
cmip6-bcc-mixed-formats.json: a format column beside the path).
"""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import xarray as xr

#: A1B's three files: (first step, stop step, time_range as CMIP writes it).
A1B_SPLIT = ((160, 240, "2020-2099"), (0, 80, "1860-1939"), (80, 160, "1940-2019"))
COLUMNS = ["source_id", "experiment_id", "member_id", "table_id", "variable_id",
           "time_range", "format", "path"]


def sample(name: str) -> Path:
    from ncreel.sample import sample_path

    return sample_path(name)


def make_catalog(root: Path, *, rows: list[dict] | None = None,
                 aggregation: dict | None = None) -> Path:
    """Write the files and ``root/catalog.json`` + ``catalog.csv``; return the JSON's path.

    `rows` replaces the CSV rows (the files are written all the same), `aggregation` the
    JSON's ``aggregation_control`` (None: the default below; ``{}`` drops it).
    """
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    out = []
    with xr.open_dataset(sample("A1B_north_america.nc"), decode_times=False) as ds:
        ds = ds.load()
    for start, stop, span in A1B_SPLIT:
        path = data / f"air_temperature_Ayr_HadCM3_A1B_r1i1p1_{span}.nc"
        ds.isel(time=slice(start, stop)).to_netcdf(path)
        out.append({"experiment_id": "A1B", "member_id": "r1i1p1", "time_range": span,
                    "format": "netcdf", "path": str(path)})
    store = data / "air_temperature_Ayr_HadCM3_E1_r1i1p1.zarr"
    with xr.open_dataset(sample("E1_north_america.nc"), decode_times=False) as ds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds[["air_temperature"]].load().chunk({"time": 16}).to_zarr(store, mode="w")
    out.append({"experiment_id": "E1", "member_id": "r1i1p1", "time_range": "1860-2099",
                "format": "zarr", "path": str(store)})
    out.append({"experiment_id": "E1", "member_id": "r2i1p1", "time_range": "1860-2099",
                "format": "netcdf", "path": str(sample("E1_north_america.nc"))})
    for row in out:
        row.update(source_id="HadCM3", table_id="Ayr", variable_id="air_temperature")
    out.append({"source_id": "OSTIA", "experiment_id": "analysis", "member_id": "r1",
                "table_id": "Omon", "variable_id": "surface_temperature",
                "time_range": "2006-2010", "format": "netcdf",
                "path": str(sample("ostia_monthly.nc"))})
    with open(root / "catalog.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, COLUMNS)
        writer.writeheader()
        writer.writerows(out if rows is None else rows)
    spec = {
        "esmcat_version": "0.1.0",
        "id": "ncreel-samples",
        "description": "iris-sample-data runs, catalogued as a data centre would",
        "catalog_file": "catalog.csv",
        "attributes": [{"column_name": c, "vocabulary": ""} for c in COLUMNS[:6]],
        "assets": {"column_name": "path", "format_column_name": "format"},
        "aggregation_control": {
            "variable_column_name": "variable_id",
            "groupby_attrs": ["source_id", "experiment_id", "table_id"],
            "aggregations": [
                {"type": "join_new", "attribute_name": "member_id",
                 "options": {"coords": "minimal", "compat": "override"}},
                {"type": "join_existing", "attribute_name": "time_range",
                 "options": {"dim": "time"}},
                {"type": "union", "attribute_name": "variable_id"},
            ],
        },
    }
    if aggregation is not None:
        if aggregation:
            spec["aggregation_control"] = aggregation
        else:
            del spec["aggregation_control"]
    (root / "catalog.json").write_text(json.dumps(spec, indent=2))
    return root / "catalog.json"
