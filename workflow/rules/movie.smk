rule concat_segments:
    # Join the shards' H.264 segments (same codec settings, size and fps) with ffmpeg's
    # concat demuxer and -c copy, from an explicit ordered list, failing if any is
    # missing; +faststart.
    input:
        segments=lambda wc: [f"{OUT}/segments/{name}.mp4" for name in shard_plan()],
    output:
        movie=report(MOVIE, caption="../report/movie.rst", category="Movie"),
    log:
        f"{LOGS}/concat_segments.log",
    benchmark:
        f"{OUT}/benchmarks/concat_segments.tsv"
    conda:
        "../../envs/ffmpeg.yaml"
    threads: 1
    resources:
        mem_mb=rule_mem_mb("concat_segments"),
        runtime=rule_runtime("concat_segments"),
    params:
        segments=lambda wc: [f"{OUT}/segments/{name}.mp4" for name in shard_plan()],
    script:
        "../scripts/concat_segments.py"


rule preview:
    # The middle frame, for the HTML report (its shard always writes it as PNG).
    input:
        frames=lambda wc: f"{OUT}/frames/{mid_shard()}",
    output:
        report(PREVIEW, caption="../report/preview.rst", category="Movie"),
    log:
        f"{LOGS}/preview.log",
    benchmark:
        f"{OUT}/benchmarks/preview.tsv"
    conda:
        "../../envs/ncreel.yaml"
    threads: 1
    resources:
        mem_mb=rule_mem_mb("preview"),
        runtime=rule_runtime("preview"),
    params:
        frame=lambda wc: f"{OUT}/frames/{mid_shard()}/{frame_name(MID_T)}",
    script:
        "../scripts/preview.py"
