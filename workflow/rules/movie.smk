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
        attempt=attempt_resource,
        mem_mb=rule_mem_mb("concat_segments"),
        runtime=rule_runtime("concat_segments"),
    params:
        segments=lambda wc: [f"{OUT}/segments/{name}.mp4" for name in shard_plan()],
    script:
        "../scripts/concat_segments.py"


rule movie_format:
    # movie.webm / movie.gif from the joined MP4 (config formats): a job of its own, so a
    # format added to a finished run re-renders nothing.
    input:
        movie=MOVIE,
    output:
        movie=report(
            f"{OUT}/movie.{{fmt}}",
            caption="../report/movie_format.rst",
            category="Movie",
        ),
    log:
        f"{LOGS}/movie_{{fmt}}.log",
    benchmark:
        f"{OUT}/benchmarks/movie_{{fmt}}.tsv"
    wildcard_constraints:
        fmt="webm|gif",
    conda:
        "../../envs/ffmpeg.yaml"
    threads: 2
    resources:
        attempt=attempt_resource,
        mem_mb=rule_mem_mb(
            "movie_format",
            lambda wc, attempt: res.transcode_mem_mb(
                wc.fmt, width=RENDER["width"], height=RENDER["height"], attempt=attempt
            ),
        ),
        runtime=lambda wc, attempt: res.transcode_runtime(
            wc.fmt,
            n_frames=GRID["n_time"],
            width=RENDER["width"],
            height=RENDER["height"],
            attempt=attempt,
        ),
    params:
        # Only this format's settings: changing the GIF's width does not redo the WebM.
        settings=lambda wc: config[wc.fmt],
    script:
        "../scripts/transcode_movie.py"


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
        attempt=attempt_resource,
        mem_mb=rule_mem_mb("preview"),
        runtime=rule_runtime("preview"),
    params:
        frame=lambda wc: f"{OUT}/frames/{mid_shard()}/{frame_name(MID_T)}",
    script:
        "../scripts/preview.py"
