import sys
from pathlib import Path

import pytest

from course_utils import processes
from course_utils.doctor import findings, gpu, report, runtime, versions

COURSE = str(Path(sys.executable).parent / "course")


@pytest.mark.parametrize(
    "capability, arch_list, ok",
    [
        ((9, 0), ["sm_80", "sm_90"], True),
        ((12, 0), ["sm_80", "sm_90"], False),  # "no kernel image is available"
        ((8, 6), ["sm_80", "compute_80"], True),  # PTX of 8.0 JIT-compiles for 8.6
        ((7, 5), ["sm_80", "compute_80"], False),  # PTX cannot run on an older GPU
    ],
)
def test_arch_supported(capability, arch_list, ok):
    assert gpu.arch_supported(capability, arch_list) is ok


@pytest.mark.parametrize(
    "torch_v, tv_v, ok",
    [("2.14.1+cu130", "0.29.1+cu130", True), ("2.6.0", "0.21.0", True), ("2.9.1", "0.29.1", False)],
)
def test_torchvision_pairs(torch_v, tv_v, ok):
    assert versions.torchvision_pairs(torch_v, tv_v) is ok


def test_the_torchvision_for_a_pytorch_release():
    assert versions.torchvision_for("2.14.1+cu130") == "0.29"
    assert versions.torchvision_for("2.10.0a0+b4e4ee81d3") == "0.25"  # NGC 25.12's snapshot
    assert versions.torchvision_for("1.13.1") is None


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        ("2.6.0", True),
        ("2.6.0+cu124", True),
        ("2.10.0a0+b4e4ee81d3", True),  # a snapshot after 2.9's release branch: all of 2.6 in it
        ("2.7.0a0+6c54963", True),
        ("2.6.0a0+ecf3bae", False),  # taken while 2.6 was being written
        ("2.6.0rc1", False),
        ("2.6.0.dev20241112", False),
        ("2.5.1", False),
        ("1.13.1", False),
    ],
)
def test_supported_torch_counts_a_pre_release_before_its_release(version, ok):
    assert versions.supported_torch(version) is ok


def test_threads_warns_when_oversubscribed(monkeypatch):
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setattr(runtime.torch, "get_num_threads", lambda: 8)
    (finding,) = runtime.threads()
    assert finding.status == findings.WARN and "configure_threads" in finding.advice


def test_error_finding_gives_exit_code_1(monkeypatch, capsys):
    bad = findings.Finding("gpu 0", "X, compute capability 12.1", findings.ERROR, "install a build")
    monkeypatch.setattr(report, "collect", lambda: [bad])
    assert report.main() == 1
    assert "[error]  X, compute capability 12.1" in capsys.readouterr().out


def test_report_covers_every_topic(commands):
    topics = {f.topic for f in report.collect()}
    for needed in (
        "python",
        "pytorch",
        "torchvision",
        "cuda (build)",
        "cudnn",
        "cpu threads",
        "tf32",
        "distributed backends",
        "data",
        "jupyter kernel",
        "widgets",
        "container",
        "slurm job",
        "job cpus",
        "job gpus",
        "job memory",
        "job time left",
    ):
        assert needed in topics
    assert any(t.startswith("gpu") for t in topics)


@pytest.mark.parametrize(
    ("version", "status", "says"),
    [
        ("2.14.1+cu130", findings.OK, ""),
        ("2.11.0+cu130", findings.WARN, "2.11.0+cu130 (the course is tested with 2.14.1)"),
        ("2.5.1", findings.ERROR, "2.5.1 (the course is tested with 2.14.1)"),
    ],
)
def test_pytorch_other_than_the_pin_is_reported_with_a_fix(version, status, says):
    finding = versions.pytorch_finding(version, tested="2.14.1")
    assert finding.status == status and says in finding.value
    if status != findings.OK:
        assert "pip install -r requirements.txt (torch==2.14.1)" in finding.advice


@pytest.mark.parametrize(
    ("driver", "cuda", "status"),
    [
        ("580.65.06", "13.0", findings.OK),
        ("575.57.08", "13.0", findings.ERROR),  # a cu130 wheel needs 580
        ("525.60.13", "12.6", findings.OK),
        ("470.82.01", "12.6", findings.ERROR),
        (None, "13.0", findings.INFO),  # a CPU node with the CUDA wheel
        (None, None, findings.INFO),  # a CPU-only build needs no driver
    ],
)
def test_driver_against_the_cuda_build(driver, cuda, status):
    finding = gpu.driver_finding(driver, cuda)
    assert finding.status == status
    if status == findings.ERROR:
        assert f"CUDA {cuda} build" in finding.value and "driver >=" in finding.advice


def test_a_v100_on_a_cuda_13_build_is_told_what_to_do():
    cu130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
    finding = gpu.gpu_finding(0, "Tesla V100-SXM2-32GB", (7, 0), cu130)
    assert finding.status == findings.ERROR
    assert "cu126" in finding.advice and "fp16 autocast with GradScaler" in finding.advice
    assert gpu.gpu_finding(0, "NVIDIA H100", (9, 0), cu130).status == findings.OK
    other = gpu.gpu_finding(1, "Tesla P100", (6, 0), cu130)
    assert other.status == findings.ERROR and "V100" not in other.advice


