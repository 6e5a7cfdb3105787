rule statistics:
    # Colour limits (2-98 % of all values) and each cell's mean over the whole series,
    # streamed over time blocks, so every shard uses the same colour scale.
    input:
        INPUTS,
    output:
        stats=f"{OUT}/stats.json",
        cell_mean=f"{OUT}/cell_mean.npy",
    log:
        f"{LOGS}/statistics.log",
    benchmark:
        f"{OUT}/benchmarks/statistics.tsv"
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        mem_mb=mem_mb_said(
            "statistics",
            lambda wc, attempt: res.statistics_mem_mb(
                ny=GRID["ny"], nx=GRID["nx"], attempt=attempt
            ),
        ),
        runtime=lambda wc, attempt: res.runtime_minutes(GRID["n_time"], 0.05, attempt),
    params:
        series=SERIES,
        vmin=config["vmin"],
        vmax=config["vmax"],
    script:
        "../scripts/statistics.py"
