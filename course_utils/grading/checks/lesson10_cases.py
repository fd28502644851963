"""The cases lesson 10's checks bring beside the learner's own runs, the rules of 10.1's ranks
and the judge's own training (lesson10.py uses them; they run in the judge).

    judge_ranks(reports, base, title)     one case of the staging function's real processes
    first_losses(lr, batch, count)        a 1-rank run's first losses, trained by the judge (10.2)
    synthetic_log(rng)                    an NCCL or gloo log of links drawn at random (10.3)
    decide_cases(own, sweep, rng=None)    record sets and deadlines for 10.4
"""

from __future__ import annotations

import copy
import functools
import io
import random
from pathlib import Path

import numpy as np
import torch

from course_utils import models, reference
from course_utils.grading import CheckFailed, expect
from course_utils.lab import cluster, scaling, small_files, transport

# ---- 10.1 ----------------------------------------------------------------------------------


def judge_ranks(reports: list[dict], base: str, title: str) -> None:
    """Every rank returned a folder under `base` ("{node}": the node's number); one rank per
    node read the archive; every rank's copy was whole when it returned; one folder per node.
    Two readers on a node are judged first: ranks that do not wait for each other unpack over
    each other's files, and the missing lock, not the clash it caused, is what to tell."""
    nodes = sorted({r["node"] for r in reports})
    readers = {
        node: [r["who"] for r in reports if r["node"] == node and r.get("read_archive")]
        for node in nodes
    }

    def one_reader(node):
        expect(
            len(readers[node]) == 1,
            f"one rank of {node} reading the archive",
            f"{len(readers[node])} {readers[node]}: the first rank unpacks while the others "
            "wait for it (a lock), then they use its copy",
            title,
        )

    for node in nodes:
        if len(readers[node]) > 1:
            one_reader(node)
    for r in reports:
        if "error" in r:
            raise CheckFailed(f"{title}, {r['who']}: stage_dataset raised {r['error']}")
    for r in reports:
        node_base = Path(base.format(node=r["node"][2:])).resolve()
        what = f"{title}, {r['who']}"
        expect(r["is_dir"], "the folder of the unpacked data set", repr(r["path"]), what)
        inside = Path(r["path"]).resolve().is_relative_to(node_base)
        expect(inside, f"a folder under {node_base}", r["path"], what)
    for node in nodes:
        one_reader(node)
    for r in reports:
        expect(
            r["whole"] == r["expected"],
            f"all {r['expected']} files of the archive, whole, when stage_dataset returned",
            f"{r['whole']}: a rank must wait until the copy is complete",
            f"{title}, {r['who']}",
        )
    folders = {}
    for node in nodes:
        mine = [r for r in reports if r["node"] == node]
        paths = sorted({r["path"] for r in mine})
        expect(len(paths) == 1, f"one folder for all ranks of {node}", paths, title)
        folders[node] = paths[0]
    expect(
        len(set(folders.values())) == len(folders),
        "a folder of its own for each node",
        folders,
        title,
    )


# ---- 10.2 ----------------------------------------------------------------------------------


@functools.cache
def dataset() -> tuple[torch.Tensor, torch.Tensor]:
    """The lab's data set as lab_train reads it (small_files.FolderImages), in file order."""
    files = sorted(small_files.image_files().items())
    pictures = np.stack([np.load(io.BytesIO(data)) for _, data in files])
    labels = [int(name.split("_")[1].split(".")[0]) for name, _ in files]
    return (torch.from_numpy(pictures).float() / 255 - 0.5) / 0.25, torch.tensor(labels)


