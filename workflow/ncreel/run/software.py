"""What a run ran with: ncreel's version and commit, Python, every installed package.

Recorded with each run (:func:`ncreel.run.lastrun.record_run`) and shown on its report's
summary page, so that the environment of an old run can be rebuilt: a checkout's commit
names its lock files (``envs/lock/``), and ``git checkout COMMIT && make venv`` installs
them (docs/install.md).
"""

from __future__ import annotations

from pathlib import Path


def software() -> dict:
    """Return what a run ran with, so that its environment can be rebuilt.

    Returns
    -------
    dict
        ``ncreel`` (version), ``commit`` (the git commit of the checkout ncreel runs
        from, None when it is not a git checkout), ``local_changes`` (whether tracked
        files differ from that commit; None without git), ``python`` (version) and
        ``packages`` (``{distribution: version}`` of everything installed). A checkout's
        commit names its lock files (``envs/lock/``): ``git checkout COMMIT && make venv``
        rebuilds the environment (docs/install.md).
    """
    import platform
    import subprocess
    from importlib.metadata import distributions

    import ncreel

    root = Path(ncreel.__file__).resolve().parents[2]  # <checkout>/workflow/ncreel
    commit = changes = None
    if (root / "Snakefile").is_file():
        def git(*args: str) -> str | None:
            try:
                proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                      text=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                return None
            return proc.stdout.strip() if proc.returncode == 0 else None

        top = git("rev-parse", "--show-toplevel")
        if top and Path(top).resolve() == root:
            commit = git("rev-parse", "HEAD")
            status = git("status", "--porcelain", "--untracked-files=no")
            changes = None if status is None else bool(status)
    packages = {d.metadata["Name"]: d.version for d in distributions() if d.metadata["Name"]}
    return {"ncreel": ncreel.__version__, "commit": commit, "local_changes": changes,
            "python": platform.python_version(), "packages": dict(sorted(packages.items()))}
