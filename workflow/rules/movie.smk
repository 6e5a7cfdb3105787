rule encode_movie:
    # Join the shards' H.264 segments (same codec settings, size and fps) with ffmpeg's
    # concat demuxer and -c copy, from an explicit ordered list, failing if any is
    # missing; +faststart.
    input:
        segments=lambda wc: [f"{OUT}/segments/{name}.mp4" for name in shard_plan()],
    output:
        movie=report(MOVIE, caption="../report/movie.rst", category="Movie"),
    log:
        f"{LOGS}/encode_movie.log",
    benchmark:
        f"{OUT}/benchmarks/encode_movie.tsv"
    conda:
        "../envs/ffmpeg.yaml"
    threads: 1
    resources:
        mem_mb=rule_mem_mb("encode_movie"),
        runtime=rule_runtime("encode_movie"),
    params:
        segments=lambda wc: [f"{OUT}/segments/{name}.mp4" for name in shard_plan()],
    script:
        "../scripts/encode_movie.py"


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
        "../envs/ncreel.yaml"
    threads: 1
    resources:
        mem_mb=rule_mem_mb("preview"),
        runtime=rule_runtime("preview"),
    params:
        frame=lambda wc: f"{OUT}/frames/{mid_shard()}/{frame_name(MID_T)}",
    script:
        "../scripts/preview.py"
