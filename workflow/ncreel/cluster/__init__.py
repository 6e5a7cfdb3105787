"""Code that runs on a login node or inside a batch job's wrapper: PBS Pro, Slurm, run lock.

Owns: :mod:`.pbs` (the ``qsub`` line and status parsing used by the PBS executor plugin and
``workflow/scripts/ncreel_pbs.py``), :mod:`.slurm` (checks of the Slurm environment and
cancelling a dead run's jobs), :mod:`.runlock` (resuming a killed run) and
:mod:`.runstatus` (``python -m ncreel.cluster.runstatus``: which shards are done).

May import: the Python standard library only, plus the standard-library-only modules
:mod:`ncreel.errors`, :mod:`ncreel.shards` and :mod:`ncreel.jobrecord`. These modules run
under whatever ``python3`` a login node or compute node has, without the project's
environment; ``tests/test_cluster_stdlib.py`` imports them under ``python3 -I -S``.
"""
