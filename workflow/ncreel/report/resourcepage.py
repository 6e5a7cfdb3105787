"""The report's resources page: declared ``mem_mb``/``runtime`` of every job vs measured.

Declared values come from each job's own record (:mod:`ncreel.run.jobrecord`: the resources
Snakemake evaluated for that attempt); measured ones from Snakemake's ``benchmark:`` file
of the job (``max_rss`` in MB, ``s`` wall seconds), written by the successful attempt.
Headroom is declared / measured: below :data:`TIGHT` the job nearly ran out (memory: it
may be killed next time; runtime: it may hit the walltime). Above :data:`OVER` a job asks a
scheduler for far more than it uses (queue waits, charged hours), but that is flagged only
when the excess matters: at least :data:`OVER_MEM_MB` of memory or :data:`OVER_RUNTIME_MIN`
of walltime. A small job's floor (a few hundred MB, the 5-minute minimum every rule
declares, a site's shortest walltime) is not over-declaration.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ncreel.core.io import atomic_path
from ncreel.run.jobrecord import attempt_count, attempts_path, read_attempts

#: Headroom (declared / measured) below this is flagged as tight (< 10 % headroom).
TIGHT = 1.1
#: Headroom above this is flagged as over-declared, when the excess is also material:
OVER = 4.0
#: at least this much memory declared beyond the measured peak (MB),
OVER_MEM_MB = 1000
#: or at least this much walltime declared beyond the measured wall time (minutes).
OVER_RUNTIME_MIN = 60
#: PNG text key under which the figure stores the numbers it plots (JSON).
PNG_KEY = "ncreel:resources"

COLUMNS = ["rule", "job", "attempts", "failed_attempts", "threads", "mem_mb", "max_rss_mb",
           "mem_headroom", "runtime_min", "wall_s", "runtime_headroom", "jobid", "flags"]


def read_benchmark(path: str | os.PathLike) -> dict | None:
    """Read the last row of a Snakemake benchmark TSV as ``{column: float}``; None if absent.

    Snakemake writes ``s``, ``h:m:s``, ``max_rss``, ``max_vms``, ``max_uss``, ``max_pss``
    (MB), ``io_in``, ``io_out``, ``mean_load``, ``cpu_time``; ``NA`` becomes None.
    """
    try:
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
    except FileNotFoundError:
        return None
    if not rows:
        return None
    out = {}
    for key, value in rows[-1].items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            out[key] = None if value in ("NA", "", None) else value
    return out


def _ratio(declared, measured):
    if declared is None or not measured:
        return None
    return round(float(declared) / float(measured), 3)


def _flags(name: str, ratio, excess=None, material=None) -> list[str]:
    """Flag text for one resource: `excess` (declared - measured) and its `material` size."""
    if ratio is None:
        return []
    if ratio < TIGHT:
        return [f"{name} headroom < {round((TIGHT - 1) * 100)} %"]
    if ratio > OVER and excess is not None and material is not None and excess >= material:
        unit = "MB" if name == "mem" else "min"
        return [f"{name} > {OVER:g}x used ({excess:.0f} {unit} unused)"]
    return []


def collect_jobs(jobs: Iterable[Mapping]) -> list[dict]:
    """One row per job: declared and measured memory and time, attempts, flags.

    Parameters
    ----------
    jobs : iterable of mapping
        ``rule``, ``job`` (display name, e.g. the shard), ``benchmark`` (TSV path) and
        ``log`` (the job's ``log:`` file; its attempts record sits next to it).

    Returns
    -------
    list of dict
        One per job that has run (has an attempts record or a benchmark file), with the
        keys of :data:`COLUMNS` plus ``attempt_records`` (the attempts, oldest first, from
        :func:`ncreel.run.jobrecord.read_attempts`). ``mem_mb``/``runtime_min``/``threads``
        are those of the newest attempt; ``max_rss_mb`` and ``wall_s`` from the benchmark
        (None when the job has not finished; ``max_rss_mb`` None, and a flag, when the
        benchmark recorded 0 MB: the job ended before Snakemake's first memory sample).
    """
    rows = []
    for job in jobs:
        attempts = read_attempts(attempts_path(job["log"]))
        bench = read_benchmark(job["benchmark"]) if job.get("benchmark") else None
        if not attempts and bench is None:
            continue  # not part of this run's configuration (or not started)
        last = attempts[-1] if attempts else {}
        mem_mb, runtime = last.get("mem_mb"), last.get("runtime")
        rss = bench.get("max_rss") if bench else None
        # Snakemake samples a job's memory every few seconds: a job that ended before the
        # first sample records 0 MB, which is "not measured", not "used nothing".
        unsampled = bench is not None and not rss
        rss = None if unsampled else rss
        wall = bench.get("s") if bench else None
        mem_ratio = _ratio(mem_mb, rss)
        time_ratio = _ratio(runtime * 60 if runtime is not None else None, wall)
        rows.append({
            "rule": job["rule"], "job": job["job"], "attempts": attempt_count(attempts),
            # Every attempt before the newest failed, recorded or not (killed before its
            # script started).
            "failed_attempts": attempt_count(attempts) - int(
                bool(attempts) and last["status"] not in ("failed", "killed")),
            "threads": last.get("threads"), "mem_mb": mem_mb, "max_rss_mb": rss,
            "mem_headroom": mem_ratio, "runtime_min": runtime,
            "wall_s": None if wall is None else round(wall, 2),
            "runtime_headroom": time_ratio, "jobid": last.get("jobid"),
            "flags": "; ".join(
                (["max_rss not sampled (the job ended first)"] if unsampled else [])
                + _flags("mem", mem_ratio, None if rss is None or mem_mb is None
                         else mem_mb - rss, OVER_MEM_MB)
                + _flags("time", time_ratio, None if wall is None or runtime is None
                         else runtime - wall / 60, OVER_RUNTIME_MIN)),
            "attempt_records": attempts,
        })
    return rows


def write_csv(rows: list[dict], path: str | os.PathLike) -> None:
    """Write the rows' :data:`COLUMNS` as CSV."""
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r[k] is None else r[k] for k in COLUMNS})


