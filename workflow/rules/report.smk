# The report's resources page (declared vs measured per job) and contact sheet + run plan.
# Both run after every job they describe has finished: a job's benchmark file and its
# attempts record are complete once its outputs exist. They only read small files and draw
# one figure, so under a scheduler they run where Snakemake runs instead of waiting in a queue
# (`localrule: True` in each: the `localrules:` directive would miss them under a module's
# rule prefix, `use rule * from ncreel as ncreel_*`).


rule resources_report:
    # Runs after the final outputs exist, so every job above has written its benchmark.
    input:
        # config outputs: the movie and its poster, the table
        **({"movie": MOVIE, "poster": PREVIEW} if MOVIE_ON else {}),
        **({"copy_file": COPY_FILE, "sql": f"{OUT}/cells.sql"} if TABLE_ON else {}),
        load=LOAD_OUTPUTS,
        calibration=rules.calibrate_render.output.calibration,
        stats=rules.statistics.output.stats,
        # Through the plan (an input function), so that the DAG re-evaluates this job after
        # the checkpoint like every other job that depends on the plan: each shard's
        # last output (segment, else rows).
        shards=lambda wc: [
            (
                f"{OUT}/segments/{name}.mp4"
                if MOVIE_ON
                else f"{OUT}/cells/{name}{CELLS['suffix']}"
            )
            for name in shard_plan()
        ],
    output:
        figure=report(
            f"{OUT}/report/resources.png",
            caption="../report/resources.rst",
            category="Resources",
            subcategory="Per job",
        ),
        page=report(
            f"{OUT}/report/resources.html",
            caption="../report/resources.rst",
            category="Resources",
            subcategory="Per job",
        ),
        table=report(
            f"{OUT}/report/resources.csv",
            caption="../report/resources.rst",
            category="Resources",
            subcategory="Per job",
        ),
        summary=report(
            f"{OUT}/report/summary.html",
            caption="../report/summary.rst",
            category="Movie",
        ),
    log:
        f"{LOGS}/resources_report.log",
    localrule: True
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb("resources_report"),
        runtime=rule_runtime("resources_report"),
    params:
        jobs=lambda wc: report_jobs(),
        run=RUN,
        # File and config text through functions (braces are not wildcards).
        variable=lambda wc: config["variable"],
        inputs=lambda wc: INPUTS,
        fps=config["fps"],
        shards=lambda wc: len(shard_plan()),
    script:
        "../scripts/resources_report.py"


rule contact_sheet:
    # The contact sheet of kept frames (a run with a movie) and the run-plan page.
    input:
        frames=lambda wc: (
            [f"{OUT}/frames/{name}" for name in shard_plan()] if MOVIE_ON else []
        ),
        # a run without a movie: its plan is known once its shards have run
        rows=lambda wc: (
            []
            if MOVIE_ON
            else [f"{OUT}/cells/{name}{CELLS['suffix']}" for name in shard_plan()]
        ),
        stats=rules.statistics.output.stats,
        calibration=rules.calibrate_render.output.calibration,
    output:
        **(
            {
                "sheet": report(
                    f"{OUT}/report/contact_sheet.png",
                    caption="../report/contact_sheet.rst",
                    category="Frames",
                    subcategory="Contact sheet",
                )
            }
            if MOVIE_ON
            else {}
        ),
        plan=report(
            f"{OUT}/report/plan.html",
            caption="../report/plan.rst",
            category="Frames",
            subcategory="Run plan",
        ),
    log:
        f"{LOGS}/contact_sheet.log",
    benchmark:
        f"{OUT}/benchmarks/contact_sheet.tsv"
    localrule: True
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb("contact_sheet"),
        runtime=rule_runtime("contact_sheet"),
    params:
        series=SERIES,
        vmin=config["vmin"],
        vmax=config["vmax"],
        shards=lambda wc: [
            {"shard": n, "start": s.start, "stop": s.stop, "frames": s.n_frames}
            for n, s in shard_plan().items()
        ],
        shard_logs=lambda wc: shard_attempt_logs(),
        run=RUN,
    script:
        "../scripts/contact_sheet.py"
