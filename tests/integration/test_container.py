"""The course in its container image (`make container`), run with Charliecloud's ch-run: the
doctor, a lesson under nbval, lesson 05's DDP as a two-node Slurm job with each rank inside the
image, a lesson through `course kernel --container`, and a second resolution of the image's
packages. `make test-container` builds the image and runs these beside the fast lane in it.

ch-run sees the host's /tmp and network; the folder a test works in is bound at /mnt/1.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys

import pytest
from needs import IMAGE
from slurm_utils import REPO, submit

from course_utils import accounting, containers

CONTAINER = pytest.mark.container
# ch-run refuses to start without USER (CI's shells may not set it)
ENV = {**os.environ, "USER": os.environ.get("USER") or pwd.getpwuid(os.getuid()).pw_name}


def run_in_image(command: list[str], work, timeout: float) -> subprocess.CompletedProcess:
    """`command` inside the image, in `work` (bound at /mnt/1), as the lessons' users run it."""
    argv = containers.in_image(
        "charliecloud", str(IMAGE), command, [(str(work), containers.WORK)], containers.WORK
    )
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=ENV)


@CONTAINER
def test_the_doctor_says_which_container_it_runs_in(tmp_path):
    done = run_in_image(["course", "doctor", "--json"], tmp_path, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["topic"]: row for row in json.loads(done.stdout)}
    assert rows["container"]["value"].startswith("charliecloud (CH_RUNNING is set); Python ")
    assert rows["container"]["value"].endswith(
        "packages in /usr/local/lib/python3.11/dist-packages"
    )
    assert rows["python"]["value"] == "3.11.2" and rows["pytorch"]["status"] == "ok"


@CONTAINER
def test_lesson_01_under_nbval_in_the_image(tmp_path):
    """The image's own copy of the lesson, in a folder the lesson may write to, with the image's
    Python as the kernel and every check through the judge (as make test-solutions runs it)."""
    pytest_in_image = (
        "cp /opt/course/solutions/01_tensors.ipynb . && python3 -m pytest -p no:cacheprovider "
        "-p course_utils.grading.runner.kernel_watch -p course_utils.grading.judge.plugin "
        "--course-judge=pass --nbval --nbval-current-env --nbval-cell-timeout=300 "
        "--nbval-sanitize-with /opt/course/course_utils/grading/sanitize.cfg 01_tensors.ipynb"
    )
    done = run_in_image(["sh", "-c", pytest_in_image], tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout) and " failed" not in done.stdout


@CONTAINER
def test_a_lesson_through_the_container_kernel(tmp_path):
    """`course kernel --container` registers the kernel; nbval on this machine runs lesson 01
    with it, so every cell executes inside the image (the first cell says where from)."""
    prefix = tmp_path / "jupyter"
    course = [sys.executable, "-m", "course_utils.cli", "kernel", "--container", str(IMAGE)]
    done = subprocess.run(
        [*course, "--prefix", str(prefix)], capture_output=True, text=True, env=ENV
    )
    assert done.returncode == 0 and "(ch-run --home)" in done.stdout, done.stdout + done.stderr
    notebook = tmp_path / "lesson" / "01_tensors.ipynb"
    notebook.parent.mkdir()
    shutil.copy(REPO / "solutions" / "01_tensors.ipynb", notebook)
    nbval = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--nbval-lax",
        "--nbval-kernel-name=course-container",
        "--nbval-cell-timeout=300",
        str(notebook),
    ]
    env = {**ENV, "JUPYTER_PATH": str(prefix / "share" / "jupyter")}
    done = subprocess.run(
        nbval, cwd=notebook.parent, capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)
    # Where that kernel's process runs: the image's Python, under ch-run, in the bound folder
    kernels = prefix / "share" / "jupyter" / "kernels"
    probe = "import json, os, sys; print(json.dumps([sys.executable, os.environ.get('CH_RUNNING')"
    probe += ", os.getcwd()]))"
    assert run_in_kernel(kernels, notebook.parent, probe) == [
        "/usr/bin/python3",
        "Weird Al Yankovic",
        containers.WORK,
    ]


