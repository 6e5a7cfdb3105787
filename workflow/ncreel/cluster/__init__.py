"""Code that runs on a login node or inside a batch job's wrapper: PBS Pro, Slurm, run lock.

Owns: :mod:`.pbs` (the login-node checks and the deleting of a killed run's jobs, through
the PBS Pro executor plugin's standard-library modules, and the legacy cluster-generic
helper ``workflow/scripts/ncreel_pbs.py``, whose status also reads Slurm's Torque ``qsub``
wrappers' jobs via ``sacct``), :mod:`.slurm` (checks of the
Slurm environment), :mod:`.schedulers` (which scheduler a run submits to),
:mod:`.runlock` (resuming a killed run), :mod:`.secrets` (a ``PGPASSWORD`` kept out
of the jobs' environment), :mod:`.runstatus` (``python -m
ncreel.cluster.runstatus``: which shards are done), :mod:`.runwatch` (the controller's
progress line, from the same files) and :mod:`.commands` (a scheduler command's output).
Cancelling a dead run's jobs is in each scheduler's module.

May import: the Python standard library only, plus the standard-library-only modules
of :mod:`ncreel.core`, :mod:`ncreel.config.settings`, :mod:`ncreel.run` (the shard plan,
job records, progress) and those of ``snakemake_executor_plugin_pbs_pro`` (all but its
``executor``). These modules run
under whatever ``python3`` a login node or compute node has, without the project's
environment; ``tests/test_cluster_stdlib.py`` imports them under ``python3 -I -S``.
"""
