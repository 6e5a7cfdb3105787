"""Run ONE sub-job of a PBS job array: the manifest entry of its own ``PBS_ARRAY_INDEX``.

``python -m snakemake_executor_plugin_pbs_pro.subjob MANIFEST`` is the script of every
sub-job of an array the executor submits. Nothing on the command line chooses the entry:
the index comes from PBS (``PBS_ARRAY_INDEX``) and must agree with the sub-job's own id
(``PBS_JOBID`` = ``<n>[<index>].<server>``). The entry's ``index`` must equal it and its
jobscript must still have the SHA-256 recorded at submission; otherwise the sub-job
refuses to run (exit status 2) and is reported failed. The jobscript's exit status is
recorded like a plain job's (:func:`.state.write_marker`), so a sub-job purged from
``qstat`` is still decided by it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from snakemake_executor_plugin_pbs_pro.state import write_marker

#: Exit status of a sub-job that refused to run.
REFUSED = 2


class Refused(RuntimeError):
    """The sub-job's environment or manifest does not identify exactly one entry."""


def own_entry(manifest: str | os.PathLike, env=None) -> dict:
    """Return the manifest entry of this sub-job (see the module docstring).

    Raises
    ------
    Refused
        If ``PBS_ARRAY_INDEX`` is missing or disagrees with ``PBS_JOBID``, the manifest
        has no entry of that index, or the entry's jobscript changed since submission.
    """
    env = os.environ if env is None else env
    index, jobid = env.get("PBS_ARRAY_INDEX", ""), env.get("PBS_JOBID", "")
    if not re.fullmatch(r"\d+", index):
        raise Refused(f"PBS_ARRAY_INDEX is {index!r}: not a sub-job of a job array")
    m = re.match(r"^\d+\[(\d+)\]", jobid)
    if not m or m.group(1) != index:
        raise Refused(f"PBS_JOBID {jobid!r} is not sub-job {index} of an array")
    entries = json.loads(Path(manifest).read_text())["jobs"]
    i = int(index)
    if i >= len(entries) or entries[i].get("index") != i:
        raise Refused(f"{manifest} has no entry {i}")
    entry = entries[i]
    digest = hashlib.sha256(Path(entry["jobscript"]).read_bytes()).hexdigest()
    if digest != entry["sha256"]:
        raise Refused(f"{entry['jobscript']} changed since it was submitted")
    return entry


def main(argv: list[str] | None = None) -> int:
    """Run this sub-job's own Snakemake job; return its exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m snakemake_executor_plugin_pbs_pro.subjob MANIFEST",
              file=sys.stderr)
        return REFUSED
    manifest = Path(argv[0])
    # The manifest lives in <workdir>/.snakemake/pbs-pro/arrays/.
    state_dir = manifest.resolve().parent.parent
    jobid = os.environ.get("PBS_JOBID", "")
    try:
        entry = own_entry(manifest)
    except (Refused, OSError, ValueError, KeyError) as err:
        print(f"pbs-pro: refusing to run: {err}", file=sys.stderr)
        if jobid:
            write_marker(jobid, REFUSED, state_dir)
        return REFUSED
    print(f"pbs-pro: sub-job {jobid} runs Snakemake job {entry['jobid']} "
          f"({entry['rule']} {json.dumps(entry['wildcards'])})", flush=True)
    status = subprocess.call(["/bin/sh", entry["jobscript"]])
    write_marker(jobid, status, state_dir)
    return status


if __name__ == "__main__":
    sys.exit(main())