def run_in_kernel(kernels, folder, code: str):
    """What `code` prints, as JSON, in the course-container kernel registered in `kernels`."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    specs = KernelSpecManager(kernel_dirs=[str(kernels)])
    manager = KernelManager(kernel_name="course-container", kernel_spec_manager=specs)
    manager.start_kernel(cwd=str(folder), env=ENV)
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        seen = []
        client.execute_interactive(code, output_hook=seen.append, timeout=120)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return json.loads(
        "".join(m["content"].get("text", "") for m in seen if m["msg_type"] == "stream")
    )


@CONTAINER
@pytest.mark.slurm
def test_ddp_on_two_nodes_with_each_rank_in_the_image(tmp_path):
    """slurm/ddp_srun.sh with COURSE_IMAGE: srun starts ch-run on each node, ch-run the rank."""
    env = {"COURSE_IMAGE": str(IMAGE), "COURSE_DEVICE": "cpu", "USER": ENV["USER"]}
    args = ["--epochs", "2", "--images", "1024", "--batch-size", "16", "--lr", "0.05"]
    job = submit(
        REPO / "slurm" / "ddp_srun.sh",
        *args,
        env=env,
        output_dir=tmp_path,
        cwd=tmp_path,
        sbatch_args=["--ntasks-per-node=1", "--cpus-per-task=1"],
    )
    result = job.wait(timeout=240)
    text = result.output
    assert result.returncode == 0, text
    assert f"each task runs inside {IMAGE} (charliecloud)" in text
    joined = re.findall(r"rank (\d)/2 \(local 0\) on (cn\d): joined, backend gloo", text)
    assert sorted(joined) == [("0", "cn1"), ("1", "cn2")], text
    sums = re.findall(r"rank \d: parameter checksum ([0-9a-f]{16})", text)
    assert len(sums) == 2 and len(set(sums)) == 1, text
    # Slurm's own record: one step of 2 tasks on 2 nodes, and what it started was ch-run
    steps = accounting.ended_job_steps(job.job_id)
    assert [s.state for s in steps if not s.is_step] == ["COMPLETED"], steps
    ranks = [s for s in steps if s.is_step and s.tasks == 2]
    assert [(s.name, s.nodes, s.state) for s in ranks] == [("ch-run", 2, "COMPLETED")], steps


@CONTAINER
def test_a_second_build_from_the_same_pins_installs_the_same_packages():
    """What the image holds (packages.txt, read from inside it by the build) against what a
    second build would install now: apt's resolution of the same Debian packages from the same
    archive (mmdebstrap --simulate), and the lock with the course."""
    done = subprocess.run(
        ["container/build.sh", "packages"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    built = (IMAGE.parent / "packages.txt").read_text().splitlines()
    again = done.stdout.splitlines()
    assert len(built) > 300 and "pip torch 2.14.1" in built
    assert sorted(set(built) ^ set(again)) == [], "packages that differ between the two"


@pytest.mark.parametrize(
    ("image", "programs"),
    [
        ("/s/course.sqfs", ["ch-run", "apptainer"]),
        ("/s/course.sqfs", ["apptainer"]),
        ("/s/course.sif", ["ch-run", "apptainer"]),
    ],
)
def test_batch_scripts_start_each_task_with_the_template_s_words(tmp_path, image, programs):
    """slurm/config.sh's COURSE_IMAGE: the runtime containers.choose_runtime picks and the words
    of containers.in_image, for a task that clears CUDA_VISIBLE_DEVICES (COURSE_DEVICE=cpu)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in programs:  # stand-ins: only their presence on PATH counts
        (bin_dir / program).write_text("#!/bin/sh\n")
        (bin_dir / program).chmod(0o755)
    (bin_dir / "dirname").symlink_to(shutil.which("dirname"))  # config.sh finds its folder
    script = (
        f"source {REPO}/slurm/config.sh && course_activate >/dev/null && "
        "printf '%s\\n' \"${course_task[@]}\""
    )
    env = {"PATH": str(bin_dir), "COURSE_IMAGE": image, "COURSE_DEVICE": "cpu", "USER": "ann"}
    done = subprocess.run(
        [shutil.which("bash"), "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    runtime = containers.choose_runtime(image, lambda name: name if name in programs else None)
    task = ["env", "CUDA_VISIBLE_DEVICES="]
    expected = containers.in_image(
        runtime, image, task, [(str(tmp_path), containers.WORK)], containers.WORK
    )
    assert done.stdout.splitlines() == expected


@pytest.mark.shellcheck
def test_the_build_script_and_the_ngc_definition_s_scripts_pass_shellcheck(tmp_path):
    """container/build.sh, and %post and %test of container/ngc.def as the sh scripts Apptainer
    runs them as (Apptainer itself is not installed here)."""
    sections, current = {}, None
    for line in (REPO / "container" / "ngc.def").read_text().splitlines():
        if line.startswith("%"):
            current = line[1:].split()[0]
            sections[current] = ["#!/bin/sh"]
        elif current:
            sections[current].append(line)
    paths = [str(REPO / "container" / "build.sh")]
    for name in ("post", "test"):
        paths.append(str(tmp_path / f"ngc-{name}.sh"))
        (tmp_path / f"ngc-{name}.sh").write_text("\n".join(sections[name]) + "\n")
    done = subprocess.run(["shellcheck", *paths], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def _room(out, tree_and_image_gib: int) -> subprocess.CompletedProcess:
    """`container/build.sh room OUT`, the check a build starts with, with its figure for Debian's
    tree and the image set (the wheels' figure stays the script's own)."""
    return subprocess.run(
        ["container/build.sh", "room", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CONTAINER_ROOM_GIB": str(tree_and_image_gib)},
    )


def test_the_room_check_refuses_a_folder_that_lacks_the_room_naming_figures_and_fix(tmp_path):
    """A disk that fills mid-build fails in mksquashfs with 'Failed to write to output
    filesystem', minutes in; the check says so first, with the figures and the fix."""
    refused = _room(tmp_path / "out", 10**7)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert re.search(r"has \d+ GiB free .*needs about 10000003 GiB", refused.stderr)
    assert "container/build.sh build OUT" in refused.stderr


def test_the_room_a_build_needs_counts_the_wheels_unless_kept(tmp_path):
    out = tmp_path / "out"
    cold = _room(out, 0)
    assert cold.returncode == 0, cold.stderr
    assert "a build needs about 3 GiB" in cold.stdout  # the wheels alone, with no tree or image
    (out / "wheels").mkdir()
    shutil.copy(REPO / "container/requirements.lock", out / "wheels/requirements.lock")
    kept = _room(out, 0)
    assert "a build needs about 0 GiB" in kept.stdout, kept.stdout + kept.stderr
