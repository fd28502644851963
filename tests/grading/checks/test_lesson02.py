"""Lesson 02 checkers: pass on the reference, fail with a useful message on known-wrong answers."""

import statistics

import torch

from course_utils import hpc
from course_utils.grading import run_check


def test_choose_device():
    def reference(disable):
        return torch.device("cuda" if not disable and torch.cuda.is_available() else "cpu")

    assert run_check("02.1", reference).passed
    ignores_flag = run_check(
        "02.1", lambda d: torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    assert (
        ignores_flag.message
        == "choose_device(True): expected cpu when --disable-cuda is given, got cuda"
    )
    strings = run_check("02.1", lambda d: "cpu")
    assert strings.message == "expected a torch.device, got str"


def test_batch_to():
    assert run_check("02.2", lambda b, d: (b[0].to(d), b[1].to(d))).passed
    forgot_targets = run_check("02.2", lambda b, d: (b[0].to(d), b[1]))
    assert forgot_targets.message == "expected both tensors on the meta device, got ['meta', 'cpu']"


def test_add_noise():
    assert run_check("02.3", lambda x, s: x + s * torch.randn_like(x)).passed
    cpu_float = run_check("02.3", lambda x, s: x + s * torch.randn(x.shape))
    assert cpu_float.verdict == "failed"
    wrong_std = run_check("02.3", lambda x, s: x + torch.randn_like(x))
    assert "expected noise with standard deviation 0.1" in wrong_std.message


def _stub(*args):
    raise NotImplementedError("Exercise 02.x")


def loader_settings(device, environ):
    if device.type == "cuda":
        return {"num_workers": hpc.allocated_cpus(environ), "pin_memory": True}
    return {"num_workers": 0, "pin_memory": False}


def test_loader_settings():
    assert run_check("02.4", loader_settings).passed
    assert run_check("02.4", _stub).verdict == "not attempted yet"


def test_loader_settings_that_pin_everywhere_fail():
    always = run_check(
        "02.4", lambda d, e: {"num_workers": hpc.allocated_cpus(e), "pin_memory": True}
    )
    assert always.message == (
        "a CPU job with --cpus-per-task=8: expected num_workers=0, got num_workers=8"
    )
    pins_cpu = run_check("02.4", lambda d, e: {**loader_settings(d, e), "pin_memory": True})
    assert (
        pins_cpu.message
        == "a CPU job with --cpus-per-task=8: expected pin_memory=False, got pin_memory=True"
    )


def test_loader_settings_with_the_variable_as_text_or_a_string_compare_fail():
    def text(device, environ):
        return {"num_workers": environ.get("SLURM_CPUS_PER_TASK", "1"), "pin_memory": True}

    assert run_check("02.4", text).message == (
        "a GPU job with --cpus-per-task=8: expected num_workers=8, got num_workers='8'"
    )

    def by_string(device, environ):  # torch.device("cuda", 1) != "cuda"
        on_gpu = device == torch.device("cuda")
        return {"num_workers": hpc.allocated_cpus(environ) if on_gpu else 0, "pin_memory": on_gpu}

    assert run_check("02.4", by_string).message.startswith(
        "cuda:1 with --cpus-per-task=12: expected num_workers=12, got num_workers=0"
    )


def gpu_or_cpu(images, cpu, gpu, extra_wait_s):
    cpu_s, gpu_s = images / cpu["images_per_s"], images / gpu["images_per_s"]
    busy = statistics.fmean(gpu["util_samples"]) >= 50
    return {
        "ask_for": "gpu" if busy and gpu_s + extra_wait_s < cpu_s else "cpu",
        "core_hours": cpu["cores"] * cpu_s / 3600,
        "gpu_hours": gpu_s / 3600,
    }


def test_gpu_or_cpu():
    assert run_check("02.5", gpu_or_cpu).passed
    assert run_check("02.5", _stub).verdict == "not attempted yet"


def test_gpu_or_cpu_on_speed_alone_fails_on_the_documentations_case():
    def fastest(images, cpu, gpu, wait):
        faster = images / gpu["images_per_s"] + wait < images / cpu["images_per_s"]
        return {**gpu_or_cpu(images, cpu, gpu, wait), "ask_for": "gpu" if faster else "cpu"}

    assert run_check("02.5", fastest).message == (
        "the documentation's small CNN: fast on a GPU, but the GPU is 5% busy: "
        "expected 'cpu', got 'gpu'"
    )


def test_gpu_or_cpu_with_the_busiest_sample_or_without_the_wait_fails():
    def busiest(images, cpu, gpu, wait):
        return gpu_or_cpu(images, cpu, {**gpu, "util_samples": [max(gpu["util_samples"])]}, wait)

    assert run_check("02.5", busiest).message == (
        "a GPU busy in one sample of five (mean 20%): expected 'cpu', got 'gpu'"
    )
    no_wait = run_check("02.5", lambda i, c, g, w: gpu_or_cpu(i, c, g, 0))
    assert no_wait.message.startswith("a 4-minute CPU job against a 1-hour wait for a GPU")


def test_gpu_or_cpu_costs_in_hours_per_core():
    def per_job(images, cpu, gpu, wait):  # forgets that a CPU job holds all its cores
        return {
            **gpu_or_cpu(images, cpu, gpu, wait),
            "core_hours": images / cpu["images_per_s"] / 3600,
        }

    assert run_check("02.5", per_job).message == (
        "the documentation's small CNN: fast on a GPU, but the GPU is 5% busy: "
        "expected core_hours 5.556, got 0.6944444444444444"
    )
    seconds = run_check("02.5", lambda *a: {**gpu_or_cpu(*a), "gpu_hours": 125.0})
    assert seconds.message.endswith("expected gpu_hours 0.03472, got 125.0")


def gpu_job_header(hours, cores, mem_gb):
    return (
        "#!/bin/bash\n#SBATCH --ntasks=1\n#SBATCH --gres=gpu:1\n"
        f"#SBATCH --cpus-per-task={cores}\n#SBATCH --mem={mem_gb}G\n"
        f"#SBATCH --time={int(hours * 60)}\n"
    )


def test_bundle_header():
    assert run_check("02.6", gpu_job_header).passed
    assert run_check("02.6", _stub).verdict == "not attempted yet"


def test_bundle_header_names_the_wrong_request():
    mega = run_check("02.6", lambda h, c, m: gpu_job_header(h, c, m).replace("G\n", "\n"))
    assert mega.message == (
        "gpu_job_header(3, 12, 124): expected the bundle's 124G = 126976 MB (--mem), got 124 MB"
    )
    hours = run_check(
        "02.6", lambda h, c, m: gpu_job_header(h, c, m).replace("--time=", "--time=0")
    )
    assert hours.verdict == "passed"  # 0180 is still 180 minutes
    as_hours = run_check(
        "02.6",
        lambda h, c, m: gpu_job_header(h, c, m).replace(f"--time={int(h * 60)}", f"--time={h}"),
    )
    assert as_hours.message == "gpu_job_header(3, 12, 124): expected 180 minutes, got 3 minutes"
    two = run_check("02.6", lambda h, c, m: gpu_job_header(h, c, m).replace("gpu:1", "gpu:2"))
    assert two.message == "gpu_job_header(3, 12, 124): expected one GPU, got 2 GPU(s)"
    all_cores = run_check("02.6", lambda h, c, m: gpu_job_header(h, 64, m))
    assert all_cores.message == (
        "gpu_job_header(3, 12, 124): expected the bundle's 12 CPUs (--cpus-per-task), got 64"
    )


# ---- held-out cases ------------------------------------------------------------------------


def test_02_5_held_out_cases_fail_the_four_visible_answers_typed_in(held_out_catches):
    from course_utils.grading.checks.lesson02 import DECISIONS

    visible = {(images, wait): gpu_or_cpu(images, cpu, gpu, wait)
               for images, cpu, gpu, wait, _ in DECISIONS}  # fmt: skip

    def typed_in(images, cpu, gpu, extra_wait_s):
        return visible.get((images, extra_wait_s), {"ask_for": "cpu", "core_hours": 1.0,
                                                     "gpu_hours": 1.0})  # fmt: skip

    assert "gpu_or_cpu(" in held_out_catches("02.5", gpu_or_cpu, typed_in)
