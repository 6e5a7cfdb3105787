"""``ncreel.run.lastrun``: the report and the status of a run use the settings it ran with."""

import json

from ncreel.cli import main as ncreel_main
from ncreel.config.configcheck import reporting_only
from ncreel.run.lastrun import LAST, read_record, record_run, report_config

DEMO = {"run": "demo", "input": "resources/A1B_north_america.nc", "width": 640,
        "map": {"projection": "PlateCarree", "projection_params": {}}}
MINE = {"run": "tas_day", "input": "/scratch/tas_day_*.nc", "width": 1280,
        "map": {"projection": "Robinson", "projection_params": {}}}


def test_report_without_run_file_reports_the_last_run(tmp_path):
    run_file = tmp_path / "my_run.yaml"
    run_file.write_text("run: tas_day\n")
    record_run(MINE, [run_file], {"width": 1280}, directory=tmp_path)
    config = json.loads(json.dumps(DEMO))  # what config/config.yaml alone gives
    [note] = report_config(config, [], {}, directory=tmp_path)
    assert config == MINE
    assert note == (f"note: no run file given: reporting the last run made here, 'tas_day' "
                    f"(--configfile {run_file} --config width=...), with the settings it "
                    "ran with; for another run give its --configfile")
    # No run recorded here: the config stays the demo's, nothing said.
    config = dict(DEMO)
    assert report_config(config, [], {}, directory=tmp_path / "none") == [] and config == DEMO


def test_report_with_other_settings_than_the_run_had_warns(tmp_path):
    record_run(MINE, ["/home/u/my_run.yaml"], directory=tmp_path)
    record_run(DEMO, [], directory=tmp_path)  # the demo ran after it
    assert read_record(tmp_path / LAST)["run"] == "demo"
    # The same settings (a nested key left to its default): nothing to say.
    same = {"run": "tas_day", "width": 1280, "map": {"projection": "Robinson"}}
    assert report_config(same, ["/home/u/my_run.yaml"], {}, directory=tmp_path) == []
    other = {"run": "tas_day", "width": 800, "map": {"projection": "Mollweide"}}
    [warning] = report_config(other, ["/home/u/other.yaml"], {}, directory=tmp_path)
    assert warning == ("warning: run 'tas_day' last ran with other settings than these "
                       "(map, width differ): its report would describe settings its files "
                       "were not made with; give the run's own settings: --configfile "
                       "/home/u/my_run.yaml")
    assert other["width"] == 800  # a run file given is never replaced


def test_reporting_only():
    assert reporting_only(["snakemake", "--report", "r.html"])
    assert reporting_only(["snakemake", "--report=r.html", "--configfile", "x.yaml"])
    assert not reporting_only(["snakemake", "--report", "r.html", "--report-after-run"])
    assert not reporting_only(["snakemake", "--cores", "2"])


def test_status_without_a_run_name_is_the_last_runs(tmp_path, capsys):
    record_run(MINE, [], directory=tmp_path / ".snakemake" / "ncreel" / "runs")
    assert ncreel_main(["status", "--workdir", str(tmp_path)]) == 1  # no plan yet
    err = capsys.readouterr().err
    assert f"the last run made in {tmp_path}: tas_day" in err
    assert "run 'tas_day' has no shard plan yet" in err


def test_a_runs_record_names_the_software_it_ran_with(tmp_path):
    """The commit (whose envs/lock/ rebuilds the environment) and every package version."""
    import subprocess
    from importlib.metadata import version

    from conftest import ROOT

    path = record_run({"run": "demo", "variable": "tas"}, [], None, directory=tmp_path)
    sw = read_record(path)["software"]
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    assert sw["commit"] == (head.stdout.strip() if head.returncode == 0 else None)
    assert sw["packages"]["snakemake"] == version("snakemake")
    assert sw["packages"]["numpy"] == version("numpy")
    import ncreel

    assert sw["ncreel"] == ncreel.__version__


def test_a_copy_without_git_records_no_commit(tmp_path, monkeypatch):
    import shutil

    import ncreel
    from conftest import ROOT

    copy = tmp_path / "copy"  # a checkout's files without .git
    (copy / "workflow").mkdir(parents=True)
    shutil.copy(ROOT / "Snakefile", copy / "Snakefile")
    shutil.copytree(ROOT / "workflow" / "ncreel", copy / "workflow" / "ncreel")
    monkeypatch.setattr(ncreel, "__file__", str(copy / "workflow" / "ncreel" / "__init__.py"))
    from ncreel.run.software import software

    sw = software()
    assert sw["commit"] is None and sw["local_changes"] is None and sw["packages"]


def test_a_report_without_the_runs_config_values_warns_naming_each(tmp_path):
    # The run: a run file plus --config width=320 height=200 dpi=50 preset=ultrafast. Its
    # report with the run file alone takes the defaults of those four keys.
    ran = {"run": "dm", "input": "in.nc", "width": 320, "height": 200, "dpi": 50,
           "preset": "ultrafast"}
    record_run(ran, ["/home/u/dm.yaml"], {"width": 320}, directory=tmp_path)
    [warning] = report_config({"run": "dm", "input": "in.nc"}, ["/home/u/dm.yaml"], {},
                              directory=tmp_path)
    assert "(dpi, height, preset, width differ)" in warning, warning
    assert report_config(dict(ran), ["/home/u/dm.yaml"], {"width": 320},
                         directory=tmp_path) == []
