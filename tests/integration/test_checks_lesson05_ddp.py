"""Exercise 05.1 checked for real: the learner's train_ddp under torchrun with 2 gloo ranks."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

from course_utils.grading import run_check


def train_ddp(model, dataset, batch_size, lr, steps):
    dist.init_process_group("gloo")
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    sampler.set_epoch(0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for step, (inputs, targets) in enumerate(loader):
        if step == steps:
            break
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(inputs), targets).backward()
        optimizer.step()
    return model


def same_data_on_every_rank(model, dataset, batch_size, lr, steps):
    dist.init_process_group("gloo")
    sampler = RandomSampler(dataset, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr)
    for step, (inputs, targets) in enumerate(loader):
        if step == steps:
            break
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(inputs), targets).backward()
        optimizer.step()
    return model


def no_ddp_wrap(model, dataset, batch_size, lr, steps):
    dist.init_process_group("gloo")
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step, (inputs, targets) in enumerate(loader):
        if step == steps:
            break
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    return model


def test_the_reference_answer_passes():
    result = run_check("05.1", train_ddp)
    assert result.passed, result.message


def test_every_rank_on_the_same_data_is_caught():
    result = run_check("05.1", same_data_on_every_rank)
    assert result.verdict == "failed" and "its own half of every global batch" in result.message


def test_a_missing_ddp_wrap_is_caught():
    result = run_check("05.1", no_ddp_wrap)
    assert result.verdict == "failed" and "wrap the model in DistributedDataParallel" in (
        result.message
    )


def test_an_error_on_the_ranks_is_reported_with_its_cause():
    def broken(model, dataset, batch_size, lr, steps):
        raise RuntimeError("my loader is missing")

    result = run_check("05.1", broken)
    assert result.verdict == "failed" and "RuntimeError: my loader is missing" in result.message
