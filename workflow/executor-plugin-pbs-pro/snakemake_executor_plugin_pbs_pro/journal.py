"""The journal: which PBS job produces which outputs, kept across runs.

Standard library only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


class Journal:
    """Which PBS job produces which outputs, kept across runs (``journal.jsonl``).

    One JSON line per event: ``{"submit": id, "outputs": [...]}`` when a job is
    submitted, ``{"end": id}`` when this executor saw it end (or gave it up). Entries
    submitted but never ended belong to a run that was killed: :meth:`open_jobs`.
    Snakemake's own record of a job's id cannot serve here: the job's own Snakemake
    process overwrites it (with none) when it starts.
    """

    def __init__(self, path: str | os.PathLike, legacy: list[str | os.PathLike] = ()):
        self.path = Path(path)
        #: Journals of earlier versions (read before `path`, never written).
        self.legacy = [Path(p) for p in legacy]

    def records(self) -> list[dict]:
        """Every event recorded, oldest first (the one place the file is parsed).

        A missing file has none; a line cut short by a kill, or one that is not a JSON
        object, is skipped. The legacy journals come first: a job they name as submitted
        is closed by an ``end`` line in this one.
        """
        lines = []
        for path in (*self.legacy, self.path):
            try:
                lines += path.read_text(encoding="utf-8").splitlines()
            except OSError:
                continue
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def open_jobs(self) -> dict[tuple, str]:
        """Sorted outputs -> PBS id, for every job submitted and never ended."""
        opened: dict[str, tuple] = {}
        for rec in self.records():
            if "submit" in rec:
                opened[rec["submit"]] = tuple(sorted(rec.get("outputs") or []))
            elif "end" in rec:
                opened.pop(rec["end"], None)
        return {outputs: jobid for jobid, outputs in opened.items()}

    def servers(self) -> list[str]:
        """Return the PBS server of every job ever submitted (``123.casper-pbs``: casper-pbs)."""
        found = (str(rec.get("submit") or "").partition(".")[2] for rec in self.records())
        return list(dict.fromkeys(s for s in found if s))

    def write(self, records: list[dict]) -> None:
        """Append `records` (one line each)."""
        if records:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write("".join(json.dumps(r) + "\n" for r in records))


def outputs_of(job) -> tuple:
    """Return the job's output paths, sorted (the key of :class:`Journal`)."""
    return tuple(sorted(str(f) for f in job.output))
