"""Config values and input paths reach Snakemake's jobs unchanged, never through a shell.

The job command lines here are built with Snakemake's own quoting functions (what its
spawned-job factory calls for ``--config``, ``--configfiles`` and ``--wait-for-files``)
and run by a real ``/bin/sh``, as a PBS, Slurm or cluster-generic job script is.
The whole workflow through real schedulers: tests/integration/test_security.py,
test_pbs.py and test_slurm.py (``metachar``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ncreel.run.jobtext import (
    PLAIN_PATH,
    envvar_problem,
    input_link,
    pass_config_by_file,
    shell_unsafe,
    write_run_config,
)
from snakemake.common.configfile import load_configfile
from snakemake.io import get_wildcard_names
from snakemake.settings.types import ConfigSettings
from snakemake.utils import update_config
from snakemake_interface_executor_plugins.utils import format_cli_arg

ODD = ["x'$(touch PWNED)", 'x"$(touch PWNED)"', "x'\"`touch PWNED`", "a;touch PWNED",
       "a&&touch PWNED", "a|touch PWNED", "a>PWNED", "a<b", "a*", "a?", "~", "a\\b",
       "a\\'b", "two\nlines", "{x}", "{y,z}", "tab\there", "é ü", ""]

#: What a job sees of its command line: its argv, as JSON.
ARGV = f"{sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))'"


def sh(command: str, cwd: Path) -> list[str]:
    """Run `command` as a job script does (``/bin/sh``); return the argv it reached."""
    out = subprocess.run(["/bin/sh", "-c", f"{ARGV} {command}"], cwd=cwd,
                         capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout) if out.returncode == 0 else [f"<sh failed: {out.stderr}>"]


def settings(values: dict) -> ConfigSettings:
    """Snakemake's config settings as ``--config key=value ...`` leaves them."""
    return ConfigSettings(config=dict(values), config_args=[f"{k}={v}" for k, v in
                                                            values.items()])


def test_snakemakes_own_config_quoting_runs_what_a_value_holds(tmp_path):
    """Why: the ``--config`` text Snakemake writes into each job's command runs ``$()``
    in a value holding ``'`` and changes a backslash. (When a Snakemake release quotes
    it for the shell, this fails: pass_config_by_file may then go.)"""
    cs = settings({"table": "x'$(touch PWNED)", "variable": "a\\b"})
    argv = sh(format_cli_arg("--config", cs.config_args), tmp_path)
    assert (tmp_path / "PWNED").exists()
    assert argv[1:] != ["table=x'$(touch PWNED)", "variable=a\\b"]


@pytest.mark.parametrize("value", ODD)
def test_config_values_reach_jobs_by_file_exactly(value, tmp_path):
    """After :func:`pass_config_by_file` no value is on the command line; the job loads
    from the file it names exactly the overrides the main process checked."""
    values = {"table": value, "select": {"level": value}, "vmin": 1.5, "flag": True}
    cs = settings(values)
    before = {"run": "demo"}
    user_file = tmp_path / "user.json"
    user_file.write_text(json.dumps(before))
    cs.configfiles = [user_file.absolute()]
    main_sees = {}
    update_config(main_sees, before)
    update_config(main_sees, cs.config)
    path = pass_config_by_file(cs, tmp_path / "run-config")
    assert format_cli_arg("--config", cs.config_args) == ""
    assert cs.configfiles == [user_file.absolute(), path]
    argv = sh(format_cli_arg("--configfiles", cs.configfiles), tmp_path)
    assert argv == ["--configfiles", str(user_file.absolute()), str(path)]
    job_sees = {}
    for f in argv[1:]:
        update_config(job_sees, load_configfile(f))
    assert job_sees == main_sees
    assert not list(tmp_path.rglob("PWNED*"))


def test_run_config_file_is_named_by_its_content_and_never_rewritten(tmp_path):
    a = write_run_config({"table": "x"}, tmp_path)
    stamp = a.stat().st_mtime_ns
    assert write_run_config({"table": "x"}, tmp_path) == a and a.stat().st_mtime_ns == stamp
    b = write_run_config({"table": "y"}, tmp_path)
    assert b != a and json.loads(a.read_text()) == {"table": "x"}
    assert PLAIN_PATH.fullmatch(a.name) and not list(tmp_path.glob("*.part"))


