"""ncreel.cluster.schedulers: the scheduler a run submits to is declared, not guessed."""

import pytest
from ncreel.cluster.schedulers import job_scheduler
from ncreel.core.errors import NcreelError


def test_job_scheduler_is_declared_not_guessed():
    assert job_scheduler("slurm") == "slurm" and job_scheduler("pbs-pro") == "pbs"
    assert job_scheduler("cluster-generic") is None
    assert job_scheduler("cluster-generic", "pbs") == "pbs"
    assert job_scheduler(None, "pbs") is None  # a local run submits nothing
    with pytest.raises(NcreelError, match="the pbs-pro executor submits to PBS Pro"):
        job_scheduler("pbs-pro", "slurm")
