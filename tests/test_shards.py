import pytest
from ncreel.shards import frame_name, plan_shards


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
