rule encode_movie:
    # ffmpeg: H.264, yuv420p, padded to even size, +faststart; frames from an explicit
    # ordered list, failing if any is missing.
    input:
        frames=[f"{OUT}/frames/{name}" for name in SHARDS],
    output:
        movie=report(MOVIE, caption="../report/movie.rst", category="Movie"),
    params:
        frames=all_frames(),
        fps=config["fps"],
        crf=config["crf"],
        preset=config["preset"],
    threads: 2
    resources:
        mem_mb=lambda wc, attempt: 500 * attempt,
        runtime=lambda wc, attempt: res.runtime_minutes(GRID["n_time"], 0.2, attempt),
    log:
        f"{LOGS}/encode_movie.log",
    benchmark:
        f"{OUT}/benchmarks/encode_movie.tsv"
    conda:
        "../../envs/ffmpeg.yaml"
    script:
        "../scripts/encode_movie.py"


rule preview:
    # The middle frame, for the HTML report.
    input:
        frames=f"{OUT}/frames/{MID_SHARD}",
    output:
        report(PREVIEW, caption="../report/preview.rst", category="Movie"),
    params:
        frame=f"{OUT}/frames/{MID_SHARD}/{frame_name(MID_T)}",
    threads: 1
    resources:
        # Under a scheduler the job's memory also counts Snakemake's own job processes
        # (~250 MB): 100 MB was always killed by Slurm/PBS memory enforcement.
        mem_mb=lambda wc, attempt: 400 * attempt,
        runtime=5,
    log:
        f"{LOGS}/preview.log",
    conda:
        "../../envs/ncreel.yaml"
    script:
        "../scripts/preview.py"
