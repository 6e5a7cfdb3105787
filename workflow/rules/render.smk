checkpoint calibrate_render:
    # Render and encode a few probe frames exactly as a shard job does; record peak memory
    # (process + ffmpeg) and seconds per frame. process_shard's mem_mb and runtime derive
    # from it, and so does frames_per_shard when it is null (then, on a local run, at
    # least one shard per core). A checkpoint, because the number of shards (the DAG)
    # depends on the measured speed; its JSON keeps the plan, so a rerun reuses it.
    # Beside statistics, not after it: the probe frames' colour limits are those of the
    # first steps, computed as statistics computes the movie's (same params).
    input:
        RULE_INPUTS,
    output:
        calibration=f"{OUT}/calibration.json",
    log:
        f"{LOGS}/calibrate_render.log",
    benchmark:
        f"{OUT}/benchmarks/calibrate_render.tsv"
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb(
            "calibrate_render",
            lambda wc, attempt: res.calibrate_mem_mb(
                chunk_mb=CHUNK_MB["calibrate"], attempt=attempt
            ),
        ),
        runtime=rule_runtime("calibrate_render"),
    params:
        # Without a movie the probe writes COPY rows instead of frames (and its cells).
        **OUTPUTS_PARAM,
        # With a movie, what statistics takes its colour limits from (for the probes').
        **(
            {
                "vmin": config["vmin"],
                "vmax": config["vmax"],
                "overlays": {"contours": CONTOURS, "vectors": VECTORS},
                **({"panels": RENDER["panels"]} if PANELS else {}),
            }
            if MOVIE_ON
            else {"cells": CELLS}
        ),
        series=SERIES,
        render=RENDER,
        encode=ENCODE,
        n_time=GRID["n_time"],
        probe_frames=config["calibration_frames"],
        target_minutes=config["target_shard_minutes"],
        frames_per_shard=config["frames_per_shard"],
        workers=RENDER_PROCESSES,
        # A local run: at least a shard per core (a configured frames_per_shard wins).
        # Taking `resources` makes it a derived param, which Snakemake's params rerun
        # trigger leaves out: a run resumed with other --cores keeps its plan, like any
        # rerun (calibration.json keeps it; delete that file to plan again).
        cores=lambda wc, resources: local_cores(),
    script:
        "../scripts/calibrate_render.py"


rule degradation_state:
    # etr_risk with a temperature variable: each cell's degradation time (days at the
    # reference temperature, Arrhenius-corrected) at every shard start, application and
    # the last step, streamed over the whole series once, so shards stay independent.
    input:
        RULE_INPUTS,
        stats=rules.statistics.output.stats,
        calibration=rules.calibrate_render.output.calibration,
    output:
        state=f"{OUT}/degradation_state.npy",
        meta=f"{OUT}/degradation_state.json",
    log:
        f"{LOGS}/degradation_state.log",
    benchmark:
        f"{OUT}/benchmarks/degradation_state.tsv"
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb(
            "degradation_state",
            lambda wc, attempt: res.statistics_mem_mb(
                ny=TABLE_GRID["ny"],
                nx=TABLE_GRID["nx"],
                attempt=attempt,
                chunk_mb=CHUNK_MB["prepass"],
            ),
        ),
        runtime=lambda wc, attempt: res.series_pass_runtime(GRID["n_time"], attempt),
    params:
        series=SERIES,
        cells=CELLS,
        starts=lambda wc: [s.start for s in shard_plan().values()],
    script:
        "../scripts/degradation_state.py"


# etr_risk with a temperature variable: each shard starts from the pre-pass's state.
DEGRADATION_INPUT = (
    {
        "degradation": rules.degradation_state.output.state,
        "degradation_meta": rules.degradation_state.output.meta,
    }
    if needs_prepass(CELLS) and TABLE_ON
    else {}
)


rule process_shard:
    # One job per shard of consecutive time steps: its COPY rows, its H.264 segment and
    # a PNG sample of its frames. `threads` worker processes render contiguous parts;
    # with one, the rows are written in a second thread beside the frames.
    # Memory does not grow with the shard's length (streamed blocks); it comes from the
    # calibration and scales with `attempt` so that a job killed for memory gets more.
    input:
        RULE_INPUTS,
        **DEGRADATION_INPUT,
        **({"cell_mean": f"{OUT}/cell_mean.npy"} if TABLE_ON else {}),
        stats=rules.statistics.output.stats,
        calibration=rules.calibrate_render.output.calibration,
    output:
        # config outputs: the frames and segment (movie), the rows (table)
        **SHARD_TABLE_FILES,
        **(
            {
                "frames": directory(f"{OUT}/frames/{{shard}}"),
                "segment": f"{OUT}/segments/{{shard}}.mp4",
            }
            if MOVIE_ON
            else {}
        ),
        **({"rows": f"{OUT}/cells/{{shard}}{CELLS['suffix']}"} if TABLE_ON else {}),
    log:
        f"{LOGS}/process_shard/{{shard}}.log",
    benchmark:
        f"{OUT}/benchmarks/process_shard/{{shard}}.tsv"
    conda:
        "../../envs/ncreel.yaml"
    # render worker processes; the rows pass alone (no movie) is one process
    threads: RENDER_PROCESSES if MOVIE_ON else 1
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb(
            "process_shard",
            lambda wc, input, threads, attempt: res.render_mem_mb_calibrated(
                Calibration.from_json(input.calibration),
                # the larger of the frames' and the table's grids (cell means, rows)
                ny=max(GRID["ny"], TABLE_GRID["ny"]),
                nx=max(GRID["nx"], TABLE_GRID["nx"]),
                n_frames=plan_shard(wc.shard).n_frames,
                workers=threads,
                attempt=attempt,
                n_columns=len(CELL_COLUMNS),
                # both outputs: rows written beside the frames (one worker)
                overlap=MOVIE_ON and TABLE_ON,
                # the time chunks the rows pass's series holds
                chunk_mb=CHUNK_MB["shard"],
            ),
        ),
        runtime=lambda wc, input, threads, attempt: res.render_runtime_calibrated(
            Calibration.from_json(input.calibration),
            n_frames=plan_shard(wc.shard).n_frames,
            workers=threads,
            attempt=attempt,
        ),
    params:
        series=SERIES,
        start=lambda wc: plan_shard(wc.shard).start,
        stop=lambda wc: plan_shard(wc.shard).stop,
        png_times=lambda wc: shard_pngs(wc.shard),
        render=RENDER,
        encode=ENCODE,
        cells=CELLS,
    script:
        "../scripts/process_shard.py"
