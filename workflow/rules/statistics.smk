# The panels of a layout (none without `panels:`).
PANELS = RENDER["panels"]["panels"] if "panels" in RENDER else []
# The largest grid whose per-cell sums the statistics job holds: the table's or a panel's.
STATS_GRID = max(
    [TABLE_GRID, *({"ny": p["shape"][0], "nx": p["shape"][1]} for p in PANELS)],
    key=lambda g: g["ny"] * g["nx"],
)


rule statistics:
    # Colour limits (2-98 % of all values) and each cell's mean over the steps shown,
    # streamed over time blocks, so every shard uses the same colour scale. Only what
    # config outputs need: no colour limits without a movie, no cell_mean.npy (the
    # table's anomaly) without a table.
    input:
        RULE_INPUTS,
    output:
        **({"cell_mean": f"{OUT}/cell_mean.npy"} if TABLE_ON else {}),
        stats=f"{OUT}/stats.json",
    log:
        f"{LOGS}/statistics.log",
    benchmark:
        f"{OUT}/benchmarks/statistics.tsv"
    conda:
        "../../envs/ncreel.yaml"
    # worker processes, each reading a contiguous part of the series
    threads: config["statistics_processes"]
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb(
            "statistics",
            lambda wc, threads, attempt: res.statistics_mem_mb(
                ny=STATS_GRID["ny"],
                nx=STATS_GRID["nx"],
                attempt=attempt,
                chunk_mb=CHUNK_MB["statistics"],
                workers=threads,
            ),
        ),
        runtime=lambda wc, attempt: res.series_pass_runtime(GRID["n_time"], attempt),
    params:
        # each panel's colour limits (only with panels: other runs' params stay as they were)
        **({"panels": RENDER["panels"]} if PANELS else {}),
        # what config outputs need: colour limits (movie), cell means (table)
        **OUTPUTS_PARAM,
        series=SERIES,
        # Size and modification time of each input: a replaced file reruns the run from
        # here even when its time stamp is older (jobs check the full identity, see
        # ncreel.input.identity).
        # (through a function: Snakemake reads `{name}` in a plain string param as a wildcard)
        inputs=lambda wc: INPUT_STAMPS,
        vmin=config["vmin"],
        vmax=config["vmax"],
        # contour levels and vector scale, fixed for the whole movie
        overlays={"contours": CONTOURS, "vectors": VECTORS},
    script:
        "../scripts/statistics.py"
