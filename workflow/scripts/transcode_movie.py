"""Snakemake adapter: movie.webm or movie.gif from the joined MP4."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.render.movie import transcode_movie  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
transcode_movie(snakemake.input.movie, snakemake.output.movie,  # noqa: F821
                snakemake.wildcards.fmt, threads=snakemake.threads,  # noqa: F821
                **snakemake.params.settings)  # noqa: F821
