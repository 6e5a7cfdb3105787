"""The Derecho quickstart (docs/clusters/derecho.md), followed as written, on a REAL PBS Pro.

The page's ``bash`` blocks are read from the page itself, so the page and this test cannot
drift, and run in order in a fresh home directory, with only these substitutions (what a
reader replaces, or what exists only at NCAR):

- ``NCREEL_REPOSITORY_URL`` -> this repository (git clone of its committed HEAD);
- the project code ``P12345678`` -> ``ncreel`` (an account the test server accepts);
- ``/glade/derecho/scratch`` -> a ``glade/derecho/scratch`` directory under the test's
  temporary directory;
- ``ssh derecho.hpc.ucar.edu`` is dropped (the test is on the "login node") and NCAR's
  ``module``/``conda`` commands, which provide a Python, are no-ops: the test's Python is
  first on PATH, with PBS Pro's commands;
- ``make venv`` -> a virtualenv holding the clone's ncreel over the test virtualenv's
  packages, with the ``snakemake`` and ``ncreel`` commands (``make venv`` itself, without
  root, is what the fresh-root CI job tests; here it would download for minutes);
- ``tail -f`` -> ``tail -n 5`` (it would never end); ``scp`` to "your computer" and the
  tmux alternative B of step 5 are left out.

Step 5A submits the controller as a PBS batch job (``profiles/derecho/controller.pbs``, the
``develop`` queue) that runs the run through ``--profile profiles/derecho`` (the ``main``
queue, whole nodes); the test waits for it, then a new session runs steps 2, 3, 6 and 8
(every-session set-up, watch, report). The one PBS vnode advertises two Derecho nodes'
worth of cores and memory, so that the controller's core and a whole-node job fit side by
side (MoM still enforces each job's own mem). The report's summary page is opened in
headless Chromium: the movie plays (currentTime > 1 s); a screenshot is taken
(``NCREEL_UPDATE_DOCS=1`` copies it to ``docs/clusters/derecho-report.png``). The same
page shown inside the report (as a reader clicks Movie -> summary.html) is checked too:
Snakemake's report shows it from a data: URL, which Chromium loads only up to 2 MiB, so the
page embeds a smaller copy of a movie that would not fit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from conftest import ROOT
from PIL import Image
from test_pbs import PBS_BIN, frame_count, pbs, wait_finished  # noqa: F401 (pbs: fixture)
from test_report import _report_files, assert_plays_in_chromium
from test_slurm import ROWS, count_rows

pytestmark = [pytest.mark.pbs, pytest.mark.integration]

PAGE = ROOT / "docs" / "clusters" / "derecho.md"
RUN = "demo_derecho"
#: Two Derecho CPU nodes (128 cores, 235 GB usable each): the controller (develop) and a
#: whole-node job (main) at once.
TWO_NODES = {"ncpus": "256", "mem": "480gb"}
SCREENSHOT = ROOT / "docs" / "clusters" / "derecho-report.png"


def page_steps(text: str) -> dict[str, list[str]]:
    """``bash`` blocks of the page by step number (``## 5. ...`` -> ``"5"``), in order."""
    steps: dict[str, list[str]] = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        m = re.match(r"(\d+)\.", section)
        if m:
            steps[m[1]] = re.findall(r"^```bash\n(.*?)^```", section, flags=re.M | re.S)
    return steps


def substitute(block: str, scratch: Path) -> str:
    """A block with the substitutions of the module docstring."""
    lines = [ln for ln in block.splitlines() if not ln.startswith(("ssh ", "scp "))]
    text = "\n".join(lines) + "\n"
    text = text.replace("NCREEL_REPOSITORY_URL", str(ROOT)).replace("P12345678", "ncreel")
    text = text.replace("/glade/derecho/scratch", str(scratch))
    text = re.sub(r"^make venv\b.*$", "make_venv_from_the_tests", text, flags=re.M)
    return text.replace("tail -f ", "tail -n 5 ")


#: What ``make venv`` makes, from the test's packages: .venv/ with the clone's ncreel and
#: its PBS Pro executor plugin first on its path, then the test virtualenv's site-packages.
LIGHT_VENV = r"""
import pathlib, subprocess, sys
clone = pathlib.Path.cwd()
subprocess.run([sys.executable, "-m", "venv", "--without-pip", ".venv"], check=True)
purelib = subprocess.run([".venv/bin/python", "-c", "import sysconfig; "
                          "print(sysconfig.get_path('purelib'))"], check=True,
                         capture_output=True, text=True).stdout.strip()
pathlib.Path(purelib, "ncreel-test.pth").write_text(
    f"import site; site.addsitedir({TEST_SITE!r})\n"
    f"import sys; sys.path.insert(0, {str(clone / 'workflow')!r})\n"
    # The PBS Pro executor plugin is its own distribution in the clone (make venv
    # installs it): Snakemake finds it by its module name on the path.
    f"import sys; sys.path.insert(0, {str(clone / 'workflow' / 'executor-plugin-pbs-pro')!r})\n")
for name, module in (("snakemake", "snakemake.cli"), ("ncreel", "ncreel.cli")):
    exe = clone / ".venv" / "bin" / name
    exe.write_text(f"#!{clone}/.venv/bin/python\nimport sys\nfrom {module} import main\n"
                   "sys.exit(main())\n")
    exe.chmod(0o755)
"""
#: NCAR's environment modules and conda provide Python there; here the test's does.
PREAMBLE = ("set -eo pipefail\nmodule() { :; }\nconda() { :; }\n"
            "make_venv_from_the_tests() {\n"
            f"{sys.executable} - <<'EOF'\nTEST_SITE = {sysconfig.get_path('purelib')!r}\n"
            f"{LIGHT_VENV}\nEOF\n}}\n")


def session(script: str, home: Path, timeout: int) -> str:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PBS_ACCOUNT", "SNAKEMAKE_PBS_PRO_QUEUE", "SNAKEMAKE_PROFILE",
                        "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(home), USER=env.get("USER") or "root",
               PATH=f"{PBS_BIN}:{Path(sys.executable).parent}:{env.get('PATH', '')}")
    proc = subprocess.run(["bash", "-c", PREAMBLE + script], cwd=home, env=env,
                          capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the quickstart failed:\n{script}\n---\n{out[-6000:]}"
    return proc.stdout


@pytest.fixture
def two_derecho_nodes(pbs):  # noqa: F811
    """The one vnode made to advertise :data:`TWO_NODES`; its values come back after."""
    qmgr = str(PBS_BIN / "qmgr")
    doc = json.loads(subprocess.run([str(PBS_BIN / "pbsnodes"), "-av", "-F", "json"],
                                    capture_output=True, text=True, check=True).stdout)
    ((node, rec),) = doc["nodes"].items()
    before = {k: str(rec["resources_available"][k]) for k in TWO_NODES}
    try:
        for key, value in TWO_NODES.items():
            subprocess.run([qmgr, "-c", f"set node {node} resources_available.{key}={value}"],
                           check=True)
        yield node
    finally:
        for key, value in before.items():
            subprocess.run([qmgr, "-c", f"set node {node} resources_available.{key}={value}"],
                           check=True)


def wait_job(jobid: str, timeout: float) -> dict:
    """The finished job's ``qstat -x`` record; deleted if it has not finished in time."""
    try:
        return wait_finished(jobid, timeout=timeout)[jobid]
    except AssertionError:
        subprocess.run([str(PBS_BIN / "qdel"), "-W", "force", jobid], check=False)
        raise


def test_derecho_quickstart_as_written(two_derecho_nodes, tmp_path):
    steps = page_steps(PAGE.read_text())
    assert [len(steps.get(str(n), [])) for n in range(1, 9)] == [1, 1, 1, 2, 2, 1, 0, 2], \
        "the page's steps changed: update this test's reading of them"
    home, scratch = tmp_path / "home", tmp_path / "glade" / "derecho" / "scratch"
    home.mkdir()
    sub = {n: [substitute(b, scratch) for b in blocks] for n, blocks in steps.items()}
    qsub_block, tmux_block = sub["5"]
    assert "qsub" in qsub_block and "tmux new" in tmux_block
    # Steps 1 to 5A in one login session; qsub prints the controller's job id last.
    t0 = time.monotonic()
    out = session("".join([*sub["1"], *sub["2"], *sub["3"], *sub["4"], qsub_block]), home,
                  timeout=180)
    jobid = out.split()[-1]
    assert re.fullmatch(r"\d+\.\S+", jobid), out
    job = wait_job(jobid, timeout=240 - (time.monotonic() - t0))
    clone = home / "ncreel"
    controller_log = clone / f"ncreel-controller.o{jobid.split('.')[0]}"
    log = controller_log.read_text() if controller_log.exists() else "(no output file)"
    assert job["Exit_status"] == 0, log[-4000:]
    assert job["queue"] == "develop" and job["Account_Name"] == "ncreel", job
    # The controller's own output: its shard progress, to the final line.
    done = re.findall(r"^ncreel: shards (\d+)/(\d+) done · .* in all$", log, flags=re.M)
    assert done and done[-1][0] == done[-1][1], log[-3000:]
    # A new session: set-up of step 2 (every session), 3 (RUNS), then 6 (watch), 8 (report).
    watch_report = "".join([*sub["2"], *sub["3"], *sub["6"], sub["8"][0]])
    out = session(watch_report, home, timeout=120)
    assert f"run {RUN}: complete" in out, out
    user = os.environ.get("USER") or "root"
    results = scratch / user / "ncreel-runs" / "results" / RUN
    assert count_rows(results / "cells.copy") == ROWS
    assert frame_count(results / "movie.mp4") == 240
    page = _report_files((results / "report.html").read_text())["summary.html"].decode()
    assert_plays_in_chromium(page, tmp_path)
    shot = _summary_screenshot(page, tmp_path)
    if os.environ.get("NCREEL_UPDATE_DOCS") == "1":
        shutil.copy(shot, SCREENSHOT)
    # Inside the report, Snakemake shows the page from a data: URL, which Chromium does not
    # load beyond 2 MiB (its URL length limit): the page must stay under it.
    from ncreel.report.screenshot import screenshot

    in_report = screenshot(results / "report.html", tmp_path / "in_report.png",
                           result="summary.html", category="Movie")
    data_url_chars = 4 * -(-len(page.encode()) // 3) + 40
    assert data_url_chars <= 2 * 1024 * 1024, len(page.encode())
    assert not _blank(in_report, left=320), "the summary page is blank inside the report"


def _blank(png: Path, left: int = 0) -> bool:
    """Whether a screenshot right of `left` pixels is of one colour."""
    with Image.open(png) as shot:
        area = shot.convert("RGB").crop((left, 0, shot.width, shot.height))
        return len(area.getcolors(1 << 20) or []) <= 1


def _summary_screenshot(page: str, tmp_path: Path) -> Path:
    """The summary page as Chromium shows it a few seconds after it opened, the movie
    playing (muted: Chromium plays nothing else unasked), checked not blank: a frame's
    hundreds of colours."""
    from ncreel.report.screenshot import CHROMIUM_FLAGS, find_chromium

    (tmp_path / "summary.html").write_text(page.replace(
        "<video id='movie' controls", "<video id='movie' controls muted autoplay"))
    png = tmp_path / "summary.png"
    subprocess.run([find_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'shot'}",
                    "--autoplay-policy=no-user-gesture-required",
                    "--window-size=1000,1000", "--virtual-time-budget=4000",
                    f"--screenshot={png}", (tmp_path / "summary.html").as_uri()],
                   check=True, capture_output=True, timeout=120)
    with Image.open(png) as shot:
        assert len(shot.convert("RGB").getcolors(1 << 20) or []) > 200, "a blank page"
    return png