def test_no_config_values_means_no_file(tmp_path):
    cs = ConfigSettings()
    assert pass_config_by_file(cs, tmp_path / "rc") is None
    assert not (tmp_path / "rc").exists() and not cs.config_args


@pytest.mark.parametrize("name", ["plain_name-1.2+x@y,z=w%.nc", *ODD[:-1]])
def test_input_link_is_plain_and_reaches_the_file(name, tmp_path, monkeypatch):
    """A rule declares a plain path: no wildcard to Snakemake, the same argv after sh
    (``--wait-for-files``), and the file itself behind it."""
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "in" / name.replace("/", "_")
    real.parent.mkdir()
    real.write_bytes(b"CDF\x01")
    given = os.path.relpath(real)
    link = input_link(given, ".links")
    assert PLAIN_PATH.fullmatch(link) and not get_wildcard_names(link)
    assert sh(format_cli_arg("--wait-for-files", [link]), tmp_path) == ["--wait-for-files",
                                                                       link]
    assert os.path.samefile(link, real)
    if PLAIN_PATH.fullmatch(given):
        assert link == given
    else:
        assert Path(link).parent == Path(".links") and os.readlink(link) == str(real)
        assert input_link(given, ".links") == link  # the same link, kept
    assert not list(tmp_path.rglob("PWNED*"))


def test_input_link_that_points_elsewhere_is_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "a b.nc"
    real.write_bytes(b"x")
    link = input_link(real.name, "links")
    os.remove(link)
    os.symlink("/nonexistent", link)
    assert input_link(real.name, "links") == link and os.path.samefile(link, real)


@pytest.mark.parametrize("char", ["$", "`", "\\", '"', "'", "!", "\n", "\t"])
def test_shell_unsafe_paths_are_named(char):
    line = shell_unsafe([("the working directory", "/plain"),
                         ("config file", f"/home/u/co{char}nfig.yaml")])
    assert line.startswith("config file ") and "/home/u/co" in line and repr(char) in line
    assert "\n" not in line


def test_plain_paths_with_spaces_and_letters_are_not_refused():
    assert shell_unsafe([("the working directory", "/home/Zoë Ünal/my run (2)/x~y"),
                         ("the Snakefile", "/a/b/Snakefile")]) is None


def test_input_link_has_the_files_time_and_jobs_only_name_it(tmp_path, monkeypatch):
    """Snakemake takes the later of a link's and its file's mtime: a new link must not make
    the run's outputs look older than their input; jobs (create=False) never touch it."""
    monkeypatch.chdir(tmp_path)
    real = tmp_path / "odd {x}.nc"
    real.write_bytes(b"x")
    os.utime(real, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    assert input_link(real.name, "links", create=False) == (
        link := input_link(real.name, "links"))
    assert os.lstat(link).st_mtime_ns == 1_000_000_000_000_000_000
    os.remove(link)
    assert input_link(real.name, "links", create=False) == link and not os.path.lexists(link)


def test_unwritable_places_are_one_line(tmp_path, monkeypatch):
    from ncreel.core.errors import NcreelError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "links").write_text("a file where a folder must be")
    (tmp_path / "odd'.nc").write_bytes(b"x")
    with pytest.raises(NcreelError, match=r"input \"odd'.nc\": cannot make its link"):
        input_link("odd'.nc", tmp_path / "ro" / "links")
    with pytest.raises(NcreelError, match="cannot write the run's config file"):
        write_run_config({"a": 1}, tmp_path / "ro" / "links")


@pytest.mark.parametrize("value, refused", [
    ("plain value 1", False), ("é/ü:x", False), ("it's", True), ("a\\b", True),
    ("two\nlines", True), ("a$(touch PWNED)", False)])
def test_envvar_values_an_export_would_change_are_named_not_shown(value, refused):
    """``export VAR='value'`` is exact unless repr() escapes (a quote, a backslash, a
    control character); the message names the variable and never shows its value."""
    line = envvar_problem({"OK": "x", "SECRET_VAR": value}, "cluster-generic")
    assert (line is not None) == refused
    if line:
        assert "SECRET_VAR" in line and value not in line and "\n" not in line