@functools.cache
def first_losses(lr: float, batch: int, count: int) -> tuple[float, ...]:
    """The first `count` losses of a 1-rank run of lab_train at `lr`, trained here: seed 0, a
    DistributedSampler of one rank (seed 0, epoch 0), SGD with momentum 0.9 written out (as
    torch.optim.SGD computes it: buf = 0.9 buf + grad; p -= lr buf), on one thread."""
    images, labels = dataset()
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(0))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # in a busy kernel, one thread is faster and as exact
    try:
        torch.manual_seed(0)
        model = models.Net()
        momentum = [torch.zeros_like(p) for p in model.parameters()]
        losses = []
        for step in range(count):
            index = order[step * batch : (step + 1) * batch]
            model.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(images[index]), labels[index])
            loss.backward()
            with torch.no_grad():
                for p, buf in zip(model.parameters(), momentum):
                    buf.mul_(0.9).add_(p.grad) if step else buf.copy_(p.grad)
                    p.sub_(lr * buf)
            losses.append(loss.item())
    finally:
        torch.set_num_threads(threads)
    return tuple(losses)


# ---- 10.3 ----------------------------------------------------------------------------------

_VIA = {
    "p2p": ("P2P/CUMEM", "P2P/CUMEM/read", "P2P/IPC/read", "P2P/direct pointer"),
    "shm": ("SHM/direct", "SHM/direct/direct"),
    "ib-gdr": ("NET/IB/0/GDRDMA", "NET/IB/1(3)/GDRDMA", "NET/IBext_v11/0/GDRDMA"),
    "ib": ("NET/IB/0", "NET/IB/1/Shared"),
    "socket": ("NET/Socket/0", "NET/Socket/2"),
    # aws-ofi-nccl (AWS EFA, HPE Slingshot): "Libfabric" from v1.13, "AWS Libfabric" before,
    # as in aws/aws-ofi-nccl#715's log; the plugin's own "NET/OFI ..." lines name no link
    "plugin": (
        "NET/Libfabric/0/GDRDMA",
        "NET/Libfabric/1",
        "NET/AWS Libfabric/1(2)/GDRDMA/Shared",
        "NET/AWS Libfabric/0/GDRDMA",
    ),
}


# Held out: never shown in the notebook. CONSTRUCTED in the format of aws-ofi-nccl up to v1.12,
# whose plugin NCCL names "AWS Libfabric" (a space in it), with the links a job of one rank per
# node prints (no P2P line to fall back on): aws/aws-ofi-nccl#715 posted such lines; Slingshot's
# provider is cxi. Host names and process ids are made up.
HELD_OUT_PLUGIN = """\
x3101c0s1b0n0:18059:18059 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.12.1
x3101c0s1b0n0:18059:18059 [0] NCCL INFO NET/OFI Selected provider is cxi, fabric is cxi (found 4 nics)
x3101c0s1b0n0:18059:18059 [0] NCCL INFO Using network AWS Libfabric
x3101c0s1b0n0:18059:18146 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/1(2)/GDRDMA/Shared
x3101c0s3b0n0:22415:22490 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[0] [receive] via NET/AWS Libfabric/1/GDRDMA/Shared"""  # noqa: E501


def synthetic_log(rng: random.Random) -> str:
    """Channel lines of 1 to 3 kinds in NCCL's format (or gloo's TCP lines), shuffled; a
    plugin's log carries its own "NET/OFI" lines, which name no link."""
    kinds = rng.sample(sorted(_VIA), rng.randint(1, 3))
    if "plugin" in kinds and "socket" in kinds:  # one network per job: NCCL picks one
        kinds.remove("socket")
    lines = []
    for i, kind in enumerate(kinds * 2):
        via = rng.choice(_VIA[kind])
        src, dst = rng.randrange(8), rng.randrange(8)
        if kind in transport.NETWORK_ORDER:
            side = rng.choice(["[send]", "[receive]"])
            lines.append(
                f"h{i}:1:2 [0] NCCL INFO Channel 0{i}/0 : {src}[0] -> {dst}[1] {side} via {via}"
            )
        elif kind == "shm":
            lines.append(f"h{i}:1:2 [0] NCCL INFO Channel 0{i} : {src}[0] -> {dst}[1] via {via}")
        else:
            lines.append(f"h{i}:1:2 [0] NCCL INFO Channel 0{i}/0 : {src}[0] -> {dst}[1] via {via}")
    if "socket" in kinds and rng.random() < 0.5:  # gloo's own lines instead of NCCL's
        lines = [
            transport.GLOO_LINE.format(
                rank=0, peer=1, interface="eth0", local="10.0.0.1:1", remote="10.0.0.2:2"
            )
            if "Socket" in line
            else line
            for line in lines
        ]
    if "plugin" in kinds:
        lines.append("h0:1:1 [0] NCCL INFO NET/OFI Selected provider is cxi, fabric is cxi")
    rng.shuffle(lines)
    return "\n".join(["rank 0/4 joined", *lines])


