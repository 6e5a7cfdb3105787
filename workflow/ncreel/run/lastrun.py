"""The settings each run was last run with, so that its report is of that run.

A run is driven by one run file (``--configfile my_run.yaml``); ``snakemake --report``
given no run file would otherwise read only ``config/config.yaml`` and report the demo.
The controller of every real run records the settings it runs with (the whole config,
defaults filled in, and the run files and ``--config`` values it came from) in
``.snakemake/ncreel/runs/<run>.json`` and ``last-run.json`` in its working directory.
``snakemake --report`` then:

- given no run file and no ``--config``: reports the last run made in that directory,
  with the settings it ran with, and says so;
- given a run file: reports that run, and warns when its settings differ from those
  the run was last run with (the report would describe other settings than the files
  in it were made with).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ncreel.core.io import atomic_path
from ncreel.run.jobtext import RUN_CONFIG_DIR, _plain
from ncreel.run.software import software

#: Where the records go (relative to the working directory).
RECORD_DIR = Path(".snakemake") / "ncreel" / "runs"
LAST = "last-run.json"


def record_run(config: Mapping, configfiles: Sequence, overrides: Mapping | None = None,
               directory: str | os.PathLike = RECORD_DIR) -> Path:
    """Record the settings a run runs with; return the run's record file.

    Parameters
    ----------
    config : mapping
        The run's whole config as validated (defaults filled in); ``config["run"]`` names
        the run.
    configfiles : sequence of path
        The ``--configfile`` files, in order (files ncreel writes itself to pass
        ``--config`` values to jobs are left out).
    overrides : mapping, optional
        The ``--config`` values.
    directory : path
        Where the records go.

    Raises
    ------
    OSError
        If the record cannot be written.
    """
    directory = Path(directory)
    own = Path(RUN_CONFIG_DIR).resolve()
    files = [str(Path(f).resolve()) for f in configfiles if Path(f).resolve().parent != own]
    doc = {"run": config["run"], "configfiles": files, "overrides": _plain(overrides or {}),
           "config": _plain(config), "time": time.time(), "software": software()}
    text = json.dumps(doc, indent=1, default=str) + "\n"
    path = directory / f"{config['run']}.json"
    for target in (path, directory / LAST):
        with atomic_path(target) as tmp:
            tmp.write_text(text, encoding="utf-8")
    return path


def read_record(path: str | os.PathLike) -> dict | None:
    """Return a record written by :func:`record_run`, or None if there is none."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("config"), dict) else None


def run_file_text(record: Mapping) -> str:
    """Return how a record's run was configured, for a message.

    ``--configfile F`` and/or the ``--config`` keys, or ``config/config.yaml alone``.
    """
    parts = [f"--configfile {f}" for f in record.get("configfiles", [])]
    if record.get("overrides"):
        parts.append("--config " + " ".join(f"{k}=..." for k in record["overrides"]))
    return " ".join(parts) or "config/config.yaml alone"


def differing_keys(config: Mapping, recorded: Mapping,
                   defaults: Mapping | None = None) -> list[str]:
    """Return the top-level keys whose values in `config` differ from `recorded`'s.

    `config` is as read (before validation), `recorded` as validated. A top-level key
    `config` does not set has the schema's default (`defaults`, else
    :func:`ncreel.config.configcheck.schema_defaults`): a run made with ``--config
    width=320`` differs from a report command without it. Nested keys `config` does not
    set are defaults, filled in the same way for both.
    """
    if defaults is None:
        from ncreel.config.configcheck import schema_defaults

        defaults = schema_defaults()
    keys = set(config) | (set(recorded) & set(defaults))
    return sorted(k for k in keys
                  if not _within(config[k] if k in config else defaults[k], recorded.get(k)))


def _within(value, recorded) -> bool:
    if isinstance(value, Mapping) and isinstance(recorded, Mapping):
        return all(_within(v, recorded.get(k)) for k, v in value.items())
    return _plain(value) == recorded


def report_config(config: dict, configfiles: Sequence, overrides: Mapping | None,
                  directory: str | os.PathLike = RECORD_DIR) -> list[str]:
    """Make the config of ``snakemake --report`` that of the run it reports.

    Parameters
    ----------
    config : dict
        The config Snakemake read (``config/config.yaml``, the run files and
        ``--config`` values); replaced in place by the last run's when the command gave
        neither run file nor values and a run was made in this directory.
    configfiles, overrides
        The command's ``--configfile`` files and ``--config`` values.
    directory : path
        Where :func:`record_run` wrote.

    Returns
    -------
    list of str
        Lines to show, each starting ``note:`` or ``warning:``.
    """
    directory = Path(directory)
    if not configfiles and not overrides:
        last = read_record(directory / LAST)
        if last is None:
            return []
        if differing_keys(config, last["config"]) or last["run"] != config.get("run"):
            config.clear()
            config.update(last["config"])
        return [f"note: no run file given: reporting the last run made here, "
                f"'{last['run']}' ({run_file_text(last)}), with the settings it ran with; "
                "for another run give its --configfile"]
    run = config.get("run")
    mine = read_record(directory / f"{run}.json") if isinstance(run, str) else None
    if mine is None:
        return []
    keys = differing_keys(config, mine["config"])
    if not keys:
        return []
    return [f"warning: run '{run}' last ran with other settings than these "
            f"({', '.join(keys)} differ): its report would describe settings its files "
            f"were not made with; give the run's own settings: {run_file_text(mine)}"]
