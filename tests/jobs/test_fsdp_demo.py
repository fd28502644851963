"""course_utils.jobs.fsdp_demo (lesson 05): it shards on the CPU even where a GPU is."""

import torch

from course_utils import distributed
from course_utils.jobs import fsdp_demo


def test_shards_on_a_cpu_mesh_even_where_the_machine_reports_a_gpu(monkeypatch, one_rank_group):
    # FSDP2's default mesh asks for the machine's accelerator; on a GPU node that moved the
    # parameters to cuda:0 while the demo's batches stayed on the CPU (seen on an H200).
    monkeypatch.setattr(torch._C, "_get_accelerator", lambda: torch.device("cuda"))
    fully_shard, _ = distributed.import_fully_shard()
    model = fsdp_demo.build_model()
    fsdp_demo.shard(model, fully_shard, world_size=1)
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert {p.device_mesh.device_type for p in model.parameters()} == {"cpu"}
    if distributed.fsdp2_trains_on_cpu() is None:  # PyTorch 2.6 shards but cannot run it on a CPU
        x, _ = fsdp_demo.batch(0)
        assert model(x).shape == (fsdp_demo.BATCH, fsdp_demo.WIDTH)
