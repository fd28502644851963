"""course_utils.fault_tolerance.resumable: the resumable sampler and the checks of a resumed run's
settings."""

import pytest
import torch

from course_utils.fault_tolerance.resumable import Config, ResumableSampler, train


def test_sampler_is_a_seeded_permutation_that_starts_mid_epoch():
    s = ResumableSampler(10, seed=1)
    s.set_epoch(2)
    full = list(s)
    assert sorted(full) == list(range(10)) and len(s) == 10
    s.set_epoch(2, start=4)
    assert list(s) == full[4:] and len(s) == 6
    s.set_epoch(3)
    assert list(s) != full, "another order each epoch"


def test_sampler_shards_the_same_permutation_between_ranks():
    ranks = [ResumableSampler(11, seed=0, rank=r, world_size=2) for r in (0, 1)]
    for s in ranks:
        s.set_epoch(0)
    a, b = (list(s) for s in ranks)
    assert len(a) == len(b) == 5 and not set(a) & set(b)
    with pytest.raises(ValueError, match=r"rank=2 must be in \[0, world_size=2\)"):
        ResumableSampler(4, rank=2, world_size=2)
    with pytest.raises(ValueError, match=r"start=6 must be in \[0, 5\]"):
        ranks[0].set_epoch(0, start=6)


def test_resume_with_other_settings_is_refused(tmp_path):
    train(Config(ckpt_dir=str(tmp_path), epochs=1, max_steps=3, save_every=3), log=len)
    with pytest.raises(ValueError, match="batch_size: checkpoint 32, now 16.*fresh --ckpt-dir"):
        train(Config(ckpt_dir=str(tmp_path), epochs=1, batch_size=16), log=len)


def test_a_finished_run_resumed_does_no_more_steps(tmp_path):
    cfg = Config(ckpt_dir=str(tmp_path), epochs=1, max_steps=4, threads=1)
    threads = torch.get_num_threads()
    first = train(cfg, log=len)
    lines = []
    assert train(cfg, log=lines.append) == first
    assert not [line for line in lines if line.startswith("step ")]
    assert torch.get_num_threads() == threads, "the caller's thread count is restored"
