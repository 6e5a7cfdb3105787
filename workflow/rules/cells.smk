rule reduce_cells:
    # Join the shards' COPY files in time order into one file (streamed, constant
    # memory) and write the psql script that creates the table and loads it.
    input:
        rows=lambda wc: [f"{OUT}/cells/{name}.copy" for name in shard_plan()],
    output:
        table=f"{OUT}/cells.copy",
        sql=f"{OUT}/cells.sql",
    params:
        series=SERIES,
        table=TABLE,
        run=RUN,
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 300 * attempt,
        runtime=lambda wc, attempt: 30 * attempt,
    log:
        f"{LOGS}/reduce_cells.log",
    benchmark:
        f"{OUT}/benchmarks/reduce_cells.tsv"
    script:
        "../scripts/reduce_cells.py"
