"""Code that runs on a login node or inside a batch job's wrapper: PBS Pro, Slurm, run lock.

Owns: :mod:`.pbs` (the ``qsub`` line, the project account, status parsing, used by the PBS
executor plugin and ``workflow/scripts/ncreel_pbs.py``; also the status of jobs submitted
through Slurm's Torque ``qsub`` wrappers, via ``sacct``), :mod:`.slurm` (checks of the
Slurm environment), :mod:`.schedulers` (which scheduler a run submits to),
:mod:`.runlock` (resuming a killed run), :mod:`.runstatus` (``python -m
ncreel.cluster.runstatus``: which shards are done) and :mod:`.commands` (a scheduler
command's output). Cancelling a dead run's jobs is in each scheduler's module.

May import: the Python standard library only, plus the standard-library-only modules
:mod:`ncreel.errors`, :mod:`ncreel.shardplan` and :mod:`ncreel.jobrecord`. These modules run
under whatever ``python3`` a login node or compute node has, without the project's
environment; ``tests/test_cluster_stdlib.py`` imports them under ``python3 -I -S``.
"""
