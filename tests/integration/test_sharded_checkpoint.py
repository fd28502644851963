"""DCP: a model sharded over 2 CPU ranks (gloo) is saved by both and loaded by one process."""

import torch

from course_utils.distributed import import_fully_shard
from course_utils.fault_tolerance.sharded_checkpoint import (
    load_unsharded,
    save_sharded,
    shard_layout,
)
from course_utils.models import TinyNet, parameter_hash


def test_save_with_two_ranks_load_with_one(tmp_path, recwarn):
    folder = save_sharded(tmp_path / "dcp", world_size=2, seed=3)
    names = sorted(p.name for p in folder.iterdir())
    assert names == [".metadata", "__0_0.distcp", "__1_0.distcp"], "one file per rank"
    layout = shard_layout(folder)
    if import_fully_shard()[0] is not None:  # FSDP2 splits dim 0: two chunks of 16 rows of 32x3072
        assert layout["model.1.weight"] == [((0, 0), (16, 3072)), ((16, 0), (16, 3072))]
    else:  # replicated with DDP: DCP stores one copy
        assert layout["model.1.weight"] == [((0, 0), (32, 3072))]
    torch.manual_seed(3)
    want = parameter_hash(TinyNet())
    torch.manual_seed(99)
    got = load_unsharded(folder, TinyNet())
    assert parameter_hash(got) == want, "the resharded model equals the one the ranks built"
    assert not [w for w in recwarn if "single process" in str(w.message)]
