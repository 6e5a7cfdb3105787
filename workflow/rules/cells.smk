# Per-cell table: join the shards' COPY files, write the psql load script, and (when a
# database is configured) load the rows with psycopg. Not in the DAG without `table` in
# config outputs.
from ncreel.pg.load import job_conninfo

DATABASE = config["database"]
LOAD_OUTPUTS = []
CONNINFO = None
if TABLE_ON and (DATABASE["url"] or DATABASE["service"]):
    try:
        # A password in the config is refused (common.smk, check_database): the job's
        # libpq reads it from ~/.pgpass, PGPASSFILE, a service file or PGPASSWORD.
        CONNINFO = job_conninfo(url=DATABASE["url"], service=DATABASE["service"])
    except NcreelError as err:
        fail(err)
    LOAD_OUTPUTS = [f"{OUT}/load.json"]


rule reduce_cells:
    # Join the shards' COPY files in time order into one file (streamed, constant
    # memory) and write the psql script that creates the table and loads it.
    input:
        # cells.layout normalised: the shards' cells and steps files.
        **{
            f"shard_{k}": (
                lambda wc, k=k: [
                    f"{OUT}/cells/{name}_{k}{CELLS['suffix']}" for name in shard_plan()
                ]
            )
            for k in TABLE_FILES
        },
        rows=lambda wc: [
            f"{OUT}/cells/{name}{CELLS['suffix']}" for name in shard_plan()
        ],
    output:
        **TABLE_FILES,
        table=COPY_FILE,
        sql=f"{OUT}/cells.sql",
    log:
        f"{LOGS}/reduce_cells.log",
    benchmark:
        f"{OUT}/benchmarks/reduce_cells.tsv"
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb("reduce_cells"),
        runtime=rule_runtime("reduce_cells"),
    params:
        columns=CELL_COLUMNS,
        # Text from the config or the file, through functions: Snakemake reads `{name}`
        # in a plain string param as a wildcard.
        table=lambda wc: TABLE,
        run=RUN,
        note=lambda wc: CELL_NOTE,
        layout=CELLS["layout"],
    script:
        "../scripts/reduce_cells.py"


rule load_database:
    # COPY the run's rows into PostgreSQL (rerun replaces the run's rows; they appear at
    # once; database.jobs connections load the shard files side by side). Only part of
    # `all` when database.url or database.service is set. The connections are mostly
    # waiting on the server, so threads stay 1.
    input:
        **TABLE_FILES,
        table=COPY_FILE,
        # Only parallel loads read the shard files (one connection streams the joined file).
        rows=lambda wc: (
            [f"{OUT}/cells/{name}{CELLS['suffix']}" for name in shard_plan()]
            if DATABASE["jobs"] > 1
            else []
        ),
    output:
        summary=f"{OUT}/load.json",
    log:
        f"{LOGS}/load_database.log",
    benchmark:
        f"{OUT}/benchmarks/load_database.tsv"
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb("load_database"),
        runtime=rule_runtime("load_database"),
    params:
        conninfo=lambda wc: CONNINFO,
        table=lambda wc: TABLE,
        run=RUN,
        columns=CELL_COLUMNS,
        jobs=DATABASE["jobs"],
        layout=CELLS["layout"],
    script:
        "../scripts/load_database.py"


# What `all` asks of the table (nothing without `table` in config outputs).
TABLE_OUTPUTS = [COPY_FILE, f"{OUT}/cells.sql", *LOAD_OUTPUTS] if TABLE_ON else []