def test_the_gpu_section_names_the_driver(fake_gpus, monkeypatch):
    fake_gpus(0)
    monkeypatch.setattr(gpu, "nvidia_driver", lambda: None)
    topics = [f.topic for f in gpu.gpus()]
    assert topics == ["nvidia driver", "gpu"]


# What nvidia-smi and scontrol answer here: the doctor's children go through processes.run,
# which these tests replace, so they start no process.
DRIVER = "580.65.06\n"
SCONTROL = "JobId=7 JobName=jupyter\n   NumNodes=1 NumCPUs=4 NumTasks=1 CPUs/Task=4\n"


def _finished(command, returncode=0, stdout=""):
    return processes.Finished(tuple(command), returncode, stdout, "", 0.0)


@pytest.fixture
def commands(monkeypatch):
    """processes.run answers as nvidia-smi and scontrol would; the commands asked are listed."""
    asked = []

    def run(command, *, timeout, **options):
        asked.append(list(command))
        answers = {"nvidia-smi": DRIVER, "scontrol": SCONTROL}
        if command[0] not in answers:
            raise AssertionError(f"the doctor started {command}: answer it here")
        return _finished(command, stdout=answers[command[0]])

    monkeypatch.setattr(processes, "run", run)
    for name, value in {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "1"}.items():
        monkeypatch.setenv(name, value)
    return asked


def test_the_report_asks_nvidia_smi_and_scontrol_through_processes(commands, tmp_path):
    rows = {f.topic: f for f in report.collect()}
    assert ["scontrol", "show", "job", "7"] in commands
    assert rows["job cpus"].value == "4 in the job, 1 task x 4 CPUs"  # NumCPUs: scontrol
    assert gpu.nvidia_driver(tmp_path / "no-driver-file") == "580.65.06"
    assert commands[-1][0] == "nvidia-smi"


def test_the_driver_file_wins_over_nvidia_smi(commands, tmp_path):
    version = tmp_path / "version"
    version.write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    )
    assert gpu.nvidia_driver(version) == "550.54.15"
    assert not any(c[0] == "nvidia-smi" for c in commands)


@pytest.mark.parametrize(
    "answer",
    [
        FileNotFoundError(2, "No such file or directory: 'nvidia-smi'"),  # a CPU node
        _finished(["nvidia-smi"], 9, "NVIDIA-SMI has failed: no devices were found\n"),
    ],
)
def test_no_driver_where_nvidia_smi_is_missing_or_fails(answer, monkeypatch, tmp_path):
    def run(command, **options):
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(processes, "run", run)
    assert gpu.nvidia_driver(tmp_path / "no-driver-file") is None


def test_an_exclusive_gpu_and_the_processes_on_it_are_named():
    from course_utils import nvidia

    h100 = nvidia.Gpu(0, "GPU-aaaa", "NVIDIA H100", "Exclusive_Process")
    other = nvidia.Gpu(1, "GPU-bbbb", "NVIDIA H100", "Default")
    users = [
        nvidia.GpuProcess("GPU-aaaa", 4242, "python", 2311.0),  # an earlier lesson's kernel
        nvidia.GpuProcess("GPU-bbbb", 99, "python", 10.0),  # this process
    ]
    rows = gpu.sharing_findings([h100, other], users, own_pid=99)
    assert [(r.topic, r.status) for r in rows] == [
        ("gpu 0 mode", findings.WARN),
        ("gpu 0 users", findings.WARN),
    ]
    assert (
        "busy or unavailable" in rows[0].advice and "pid 4242 (python, 2311 MiB)" == rows[1].value
    )
    quiet = gpu.sharing_findings([other], users[1:], own_pid=99)
    assert [(r.topic, r.status) for r in quiet] == [("gpu sharing", findings.OK)]
    assert gpu.sharing_findings([], [], own_pid=99) == []


@pytest.mark.parametrize(
    ("capability", "archs", "built_with", "driver", "verdict"),
    [
        ((9, 0), ["sm_90"], (12, 8), (12, 2), "runs"),  # a cubin: minor versions compatible
        ((9, 0), ["sm_90"], (13, 0), (12, 8), "update the driver"),  # a CUDA 13 cubin
        ((10, 0), ["sm_90", "compute_90"], (12, 8), (12, 8), "runs"),  # PTX, JIT-compiled
        ((10, 0), ["sm_90", "compute_90"], (12, 8), (12, 2), "update the driver"),  # PTX ISA
        ((7, 0), ["sm_80", "compute_80"], (12, 8), (13, 0), "rebuild for the GPU"),
        ((8, 0), ["sm_80"], (12, 0), None, "update the driver"),  # a driver too old for CUDA 11
    ],
)
def test_one_build_rule_counts_cubins_and_ptx(capability, archs, built_with, driver, verdict):
    """Lessons 00 and 07 both ask it: a cubin against the driver's CUDA major version, PTX
    against the CUDA version that wrote it."""
    assert gpu.build_verdict(capability, archs, built_with, driver) == verdict


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("580.65.06", (13, 0)),
        ("570.86.10", (12, 8)),
        ("535.104.05", (12, 2)),
        ("470.82.01", (11, 4)),
        ("440.33", None),
    ],
)
def test_a_drivers_newest_cuda(driver, cuda):
    assert gpu.driver_cuda(driver) == cuda
