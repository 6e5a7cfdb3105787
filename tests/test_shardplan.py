import pytest
from ncreel.run.shardplan import frame_name, plan_shards


@pytest.mark.parametrize("n_time, per", [(240, 60), (240, 100), (1, 1), (7, 3), (5, 50), (1001, 7)])
def test_shards_cover_every_step_once_in_order(n_time, per):
    shards = plan_shards(n_time, per)
    steps = [t for s in shards for t in range(s.start, s.stop)]
    assert steps == list(range(n_time))
    assert all(1 <= s.n_frames <= per for s in shards)
    assert len(shards) == -(-n_time // per)
    assert max(s.n_frames for s in shards) - min(s.n_frames for s in shards) <= 1
    assert [s.index for s in shards] == list(range(len(shards)))
    assert sorted(s.name for s in shards) == [s.name for s in shards]


def test_balanced_split():
    assert [s.n_frames for s in plan_shards(240, 100)] == [80, 80, 80]


@pytest.mark.parametrize("n_time, per", [(0, 10), (10, 0), (-1, 5)])
def test_bad_arguments(n_time, per):
    with pytest.raises(ValueError):
        plan_shards(n_time, per)


def test_frame_names_sort_in_time_order():
    names = [frame_name(t) for t in (0, 9, 10, 999, 100000)]
    assert names == sorted(names)


def test_plan_cache_reads_calibration_once_per_version(tmp_path):
    import json
    import os

    from ncreel.run.shardplan import ShardPlanCache, plan_shards

    path = tmp_path / "calibration.json"
    base = {"width": 10, "height": 10, "dpi": 10.0, "preset": "ultrafast", "crf": 23,
            "probe_frames": 4, "base_mb": 1.0, "worker_peak_mb": 1.0, "encoder_peak_mb": 1.0,
            "encoder_cpu_s_per_frame": 0.1, "startup_s": 0.1, "seconds_per_frame": 0.1,
            "render_s_per_frame": 0.1, "target_minutes": 1.0, "frames_per_shard": 4,
            "workers": 1}
    path.write_text(json.dumps(base))
    cache = ShardPlanCache()
    plan = cache.plan(path, 10)
    assert plan == {s.name: s for s in plan_shards(10, 4)} and len(plan) == 3
    assert cache.plan(path, 10) is plan  # not rebuilt
    path.write_text(json.dumps({**base, "frames_per_shard": 5}))
    os.utime(path, ns=(1, 1))  # a new version of the file
    assert cache.plan(path, 10) == {s.name: s for s in plan_shards(10, 5)}
    assert [s.n_frames for s in cache.plan(path, 10).values()] == [5, 5]


@pytest.mark.parametrize("per, n_time, cores, workers, expect", [
    (48, 48, 2, 1, 24),     # the 0.25 degree day on 2 cores: 2 shards, not 1
    (48, 48, 1, 1, 48),     # one core: kept
    (48, 48, None, 1, 48),  # a cluster run: kept
    (10, 48, 2, 1, 10),     # already shorter than the cap: kept
    (100, 9, 4, 1, 2),      # 3 steps would give 3 shards on 4 cores: 2 gives 5
    (100, 10, 4, 1, 3),     # 3 gives exactly 4
    (100, 3, 8, 1, 1),      # fewer steps than cores: one step each, never below
    (100, 48, 4, 2, 24),    # 2-thread jobs on 4 cores: 2 at once
    (100, 48, 3, 2, 24),    # 3 cores, 2-thread jobs: 2 shards
])
def test_a_local_run_has_a_shard_per_core(per, n_time, cores, workers, expect):
    from ncreel.run.shardplan import fill_cores

    got = fill_cores(per, n_time, cores, workers)
    assert got == expect
    if cores:
        jobs = -(-cores // workers)
        assert len(plan_shards(n_time, got)) >= min(jobs, n_time)
        # and as few shards as that: one step more falls short
        assert got == per or len(plan_shards(n_time, got)) == jobs \
            or len(plan_shards(n_time, got + 1)) < jobs


def test_fill_cores_refuses_no_steps():
    from ncreel.run.shardplan import fill_cores

    with pytest.raises(ValueError):
        fill_cores(0, 10, 2)
