"""The ``ncreel`` command: settings from the schema, a run file that the workflow accepts."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from ncreel.cli import REQUIRED_KEYS, iter_settings, main, run_file
from ncreel.config.configcheck import load_schema


def _ncreel(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "ncreel", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_help_lists_every_setting_with_its_default():
    proc = _ncreel("--help")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("settings (key, default, meaning")[1].splitlines()
    for key, node in load_schema()["properties"].items():
        # The key's own line, not a wrapped description line that starts with the word.
        line = next((ln for ln in lines if ln.split()[:1] == [key]
                     and not ln.startswith(" " * 8)), None)
        assert line is not None, f"--help does not list {key}"
        if key in REQUIRED_KEYS:
            assert "(required)" in line
        elif isinstance(node["default"], str):
            assert line.split()[1] == node["default"], line
        else:
            assert yaml.safe_load(line.split()[1]) == node["default"], line


def test_settings_explains_nested_keys_and_suggests_names(capsys):
    assert main(["settings", "cells.geometry"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cells.geometry  [none | text | postgis; default none]")
    assert main(["settings", "map.coastline"]) == 2
    assert "did you mean 'map.coastlines'?" in capsys.readouterr().err


def test_run_file_uncommented_gives_exactly_the_schema_defaults():
    text = run_file(input="a.nc", variable="tas", run="r1")
    config = yaml.safe_load(text)
    assert config == {"input": "a.nc", "variable": "tas", "run": "r1"}
    # Uncomment every top-level setting: each must read back as its schema default.
    lines = [ln[2:] for ln in text.splitlines()
             if ln.startswith("# ") and ":" in ln and ln[2:3].isalpha()
             and ln[2:].split(":")[0].isidentifier()
             and ln[2:].split(":")[0] in load_schema()["properties"]]
    full = yaml.safe_load("\n".join(lines))
    for key, node in load_schema()["properties"].items():
        if key in REQUIRED_KEYS:
            continue
        assert key in full, f"run file lacks {key}"
        if node.get("type") == "object" and "properties" in node:
            continue  # nested: its own lines below it, each commented
        assert full[key] == node["default"], key
    # (A list's item keys, panels[].input, are not lines of their own: `panels: null`.)
    nested = [k for k, _ in iter_settings() if "." in k and "[]" not in k]
    for key in nested:
        assert f"# {key.rpartition('.')[2]}:" in text, key
    assert "# panels: null" in text


def test_config_refuses_to_overwrite(tmp_path):
    target = tmp_path / "run.yaml"
    assert _ncreel("config", "-o", str(target)).returncode == 0
    proc = _ncreel("config", "-o", str(target))
    assert proc.returncode == 2 and proc.stderr.startswith("ncreel: error:")


@pytest.mark.integration
def test_run_file_drives_a_dry_run(tmp_path, sample_nc):
    from workflow_run import make_workdir, snakemake

    work = make_workdir(tmp_path)
    proc = _ncreel("config", "-o", "my_run.yaml", "--input", str(sample_nc), "--variable",
                   "air_temperature", "--run", "from_file", cwd=work)
    assert proc.returncode == 0, proc.stderr
    out = snakemake(work, "-n", "--configfile", "my_run.yaml")
    assert "results/from_file/movie.mp4" in out.stdout + out.stderr


def test_status_of_a_run_file_without_run_is_what_snakemake_makes_of_it(tmp_path):
    """A run file without `run` is refused as snakemake refuses it when it names its own
    input, and is the demo's run when it only adds settings (snakemake --configfile runs
    the demo then); never the last run made in the directory."""
    record = tmp_path / ".snakemake" / "ncreel" / "runs"
    record.mkdir(parents=True)
    (record / "last-run.json").write_text('{"run": "other", "config": {"run": "other"}}')
    (tmp_path / "mine.yaml").write_text("input: tas_*.nc\nvariable: tas\n")
    proc = _ncreel("status", "--configfile", "mine.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("ncreel: error: run file mine.yaml sets input/variable but "
                                  "no run: ")
    (tmp_path / "db.yaml").write_text("database: {url: 'postgresql:///x'}\n")
    proc = _ncreel("status", "--configfile", "db.yaml", cwd=tmp_path)
    assert "run 'demo' has no shard plan yet" in proc.stderr, proc.stderr
    assert "other" not in proc.stderr


def test_status_of_a_wrong_file_or_directory_says_which_in_one_line(tmp_path, sample_nc):
    (tmp_path / "words.yaml").write_text("just words\n")
    for args, said in ((["--configfile", "words.yaml"], "--configfile words.yaml: not a run "
                        "file (YAML of config keys such as run: and input:, it holds a str)"),
                       (["--configfile", str(sample_nc)], f"--configfile {sample_nc}: "
                        "cannot read it as YAML ("),
                       (["--workdir", str(tmp_path / "nowhere")], f"--workdir "
                        f"{tmp_path / 'nowhere'}: no such directory")):
        proc = _ncreel("status", *args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith(f"ncreel: error: {said}"), proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr


def test_inspect_without_a_variable_of_a_bad_file_is_its_one_line(tmp_path):
    """No list heading before the error: stdout stays empty, stderr is one line."""
    (tmp_path / "region.geojson").write_text('{"type": "FeatureCollection", "features": []}')
    for name in ("nothere.nc", "region.geojson", "none_*.nc"):
        proc = _ncreel("inspect", name, cwd=tmp_path)
        assert proc.returncode != 0 and proc.stdout == "", (name, proc.stdout)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ncreel: error: "), \
            (name, proc.stderr)
