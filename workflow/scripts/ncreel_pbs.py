#!/usr/bin/env python3
"""PBS submit/status helper for the cheyenne, derecho and casper profiles.

For Snakemake's cluster-generic executor (the profiles use ``--executor pbs-pro``). Runs
``ncreel.cluster.pbs`` from this checkout (standard library only, so any ``python3``
works, with or without the workflow's environment):

    python3 workflow/scripts/ncreel_pbs.py submit --queue casper JOBSCRIPT
    python3 workflow/scripts/ncreel_pbs.py status JOBID
"""

import sys
from pathlib import Path

# ncreel, and the PBS Pro executor plugin it uses (standard-library modules only).
_WORKFLOW = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_WORKFLOW), str(_WORKFLOW / "executor-plugin-pbs-pro")]

from ncreel.cluster.pbs import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
