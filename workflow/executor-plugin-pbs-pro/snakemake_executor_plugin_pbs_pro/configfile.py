"""``--config`` values reach jobs in a file, not on their command line.

Snakemake writes a run's ``--config`` values into every job's command line with Python's
``repr()``, which ``/bin/sh`` re-parses: a value holding ``'`` or ``$(...)`` reaches the job
changed, or runs. The executor writes the values once to a JSON file named by its digest
and hands jobs that file (``--configfiles``, which Snakemake quotes for the shell) instead.
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from snakemake_executor_plugin_pbs_pro.state import STATE_DIR

#: Where run config files are written (relative to the working directory).
RUN_CONFIG_DIR = Path(STATE_DIR) / "run-config"


class ConfigFileError(RuntimeError):
    """The run's config file cannot be written (its message says which and why)."""


def _plain(value):
    """`value` with every mapping a dict (Snakemake may hold immutable mappings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def write_run_config(overrides, directory: str | os.PathLike = RUN_CONFIG_DIR) -> Path:
    """Write `overrides` as JSON to ``<directory>/<sha256 prefix>.json``; return its path.

    The name is the digest of the content, so a file is never rewritten with other values
    while jobs read it. Written under a temporary name and renamed.

    Raises
    ------
    ConfigFileError
        The file cannot be written.
    """
    text = json.dumps(_plain(overrides), indent=1, ensure_ascii=True) + "\n"
    path = Path(directory) / f"{hashlib.sha256(text.encode()).hexdigest()[:20]}.json"
    try:
        if path.read_text(encoding="utf-8") == text:
            return path.resolve()
    except OSError:
        pass
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as err:
        raise ConfigFileError(f"cannot write the run's config file {path} ({err.strerror}): "
                              "jobs read the --config values from it; make the working "
                              "directory's .snakemake/ writable") from err
    return path.resolve()


def pass_config_by_file(config_settings, directory: str | os.PathLike = RUN_CONFIG_DIR
                        ) -> Path | None:
    """Make Snakemake pass the ``--config`` values to jobs as a config file.

    Parameters
    ----------
    config_settings : snakemake.settings.types.ConfigSettings
        The workflow's ``config_settings``, changed in place: the values (``config``) are
        written by :func:`write_run_config`, its path is appended to ``configfiles``
        (last, so it overrides the other files as ``--config`` does) and ``config_args``
        (the text Snakemake would put on each job's command line) is emptied.
    directory : path
        Where the file goes.

    Returns
    -------
    Path or None
        The file, or None when there were no ``--config`` values.
    """
    overrides = config_settings.config
    if not overrides:
        config_settings.config_args = None
        return None
    path = write_run_config(overrides, directory)
    if path not in config_settings.configfiles:
        config_settings.configfiles = [*config_settings.configfiles, path]
    config_settings.config_args = None
    return path
