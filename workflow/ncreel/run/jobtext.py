"""User and file text reaches Snakemake's jobs unchanged, and never through a shell.

Snakemake starts every job (a PBS, Slurm or cluster-generic job, and a local job that it
spawns) with a command line it writes as TEXT for ``/bin/sh``: ``--config`` values and the
job's input paths (``--wait-for-files``) are quoted with Python's ``repr()``, which is not
shell quoting. A value holding ``'`` is put in double quotes, where ``sh`` expands
``$(...)`` and backticks (Slurm's ``sbatch --wrap`` even does so on the login node), and a
backslash or newline reaches the job changed. Separately, Snakemake reads ``{name}`` in
any input, output or log path, and in plain string params, as a wildcard (it has no
escape for paths: ``{{name}}`` still holds ``{name}``).

- :func:`pass_config_by_file` writes the run's ``--config`` values once, at parse time, to
  a JSON file named by its digest, and hands jobs that file's path (``--configfiles``,
  which Snakemake quotes with :func:`shlex.quote`) instead of the values: each job loads
  exactly the values the parse-time checks saw.
- :func:`input_link` gives an input file whose path holds anything but plain characters a
  plain name (a symbolic link under :data:`INPUT_LINK_DIR`) for rules to declare; jobs
  read the real path from their params, which reach them as JSON.
- :func:`shell_unsafe` finds the paths (working directory, Snakefile, config files) that
  would still reach a job's command line changed, so the run can refuse them.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from snakemake_executor_plugin_pbs_pro import configfile

from ncreel.core.errors import NcreelError

#: Where run config files are written (relative to the working directory).
RUN_CONFIG_DIR = Path(".snakemake") / "ncreel" / "run-config"

#: Where input links are made (relative to the working directory).
INPUT_LINK_DIR = Path(".snakemake") / "ncreel" / "inputs"

#: A path of only these characters reaches a job's command line and a rule unchanged.
PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+,:@%=-]+")

#: Characters that a shell still interprets inside double quotes (Slurm's ``--wrap="..."``),
#: or that Python's ``repr()`` escapes, so a path holding one reaches a job changed.
SHELL_UNSAFE = frozenset("$`\\\"'!")


def write_run_config(overrides: Mapping, directory: str | os.PathLike = RUN_CONFIG_DIR) -> Path:
    """Write `overrides` as JSON to ``<directory>/<sha256 prefix>.json``; return its absolute path.

    The PBS Pro executor plugin's own writer (``configfile.write_run_config``): the name is
    the digest of the content, so every run with the same values shares one file and a
    file is never rewritten with other values while jobs read it; written under a
    temporary name and renamed, so a job never reads half of it.

    Raises
    ------
    NcreelError
        The file cannot be written (its message names it and why).
    TypeError
        A value JSON cannot hold (``--config`` gives only numbers, booleans, strings,
        lists and mappings, so this means a bug, not bad input).
    """
    try:
        return configfile.write_run_config(overrides, directory)
    except configfile.ConfigFileError as err:
        raise NcreelError(str(err)) from None


def pass_config_by_file(config_settings, directory: str | os.PathLike = RUN_CONFIG_DIR
                        ) -> Path | None:
    """Make Snakemake pass the ``--config`` values to jobs as a config file.

    For every executor (local, Slurm, cluster-generic), as the PBS Pro executor plugin
    does for its own jobs (``configfile.pass_config_by_file``, which this calls).

    Parameters
    ----------
    config_settings : snakemake.settings.types.ConfigSettings
        The workflow's ``config_settings``: ``config`` (the parsed ``--config`` values),
        ``config_args`` (their text, which Snakemake would put on each job's command
        line) and ``configfiles`` (absolute paths, passed to jobs with shell quoting).
        Changed in place: the values are written by :func:`write_run_config`, its path
        is appended to ``configfiles`` (last, so it overrides the other files as
        ``--config`` does) and ``config_args`` is emptied.
    directory : path
        Where the file goes.

    Returns
    -------
    Path or None
        The file, or None when there were no ``--config`` values.

    Raises
    ------
    NcreelError
        The file cannot be written.
    """
    try:
        return configfile.pass_config_by_file(config_settings, directory)
    except configfile.ConfigFileError as err:
        raise NcreelError(str(err)) from None


#: `value` with every mapping a dict (Snakemake may hold immutable mappings).
_plain = configfile._plain


def shell_unsafe(paths: Iterable[tuple[str, str | os.PathLike]]) -> str | None:
    """Return one line naming the first path that would reach a job changed.

    Parameters
    ----------
    paths : iterable of (what, path)
        ``what`` names the path in the message (``"the working directory"``).

    Returns
    -------
    str or None
        The message, or None when every path holds only characters that Snakemake's
        quoting and the shells around a job leave alone (not :data:`SHELL_UNSAFE`, no
        control characters).
    """
    for what, path in paths:
        text = os.fspath(path)
        bad = sorted({c for c in text if c in SHELL_UNSAFE or not c.isprintable()})
        if bad:
            shown = " ".join(repr(c) for c in bad)
            return (f"{what} {text!r} holds {shown}: Snakemake writes it into every job's "
                    "shell command line, where it would not arrive unchanged; move or "
                    "rename it to a path without these characters")
    return None


def input_link(path: str | os.PathLike, directory: str | os.PathLike = INPUT_LINK_DIR, *,
               create: bool = True) -> str:
    """Return the name under which rules declare the input file `path`.

    `path` itself when it is :data:`PLAIN_PATH`; otherwise a symbolic link
    ``<directory>/<digest>_<plain name>`` to its absolute path, made (atomically, when
    `create`) if it is missing or points elsewhere. Snakemake takes the later of the
    link's and the file's modification times: the link gets the file's, so a changed
    input still makes its jobs rerun and a new link alone does not.

    Returns
    -------
    str
        A path of plain characters only.

    Raises
    ------
    NcreelError
        The link cannot be made (its message names the file and why).
    """
    text = os.fspath(path)
    if PLAIN_PATH.fullmatch(text):
        return text
    target = os.path.abspath(text)
    digest = hashlib.sha256(os.fsencode(target)).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", os.path.basename(target))[-60:]
    link = Path(directory) / f"{digest}_{name}"
    try:
        if os.readlink(link) == target:
            return str(link)
    except OSError:
        pass
    if not create:
        return str(link)
    # Named by process: two runs of other names may link the same input at once.
    tmp = link.with_name(f"{link.name}.{os.getpid()}.tmp")
    try:
        link.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(target)
        st = os.stat(target)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
        tmp.replace(link)
    except OSError as err:
        raise NcreelError(f"input {text!r}: cannot make its link {link} ({err.strerror}): "
                          "rules name inputs with odd characters through it; make the "
                          "working directory's .snakemake/ writable, or rename the file "
                          "to letters, digits and _ . / + , : @ % = -") from err
    return str(link)


def envvar_problem(envvars: Mapping[str, str], executor: str) -> str | None:
    """One line naming the first variable whose value ``export VAR=repr(value)`` changes.

    Executors that declare ``--envvars`` variables in each job's command (cluster-generic)
    quote their values with ``repr()``: a quote, a backslash or a control character would
    reach the job changed, or run as shell text. The value is not shown (it may be a
    secret).

    Parameters
    ----------
    envvars : mapping
        Variable name -> value, as Snakemake passes them to jobs.
    executor : str
        The executor's name, for the message.
    """
    for name, value in envvars.items():
        if repr(value) != f"'{value}'":
            return (f"environment variable {name} (--envvars) holds a quote, a backslash or "
                    f"a control character: the {executor} executor writes `export "
                    f"{name}=<value>` into every job's shell command, where it would not "
                    "arrive unchanged; set it in the environment your jobs start with instead")
    return None
