"""Text with every shell metacharacter and Snakemake's wildcard braces, for the tests that
check it reaches jobs unchanged and runs nothing (tests/integration/test_security.py,
test_pbs.py, test_slurm.py)."""

from __future__ import annotations

import json
from pathlib import Path

from layouts import write_rectilinear

#: Every character a shell treats specially, a space, and `{x}` / `{y,z}` (wildcards to
#: Snakemake). A newline cannot come through ``--config`` (Snakemake's YAML parse folds
#: it into a space): tests/test_jobtext.py has it.
METACHARS = "'\"$()`;&|<>*?~\\ {x}{y,z}"


def payload(tag: str, *, double_quote: bool = True, backslash: bool = True) -> str:
    """Text that runs ``touch PWNED_<tag>`` if a shell expands it (``$()`` or backticks),
    holding every character of :data:`METACHARS`, at most 63 bytes (a PostgreSQL name).

    Without `double_quote`, Python's ``repr()`` puts it in double quotes (the case of the
    original report); with it, in single quotes with ``\\'`` escapes, which ``sh`` reads
    as the end of the quoted text. Without `backslash` for file names (netCDF-C cannot
    open a path holding one).
    """
    text = f"{tag}'$(touch PWNED_{tag})\"`touch PWNED_{tag}b`;&|<>*?~\\ {{x}}{{y,z}}_"
    if not double_quote:
        text = text.replace('"', "")
    return text if backslash else text.replace("\\", "")


def write_odd_input(work: Path) -> dict[str, str]:
    """Write a 4-step NetCDF file whose name, variable and time units/calendar hold odd
    text; return the ``--config`` values that name it (``input``, ``variable``, ``table``)."""
    var = payload("v", double_quote=False)
    folder = work / "in"
    folder.mkdir()
    path, _ = write_rectilinear(folder / "plain.nc", n_time=4,
                               units="days since 2000-01-01 {x}", calendar="{y}")
    odd = folder / (payload("i", backslash=False) + ".nc")
    import xarray as xr  # (only these tests need it here)

    with xr.open_dataset(path, decode_times=False) as ds:
        ds.load().rename({"tas": var}).to_netcdf(odd)
    path.unlink()
    values = {"input": str(odd.relative_to(work)), "variable": var,
              "table": payload("t")}
    (work / "odd-values.json").write_text(json.dumps(values))
    return values


def config_args(values: dict[str, str]) -> list[str]:
    """``key=value`` arguments of ``--config`` (argv entries: no shell in the test itself)."""
    return [f"{k}={v}" for k, v in values.items()]


def check_odd_run(work: Path, values: dict[str, str], run: str = "demo") -> None:
    """Nothing was executed, and the jobs used exactly the checked table and variable."""
    pwned = sorted(str(p) for p in work.parent.rglob("PWNED*"))
    assert not pwned, pwned
    sql = (work / f"results/{run}/cells.sql").read_text()
    quoted = '"' + values["table"].replace('"', '""') + '"'
    assert f"CREATE TABLE IF NOT EXISTS {quoted} (" in sql, sql[:2000]
    assert values["variable"] in sql and values["input"].split("/")[-1] in sql, sql[:600]
    assert "units 'days since 2000-01-01 {x}' calendar '{y}'" in sql, sql[:600]
    rows = (work / f"results/{run}/cells.copy").read_text().splitlines()
    assert len(rows) == 4 * 3 * 4, len(rows)