# ---- 10.4 ----------------------------------------------------------------------------------

SHAPES = {  # efficiencies by run: the cases a table of visible answers cannot know
    "a cliff at 2 nodes": {"1x2": 0.95, "1x4": 0.85, "2x2": 0.4},
    "super-linear at 2 ranks": {"1x2": 1.1, "1x4": 0.7, "2x2": 0.75},
    "every run efficient": {"1x2": 0.98, "1x4": 0.9, "2x2": 0.92},
    "nothing scales": {"1x2": 0.45, "1x4": 0.3, "2x2": 0.2},
}


def with_efficiencies(records: list[dict], efficiencies: dict[str, float]) -> list[dict]:
    """Copies of `records` whose throughputs give these efficiencies (by run name)."""
    base = next(r for r in records if r["configuration"]["ranks"] == 1)["throughput"]
    out = []
    for r in copy.deepcopy(records):
        r["throughput"] = base * r["configuration"]["ranks"] * efficiencies.get(r["name"], 1.0)
        out.append(r)
    return out


def with_losses(sweep: list[dict], losses: list[float]) -> list[dict]:
    """Copies of the sweep's records with these last losses, in learning-rate order."""
    out = sorted(copy.deepcopy(sweep), key=lambda r: r["configuration"]["lr"])
    for r, loss in zip(out, losses):
        r["loss"]["last"] = loss
    return out


def _hours(records: list[dict], name: str) -> float:
    return scaling.WORK / next(r for r in records if r["name"] == name)["throughput"] / 3600


def decide_cases(own: list[dict], sweep: list[dict], rng: random.Random | None = None) -> list:
    """(what, records, sweep, deadline_hours): the learner's own runs without a deadline and
    with one that 2 ranks just meet, the CI cluster's, and sets made from them; with `rng`, one
    more set drawn at random (a held-out case)."""
    recorded = reference.load(cluster.REFERENCE)
    expect(recorded is not None, f"the CI cluster's records ({cluster.REFERENCE}.json)", "none")
    ci, ci_sweep = recorded["records"], recorded["sweep"]
    in_time = _hours(own, "1x2") * 1.01
    cases = [
        ("your own records and sweep", own, sweep, None),
        (f"your own records, a deadline of {in_time:.3g} h", own, sweep, in_time),
        ("the CI cluster's records and sweep", ci, ci_sweep, None),
    ]
    for i, (name, eff) in enumerate(SHAPES.items()):
        records = with_efficiencies(ci, eff)
        deadline = None if i % 2 == 0 else _hours(records, "1x1") / 3
        losses = [[0.9, 1.2, 2.0], [2.1, 0.8, 1.5], [2.2, 2.0, 0.7], [1.0, 0.95, 1.1]][i]
        cases.append((f"records with {name}", records, with_losses(ci_sweep, losses), deadline))
    if rng is not None:
        eff = {name: round(rng.uniform(0.3, 1.05), 3) for name in ("1x2", "1x4", "2x2")}
        records = with_efficiencies(own, eff)
        deadline = rng.choice([None, _hours(records, "1x1") / rng.uniform(1.5, 4)])
        losses = [round(rng.uniform(0.5, 2.5), 4) for _ in sweep]
        cases.append((f"drawn records {eff}", records, with_losses(sweep, losses), deadline))
    return cases
