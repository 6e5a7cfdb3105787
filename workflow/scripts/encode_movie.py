"""Snakemake adapter: encode the ordered frames into the movie with ffmpeg."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.logs import configure  # noqa: E402
from ncreel.movie import encode_movie  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
p = snakemake.params  # noqa: F821
encode_movie(p.frames, snakemake.output.movie, fps=p.fps, crf=p.crf,  # noqa: F821
             preset=p.preset)
