"""Snakemake adapter: copy the middle frame as the report's preview image."""

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(snakemake.scriptdir).parent))  # noqa: F821

from ncreel.core.io import atomic_path  # noqa: E402
from ncreel.run.jobrecord import record_attempt  # noqa: E402
from ncreel.run.logs import configure  # noqa: E402

configure(snakemake.log[0])  # noqa: F821
record_attempt(snakemake)  # noqa: F821
with atomic_path(snakemake.output[0]) as tmp:  # noqa: F821
    shutil.copyfile(snakemake.params.frame, tmp)  # noqa: F821
