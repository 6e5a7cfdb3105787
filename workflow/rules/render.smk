rule render_shard:
    # One job per shard of consecutive time steps: its PNG frames and its COPY rows.
    # Memory does not grow with the shard's length (streamed blocks); it scales with
    # `attempt` so that a job killed for memory is retried with more.
    input:
        INPUTS,
        stats=rules.statistics.output.stats,
        cell_mean=rules.statistics.output.cell_mean,
    output:
        frames=directory(f"{OUT}/frames/{{shard}}"),
        rows=f"{OUT}/cells/{{shard}}{CELLS['suffix']}",
    params:
        series=SERIES,
        start=lambda wc: SHARDS[wc.shard].start,
        stop=lambda wc: SHARDS[wc.shard].stop,
        render=RENDER,
        cells=CELLS,
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: res.render_mem_mb(width=RENDER["width"], height=RENDER["height"], ny=GRID["ny"], nx=GRID["nx"], attempt=attempt),
        runtime=lambda wc, attempt: res.runtime_minutes(SHARDS[wc.shard].n_frames, 0.5, attempt),
    log:
        f"{LOGS}/render_shard/{{shard}}.log",
    benchmark:
        f"{OUT}/benchmarks/render_shard/{{shard}}.tsv"
    conda:
        "../../envs/ncreel.yaml"
    script:
        "../scripts/render_shard.py"
