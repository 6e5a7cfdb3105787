"""``python -m ncreel``: the ``ncreel`` command (:mod:`ncreel.cli`)."""

import sys

from ncreel.cli import main

sys.exit(main())
