"""Input from an intake-esm catalog: ``input: {catalog: PATH.json, query: {COLUMN: VALUE}}``.

An ESM collection catalog (the format of NCAR's intake-esm: a JSON description and a CSV
of assets, https://github.com/NCAR/esm-collection-spec) is searched with intake-esm itself,
so a query means what it means in ``intake.open_esm_datastore(PATH).search(**query)``. The
assets of exactly one dataset -- one key of intake-esm's ``groupby_attrs``, and one value
of each ``join_new`` attribute (a new dimension ncreel cannot show) -- are joined along time
as the catalog's ``join_existing`` aggregation says, and handed on as any file list
(:func:`ncreel.input.source.resolve_paths`): overlap, identity and resume are the files'.

Relative asset paths are taken from the working directory, as intake-esm and xarray take
them. Assets must be local NetCDF files or Zarr stores.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from ncreel.core.errors import NcreelError

#: Asset formats ncreel reads (intake-esm's ``assets.format`` values).
READABLE_FORMATS = ("netcdf", "zarr", "zarr2", "zarr3")


@dataclass(frozen=True)
class CatalogSelection:
    """The one dataset a catalog query selected.

    Attributes
    ----------
    catalog : str
        The catalog's JSON file.
    key : str
        intake-esm's dataset key (``groupby_attrs`` values joined by ``.``).
    paths : tuple of str
        The assets, in the order of the ``join_existing`` attribute (ncreel then orders
        them by their first time, as xarray's ``combine_by_coords`` does for intake-esm).
    join_dim : str or None
        The dimension ``join_existing`` joins along (None: one asset, no join).
    """

    catalog: str
    key: str
    paths: tuple[str, ...]
    join_dim: str | None


def is_catalog(input: object) -> bool:
    """Whether config ``input`` names a catalog (a mapping with ``catalog``)."""
    return isinstance(input, Mapping) and "catalog" in input


def _where(path: str) -> str:
    return f"config key 'input.catalog': catalog '{path}'"


def _values_text(values, limit: int = 6) -> str:
    values = sorted({str(v) for v in values})
    shown = ", ".join(values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _open_catalog(path: str):
    """``intake_esm.esm_datastore`` of `path`, its errors as one line."""
    if not os.path.exists(path):
        raise NcreelError(f"{_where(path)}: file not found")
    if os.path.isdir(path) or not os.access(path, os.R_OK):
        raise NcreelError(f"{_where(path)}: not a readable file (name the catalog's JSON file)")
    try:
        import intake_esm
    except ImportError:
        raise NcreelError(f"{_where(path)}: intake-esm is not installed in this environment: "
                          "install ncreel's dependencies (make venv)") from None
    try:
        return intake_esm.esm_datastore(path)
    except Exception as err:  # pydantic, JSON, pandas/polars CSV errors, missing CSV
        cause = " ".join(str(err).split())
        raise NcreelError(f"{_where(path)}: not an ESM collection catalog that intake-esm can "
                          f"read ({type(err).__name__}: {cause[:300]}); check it with "
                          "intake.open_esm_datastore") from None


def _matches(cell, value) -> bool:
    """Whether a catalog cell (a value, or a list of them) holds `value`."""
    if isinstance(cell, list | tuple | set):
        return any(str(v) == str(value) for v in cell)
    return str(cell) == str(value)


def select_dataset(input: Mapping, variable: str | None = None, *,
                   cache_dir: str | os.PathLike | None = None) -> CatalogSelection:
    """Search the catalog of config `input` and return its one dataset's assets.

    Parameters
    ----------
    input : mapping
        ``{"catalog": PATH, "query": {COLUMN: VALUE or [VALUES]}}``; the columns are the
        catalog's own (``source_id``, ``experiment_id``, ``member_id``...).
    variable : str, optional
        Config ``variable``: picks the assets holding it where the catalog joins several
        variables (``union`` over its ``variable_column_name``) and the query does not.
    cache_dir : path, optional
        Where the answer is kept for the same catalog files (path, size and modification
        time of the JSON and its CSV), query and variable: every job of a run reads the
        workflow again, and a data centre's catalog has hundreds of thousands of rows.

    Returns
    -------
    CatalogSelection

    Raises
    ------
    NcreelError
        In one line: a catalog that is missing or that intake-esm cannot read; a query
        column the catalog does not have (listing its columns); a query that matches no
        asset (naming the value no asset has, with the values there are); one that
        matches several datasets (how many, and each column whose values differ, with
        the values); assets that are not local NetCDF files or Zarr stores; several
        assets the catalog's aggregation does not join along a dimension.
    """
    import warnings

    key = _cache_key(input, variable) if cache_dir is not None else None
    cached = None if key is None else os.path.join(os.fspath(cache_dir), f"{key}.json")
    if cached is not None:
        try:
            with open(cached, encoding="utf-8") as fh:
                saved = json.load(fh)
            return CatalogSelection(saved["catalog"], saved["key"], tuple(saved["paths"]),
                                    saved["join_dim"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # not kept yet (or unreadable): search
    with warnings.catch_warnings():
        # intake-esm's own deprecation notes (pydantic, pandas): nothing the user can act on
        warnings.simplefilter("ignore")
        chosen = _select(input, variable)
    if cached is not None:
        try:
            os.makedirs(os.path.dirname(cached), exist_ok=True)
            tmp = f"{cached}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"catalog": chosen.catalog, "key": chosen.key,
                           "paths": list(chosen.paths), "join_dim": chosen.join_dim}, fh)
            os.replace(tmp, cached)
        except OSError:
            pass  # a read-only working directory: the next parse searches again
    return chosen


def _cache_key(input: Mapping, variable: str | None) -> str | None:
    """Digest of what decides a search: the catalog's files as they are, query, variable.

    None (no caching) when the catalog's CSV is not a local file.
    """
    path = os.path.abspath(os.fspath(input["catalog"]))
    try:
        with open(path, encoding="utf-8") as fh:
            spec = json.load(fh)
        stamps = [[path, os.stat(path).st_size, os.stat(path).st_mtime_ns]]
        csv = spec.get("catalog_file") if isinstance(spec, dict) else None
        if csv is not None:
            if "://" in str(csv):
                return None
            # As intake-esm finds it: as given, else beside the JSON.
            for where in (str(csv), os.path.join(os.path.dirname(path), str(csv))):
                if os.path.isfile(where):
                    st = os.stat(where)
                    stamps.append([os.path.abspath(where), st.st_size, st.st_mtime_ns])
                    break
            else:
                return None
    except (OSError, ValueError):
        return None
    text = json.dumps([stamps, dict(input.get("query") or {}), variable], sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _select(input: Mapping, variable: str | None) -> CatalogSelection:
    path = os.fspath(input["catalog"])
    query = dict(input.get("query") or {})
    where = _where(path)
    cat = _open_catalog(path)
    df = cat.df
    columns = [str(c) for c in df.columns]
    for column in query:
        if column not in columns:
            raise NcreelError(f"config key 'input.query': catalog '{path}' has no column "
                              f"'{column}' (its columns: {', '.join(columns)})")
    found = cat.search(**query) if query else cat
    control = cat.esmcat.aggregation_control
    var_col = control.variable_column_name if control is not None else None
    if len(found.df) == 0:
        raise NcreelError(_none_message(path, df, query))
    if var_col and var_col not in query and variable and len(found.df):
        if not any(_matches(cell, variable) for cell in found.df[var_col]):
            raise NcreelError(
                f"{where}: the assets the query matches hold {var_col} "
                f"{_values_text(_flat(found.df[var_col]))}, not '{variable}': set variable "
                f"to one of them, or add {var_col} to input.query")
        found = found.search(**{var_col: variable})
    keys = found.keys()
    aggregations = list(control.aggregations) if control is not None else []
    new_dims = [a.attribute_name for a in aggregations if a.type.value == "join_new"]
    groups = list(control.groupby_attrs or []) if control is not None else []
    sub = found.df
    split = [c for c in [*groups, *new_dims] if c in sub.columns
             and sub[c].astype(str).nunique() > 1]
    if len(keys) > 1 or split:
        n = len(sub.astype(str).groupby([c for c in [*groups, *new_dims]
                                         if c in sub.columns] or list(sub.columns)).groups)
        differ = split or [c for c in sub.columns if sub[c].astype(str).nunique() > 1]
        what = "; ".join(f"column {c} has {_values_text(sub[c])}" for c in differ[:3])
        raise NcreelError(
            f"{where}: the query matches {max(n, len(keys))} datasets, ncreel shows one: "
            f"{what}; add {differ[0]}: VALUE to input.query")
    assets = _assets(cat, sub, path)
    join = next((a for a in aggregations if a.type.value == "join_existing"), None)
    if len(assets) > 1 and join is None:
        raise NcreelError(
            f"{where}: dataset {keys[0]} has {len(assets)} assets and the catalog's "
            "aggregation_control has no join_existing aggregation to join them along time; "
            "narrow input.query to one asset, or name the files in input instead")
    if join is not None and join.attribute_name in sub.columns:
        order = sorted(range(len(assets)), key=lambda i: str(sub[join.attribute_name].iloc[i]))
        assets = [assets[i] for i in order]
    dim = (join.options or {}).get("dim") if join is not None and len(assets) > 1 else None
    return CatalogSelection(catalog=path, key=str(keys[0]), paths=tuple(assets),
                            join_dim=dim)


def _flat(cells) -> list:
    out = []
    for cell in cells:
        out.extend(cell if isinstance(cell, list | tuple | set) else [cell])
    return out


def _none_message(path: str, df, query: Mapping) -> str:
    """Which query value no asset has (with the values there are), or that together none do."""
    for column, value in query.items():
        wanted = value if isinstance(value, list | tuple) else [value]
        have = _flat(df[column])
        if not any(_matches(h, w) for h in have for w in wanted):
            return (f"{_where(path)}: no asset has {column} "
                    f"{', '.join(map(str, wanted))} (it has {_values_text(have)})")
    shown = ", ".join(f"{k}: {v}" for k, v in query.items())
    return (f"{_where(path)}: no asset matches all of input.query ({shown}); each value "
            "exists, but not together")


def _assets(cat, sub, path: str) -> list[str]:
    """Return the asset paths of `sub`, each a local NetCDF file or Zarr store."""
    esmcat = cat.esmcat
    column = esmcat.assets.column_name
    fmt_column = esmcat.assets.format_column_name
    out = []
    for i in range(len(sub)):
        asset = str(sub[column].iloc[i])
        fmt = (str(sub[fmt_column].iloc[i]) if fmt_column else
               getattr(esmcat.assets.format, "value", str(esmcat.assets.format)))
        if fmt not in READABLE_FORMATS:
            raise NcreelError(f"{_where(path)}: asset '{asset}' is of format '{fmt}'; ncreel "
                              "reads NetCDF files and Zarr stores")
        if "://" in asset and not asset.startswith("file://"):
            raise NcreelError(f"{_where(path)}: asset '{asset}' is not a local path; ncreel "
                              "reads files on this machine's file systems (copy the data, "
                              "or use a catalog of its local paths)")
        out.append(asset.removeprefix("file://"))
    return out
