"""Unit tests of course_utils.checkpoint: round trips, wrappers, errors, rotation, overhead."""

import os
import pickle
import random
import time

import numpy as np
import pytest
import torch
from torch import nn

from course_utils import checkpoint as ck
from course_utils.checkpoint import CheckpointError, load_checkpoint, save_checkpoint


def small_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def trained(seed=0):
    """Model, optimizer (with momentum state), scheduler and scaler after two steps."""
    model = small_model(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(5, 4)).sum().backward()
        opt.step()
        sched.step()
    scaler = torch.amp.GradScaler("cpu", init_scale=128.0)
    return model, opt, sched, scaler


def assert_same_state(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_round_trip_restores_every_part(tmp_path):
    model, opt, sched, scaler = trained()
    path = save_checkpoint(
        tmp_path / "c.pt",
        model=model,
        optimizer=opt,
        scheduler=sched,
        scaler=scaler,
        epoch=3,
        step=42,
        sampler={"epoch": 3, "start": 64},
        config={"lr": 0.01, "name": "x"},
    )
    assert path == tmp_path / "c.pt"
    model2, opt2, sched2, scaler2 = trained(seed=1)
    scaler2 = torch.amp.GradScaler("cpu", init_scale=2.0)
    ckpt = load_checkpoint(path, model=model2, optimizer=opt2, scheduler=sched2, scaler=scaler2)
    assert_same_state(model.state_dict(), model2.state_dict())
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert all(torch.equal(s1[i]["exp_avg"], s2[i]["exp_avg"]) for i in s1)
    assert sched2.state_dict() == sched.state_dict()
    assert scaler2.get_scale() == 128.0
    assert (ckpt["epoch"], ckpt["step"], ckpt["sampler"]["start"]) == (3, 42, 64)
    assert ckpt["config"] == {"lr": 0.01, "name": "x"}
    assert set(ckpt["rng"]) >= {"python", "numpy", "torch"}
    assert not list(tmp_path.glob("*.tmp")), "the temporary file is renamed, not left behind"


def test_rng_state_round_trip_continues_every_stream():
    saved = ck.rng_state()
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    ck.set_rng_state(saved)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first


def test_rng_state_survives_weights_only_load(tmp_path):
    torch.save(ck.rng_state(), tmp_path / "rng.pt")
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    ck.set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first


def test_compiled_model_saves_plain_keys_and_loads_prefixed_ones(tmp_path):
    model = small_model()
    compiled = torch.compile(model)  # wrapping only; nothing is compiled until it is called
    assert next(iter(compiled.state_dict())).startswith("_orig_mod.")
    save_checkpoint(tmp_path / "c.pt", model=compiled)
    saved = torch.load(tmp_path / "c.pt", weights_only=True)["model"]
    assert not any(k.startswith("_orig_mod.") for k in saved)
    # A file written by code that did not unwrap (nanoGPT's puzzle) loads too.
    raw = {"format": ck.FORMAT, "model": compiled.state_dict(), "epoch": 0, "step": 0}
    torch.save(raw, tmp_path / "raw.pt")
    fresh = small_model(seed=5)
    load_checkpoint(tmp_path / "raw.pt", model=torch.compile(fresh))
    assert_same_state(fresh.state_dict(), model.state_dict())


def test_ddp_model_unwrapped_and_rank0_writes(tmp_path, one_rank_group):
    model = small_model()
    ddp = nn.parallel.DistributedDataParallel(model)
    path = save_checkpoint(tmp_path / "c.pt", model=ddp, step=1)
    assert path is not None, "rank 0 writes and returns the path"
    keys = list(torch.load(path, weights_only=True)["model"])
    assert keys == list(model.state_dict()), "no module. prefix in the file"
    fresh = nn.parallel.DistributedDataParallel(small_model(seed=3))
    load_checkpoint(path, model=fresh)
    assert_same_state(fresh.module.state_dict(), model.state_dict())


def test_map_location_moves_tensors(tmp_path):
    save_checkpoint(tmp_path / "c.pt", model=small_model())
    ckpt = load_checkpoint(tmp_path / "c.pt", map_location="meta")
    assert all(t.device.type == "meta" for t in ckpt["model"].values())


@pytest.mark.parametrize(
    ("environ", "gpus", "device"),
    [
        ({}, 0, "cpu"),  # a CPU node
        ({}, 1, "cuda:0"),  # a notebook on a GPU node
        (
            {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"},
            2,
            "cuda:1",
        ),  # rank 1 loads onto its own GPU, not rank 0's
        (
            {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"},
            1,
            "cuda:0",
        ),  # two ranks sharing one GPU
    ],
)
def test_default_map_location_is_this_ranks_device(fake_gpus, monkeypatch, environ, gpus, device):
    fake_gpus(gpus)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert ck.default_map_location() == torch.device(device)


def _saved_on_gpu(monkeypatch, path, **state):
    """save_checkpoint as on a GPU node: the file records cuda:0 as every tensor's location."""
    with monkeypatch.context() as m:
        m.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        return save_checkpoint(path, **state)


def test_a_checkpoint_saved_on_a_gpu_resumes_on_a_cpu_node(fake_gpus, monkeypatch, tmp_path):
    model = small_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    path = _saved_on_gpu(monkeypatch, tmp_path / "ckpt-00000001.pt", model=model, optimizer=opt)
    with pytest.raises(RuntimeError, match="CUDA device"):  # what plain torch.load does here
        torch.load(path, weights_only=True)
    fake_gpus(0)
    fresh = small_model(seed=1)
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    ckpt = ck.resume_or_start(tmp_path, model=fresh, optimizer=fresh_opt, log=lambda m: None)
    assert ckpt is not None and ckpt["rng"]["numpy"]["key"].device.type == "cpu"
    assert_same_state(fresh.state_dict(), model.state_dict())


def test_rng_state_mapped_to_another_device_still_restores():
    # On a GPU node a checkpoint is mapped to cuda:N, the NumPy key with it (the H100 run's
    # "can't convert cuda:0 device type tensor to numpy"); a tensor that is not on the CPU stands
    # in for it here.
    class Elsewhere(torch.Tensor):
        def numpy(self, *args, **kwargs):
            raise TypeError("can't convert cuda:0 device type tensor to numpy")

        def cpu(self, *args, **kwargs):
            return torch.Tensor(self.as_subclass(torch.Tensor))

    saved = ck.rng_state()
    first = np.random.rand()
    saved["numpy"]["key"] = saved["numpy"]["key"].as_subclass(Elsewhere)
    ck.set_rng_state(saved)
    assert np.random.rand() == first


def test_extra_values_weights_only_cannot_load_are_refused_at_save(tmp_path):
    with pytest.raises(ValueError, match=r"config\['root'\] is a PosixPath.*str\(path\)"):
        save_checkpoint(tmp_path / "c.pt", model=small_model(), config={"root": tmp_path})
    assert not (tmp_path / "c.pt").exists()


# ----------------------------------------------------------------------------- broken files


class Payload:
    """Unpickling this would create a marker folder: harmless, and detectable."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def write_bad(kind: str, path, good_file):
    if kind == "truncated":
        data = good_file.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "random":
        path.write_bytes(np.random.default_rng(0).bytes(4096))
    elif kind == "wrong structure":
        torch.save([torch.zeros(3)], path)
    elif kind == "missing keys":
        torch.save({"weights": torch.zeros(3)}, path)
    elif kind == "malicious":
        torch.save(
            {"format": ck.FORMAT, "model": Payload(path.parent / "PWNED"), "epoch": 0, "step": 0},
            path,
        )
    elif kind == "plain pickle":
        path.write_bytes(pickle.dumps(Payload(path.parent / "PWNED")))
    else:
        raise AssertionError(kind)


BAD = {
    "truncated": "truncated or corrupt",
    "empty": "empty file",
    "random": "not a PyTorch checkpoint",
    "wrong structure": "wrong structure: a checkpoint is a dict, this file holds a list",
    "missing keys": r"wrong structure: missing keys \['format', 'model', 'epoch', 'step'\]",
    "malicious": "refused by weights_only=True.*GLOBAL posix.mkdir",
    "plain pickle": "refused by weights_only=True|not a PyTorch checkpoint",
}


@pytest.mark.parametrize("kind", BAD)
def test_bad_files_raise_checkpoint_error_naming_file_and_problem(tmp_path, kind):
    good = save_checkpoint(tmp_path / "good.pt", model=small_model())
    bad = tmp_path / "bad.pt"
    write_bad(kind, bad, good)
    with pytest.raises(CheckpointError, match=BAD[kind]) as info:
        load_checkpoint(bad, model=small_model())
    assert str(bad) in str(info.value)
    assert info.value.__cause__ is None, "no pickle traceback chained"
    assert not (tmp_path / "PWNED").exists(), "no code from the file ran"


def test_the_payload_really_runs_without_weights_only(tmp_path):
    """Guards the test above: the same file does run code when loaded unsafely."""
    write_bad("malicious", tmp_path / "bad.pt", None)
    torch.load(tmp_path / "bad.pt", weights_only=False)
    assert (tmp_path / "PWNED").exists()


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="nope.pt: no such file"):
        load_checkpoint(tmp_path / "nope.pt")


def test_shape_mismatch_and_missing_keys_are_named(tmp_path):
    save_checkpoint(tmp_path / "c.pt", model=nn.Linear(4, 3))
    want = r"shape mismatch weight: file \(3, 4\) vs model \(5, 4\)"
    with pytest.raises(CheckpointError, match=want):
        load_checkpoint(tmp_path / "c.pt", model=nn.Linear(4, 5))
    with pytest.raises(CheckpointError, match=r"missing keys \['0.bias', '0.weight'\]"):
        load_checkpoint(tmp_path / "c.pt", model=nn.Sequential(nn.Linear(4, 3)))


def test_optimizer_requested_but_not_saved(tmp_path):
    model = small_model()
    save_checkpoint(tmp_path / "c.pt", model=model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(CheckpointError, match="has no optimizer state"):
        load_checkpoint(tmp_path / "c.pt", model=model, optimizer=opt)


# ----------------------------------------------------------------------------- folders


def test_latest_and_rotation_order_by_step_not_name_length(tmp_path):
    assert ck.latest_checkpoint(tmp_path) is None
    assert ck.latest_checkpoint(tmp_path / "missing") is None
    model = small_model()
    for step in (5, 100, 20):
        save_checkpoint(ck.checkpoint_path(tmp_path, step), model=model, step=step)
    (tmp_path / ".ckpt-00000999.pt.123.tmp").write_bytes(b"partial")
    assert ck.latest_checkpoint(tmp_path).name == "ckpt-00000100.pt"
    removed = ck.rotate_checkpoints(tmp_path, keep_last=2)
    assert [p.name for p in removed] == ["ckpt-00000005.pt"]
    kept = [p.name for p in ck.list_checkpoints(tmp_path)]
    assert kept == ["ckpt-00000020.pt", "ckpt-00000100.pt"]
    with pytest.raises(ValueError, match="keep_last=0 must be at least 1"):
        ck.rotate_checkpoints(tmp_path, keep_last=0)


def test_resume_or_start_skips_unusable_newest_and_says_so(tmp_path):
    model, opt, _, _ = trained()
    save_checkpoint(ck.checkpoint_path(tmp_path, 10), model=model, optimizer=opt, step=10)
    (ck.checkpoint_path(tmp_path, 20)).write_bytes(b"\x00" * 100)
    lines = []
    fresh = small_model(seed=9)
    ckpt = ck.resume_or_start(tmp_path, model=fresh, log=lines.append)
    assert ckpt["step"] == 10
    assert "skipping unusable" in lines[0] and "ckpt-00000020.pt" in lines[0]
    assert lines[1] == "checkpoint: resumed from ckpt-00000010.pt (epoch 0, step 10)"
    assert_same_state(fresh.state_dict(), model.state_dict())


def test_resume_or_start_from_nothing(tmp_path):
    lines = []
    assert ck.resume_or_start(tmp_path, model=small_model(), log=lines.append) is None
    assert lines == [f"checkpoint: none in {tmp_path}; starting from scratch"]


# ----------------------------------------------------------------------------- overhead


def _median_seconds(fn, repeat=7):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[repeat // 2]


def test_save_and_load_overhead_against_plain_torch_save(tmp_path, capsys):
    from course_utils.models import Net

    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    opt.step()
    plain = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    ours, theirs = tmp_path / "ours.pt", tmp_path / "plain.pt"
    save_plain = _median_seconds(lambda: torch.save(plain, theirs))
    save_ours = _median_seconds(lambda: save_checkpoint(ours, model=model, optimizer=opt))

    def plain_load():
        state = torch.load(theirs, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])

    load_plain = _median_seconds(plain_load)
    load_ours = _median_seconds(lambda: load_checkpoint(ours, model=model, optimizer=opt))
    size_plain, size_ours = theirs.stat().st_size, ours.stat().st_size
    with capsys.disabled():
        print(
            f"\ncheckpoint overhead ({size_ours / 1e6:.2f} MB vs plain {size_plain / 1e6:.2f} MB; "
            f"median of 7): save_checkpoint {save_ours * 1e3:.2f} ms vs torch.save "
            f"{save_plain * 1e3:.2f} ms; load_checkpoint {load_ours * 1e3:.2f} ms vs "
            "torch.load and "
            "load_state_dict "
            f"{load_plain * 1e3:.2f} ms"
        )
    # The extra is the RNG states (about 5 kB), an fsync and validation: small against the state.
    assert size_ours - size_plain < 20_000
    assert save_ours < 10 * save_plain + 0.5 and load_ours < 10 * load_plain + 0.2
    assert sorted(os.listdir(tmp_path)) == ["ours.pt", "plain.pt"], "no temporary files left"


# ----------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_checkpoint_maps_to_this_device_and_restores_cuda_rng(tmp_path):
    model = small_model().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(5, 4, device="cuda")).sum().backward()
    opt.step()
    path = save_checkpoint(tmp_path / "c.pt", model=model, optimizer=opt)
    on_cpu = load_checkpoint(path, map_location="cpu")
    assert all(t.device.type == "cpu" for t in on_cpu["model"].values())
    default = load_checkpoint(path)  # this rank's device
    assert all(t.device == torch.device("cuda:0") for t in default["model"].values())
    ck.resume_or_start(tmp_path, model=small_model(seed=2).cuda(), log=print)  # the H100 failure
    fresh = small_model(seed=1).cuda()
    load_checkpoint(path, model=fresh)
    assert_same_state(fresh.state_dict(), model.state_dict())
    ck.set_rng_state(on_cpu["rng"])
    first = torch.rand(3, device="cuda")
    ck.set_rng_state(on_cpu["rng"])
    assert torch.equal(torch.rand(3, device="cuda"), first), "CUDA random stream continues"
