"""Snakemake adapter: join the shards' H.264 segments, in time order, into the movie."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.render.movie import concat_segments  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
concat_segments(snakemake.params.segments, snakemake.output.movie)  # noqa: F821