def plot_resources(rows: list[dict], path: str | os.PathLike, *, title: str = "") -> None:
    """Draw declared vs measured memory and time per job, grouped by rule, as a PNG.

    Left panel: ``mem_mb`` declared (outlined bar) and ``max_rss`` measured (filled), MB;
    right panel: ``runtime`` declared and wall time measured, minutes. Jobs are grouped by
    rule (one colour per rule); a job that needed more than one attempt is labelled
    ``attempt N`` and its earlier attempts' declared ``mem_mb`` drawn as ``x`` marks.
    Flagged jobs get their flag text on the right. The plotted numbers are stored as JSON
    in the PNG's text chunk :data:`PNG_KEY`.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: (_rule_order(rows, r["rule"]), str(r["job"])))
    n = max(len(rows), 1)
    fig, (ax_m, ax_t) = plt.subplots(1, 2, figsize=(12, 1.6 + 0.32 * n), sharey=True,
                                     layout="constrained")
    rules = list(dict.fromkeys(r["rule"] for r in rows))
    colours = {rule: plt.get_cmap("tab10")(i % 10) for i, rule in enumerate(rules)}
    ys = list(range(len(rows)))[::-1]
    labels = [f"{r['rule']} {r['job']}" if r["job"] != r["rule"] else r["rule"] for r in rows]
    for y, r in zip(ys, rows, strict=True):
        c = colours[r["rule"]]
        for ax, declared, measured in ((ax_m, r["mem_mb"], r["max_rss_mb"]),
                                       (ax_t, r["runtime_min"],
                                        None if r["wall_s"] is None else r["wall_s"] / 60)):
            if declared is not None:
                ax.barh(y, declared, height=0.8, facecolor="none", edgecolor=c, linewidth=1.5)
            if measured is not None:
                ax.barh(y, measured, height=0.5, color=c)
        for a in r["attempt_records"][:-1]:
            if a.get("mem_mb") is not None:
                ax_m.plot(a["mem_mb"], y, "x", color="black", markersize=7)
        notes = []
        if r["attempts"] > 1:
            notes.append(f"attempt {r['attempts']}")
        if r["flags"]:
            notes.append(r["flags"])
        if notes:
            ax_t.annotate(", ".join(notes), (1.01, y), xycoords=("axes fraction", "data"),
                          va="center", fontsize=8,
                          color="crimson" if r["flags"] else "black")
    ax_m.set_yticks(ys, labels, fontsize=8)
    ax_m.set_xlabel("memory [MB]\noutline: declared mem_mb, filled: measured max_rss")
    ax_t.set_xlabel("time [min]\noutline: declared runtime, filled: measured wall time")
    for ax in (ax_m, ax_t):
        ax.grid(axis="x", alpha=0.3)
        ax.set_xlim(left=0)
    if any(r["attempts"] > 1 for r in rows):
        ax_m.plot([], [], "x", color="black", label="earlier attempts' mem_mb")
        ax_m.legend(loc="lower right", fontsize=8)
    fig.suptitle(title or "declared vs measured resources per job")
    data = [{k: r[k] for k in COLUMNS} for r in rows]
    with atomic_path(path) as tmp:  # a killed job leaves no half-written figure
        fig.savefig(tmp, dpi=90, format="png", metadata={PNG_KEY: json.dumps(data)})
    plt.close(fig)


def _rule_order(rows, rule):
    return next(i for i, r in enumerate(rows) if r["rule"] == rule)


def write_page(rows: list[dict], figure: str | os.PathLike, path: str | os.PathLike, *,
               title: str) -> None:
    """Write the resources page: the figure (embedded) and the table with flags, as HTML."""
    png = base64.b64encode(Path(figure).read_bytes()).decode()
    out = io.StringIO()
    out.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
              "</title><style>body{font-family:sans-serif;font-size:13px}"
              "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
              "text-align:right}td.l,th{text-align:left}td.f{white-space:nowrap}"
              "tr.flag td{background:#fde2e2}"
              "</style></head><body>")
    out.write(f"<h2>{html.escape(title)}</h2>")
    out.write(f"<img alt='resources' style='max-width:100%' src='data:image/png;base64,{png}'>")
    out.write(f"<p>Headroom = declared / measured. Flagged: below {TIGHT:g} (less than "
              f"{round((TIGHT - 1) * 100)} % headroom: the job may run out next time), or "
              f"above {OVER:g} with at least {OVER_MEM_MB} MB or {OVER_RUNTIME_MIN} min "
              "unused (over-declared: longer queue waits, more charged hours). Small jobs "
              "declare a floor (a few hundred MB, 5 minutes) that is not flagged. "
              "Declared values are what each attempt ran under (its "
              "<code>logs/&lt;run&gt;/…log.attempts.jsonl</code>), measured ones are "
              "Snakemake's benchmark files. Under a scheduler <code>process_shard</code> "
              "declares 300 MB more for Snakemake's job processes, which "
              "<code>max_rss</code> does not see.</p><table><tr>")
    out.write("".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS) + "</tr>")
    for r in rows:
        out.write(f"<tr class='{'flag' if r['flags'] else ''}'>")
        for c in COLUMNS:
            v = r[c]
            cls = {"rule": " class='l'", "job": " class='l'", "jobid": " class='l'",
                   "flags": " class='l f'"}.get(c, "")
            text = "<br>".join(html.escape(t) for t in ("" if v is None else str(v)).split("; "))
            out.write(f"<td{cls}>{text}</td>")
        out.write("</tr>")
    out.write("</table></body></html>\n")
    with atomic_path(path) as tmp:
        tmp.write_text(out.getvalue())


def resources_report(jobs: Iterable[Mapping], *, figure: str | os.PathLike,
                     table: str | os.PathLike, page: str | os.PathLike,
                     title: str = "") -> list[dict]:
    """Collect every job's numbers and write the figure (PNG), table (CSV) and page (HTML).

    Returns
    -------
    list of dict
        The rows of :func:`collect_jobs`.
    """
    rows = collect_jobs(jobs)
    plot_resources(rows, figure, title=title)
    write_csv(rows, table)
    write_page(rows, figure, page, title=title or "resources")
    return rows
