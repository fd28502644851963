"""containers: one template for Charliecloud and Apptainer, and which runtime runs an image
(decided from injected answers; the real runs with ch-run: tests/integration/test_container.py)."""

import pytest

from course_utils import containers, kernel_spec


def test_the_template_in_charliecloud_words():
    argv = containers.in_image(
        "charliecloud",
        "/s/course.sqfs",
        ["course", "doctor"],
        [("/home/ann/w", "/mnt/1")],
        "/mnt/1",
    )
    assert argv == [
        "ch-run",
        "--home",
        "--bind=/home/ann/w:/mnt/1",
        "--cd=/mnt/1",
        "/s/course.sqfs",
        "--",
        "course",
        "doctor",
    ]


def test_the_same_template_in_apptainer_words_binds_the_gpu_driver():
    argv = containers.in_image(
        "apptainer", "/s/course.sif", ["course", "doctor"], [("/home/ann/w", "/mnt/1")], "/mnt/1"
    )
    assert argv == [
        "apptainer",
        "exec",
        "--nv",
        "--bind=/home/ann/w:/mnt/1",
        "--pwd=/mnt/1",
        "/s/course.sif",
        "course",
        "doctor",
    ]


def test_an_unknown_runtime_is_named_with_the_ones_there_are():
    with pytest.raises(
        ValueError, match="'docker' is not one the course knows: use one of charliecloud, apptainer"
    ):
        containers.in_image("docker", "x", ["true"])


def _installed(*programs):
    return lambda name: f"/usr/bin/{name}" if name in programs else None


@pytest.mark.parametrize(
    ("image", "programs", "runtime"),
    [
        ("/s/course.sif", ("ch-run", "apptainer"), "apptainer"),
        ("/s/course.sqfs", ("ch-run", "apptainer"), "charliecloud"),
        ("/s/course.sqfs", ("apptainer",), "apptainer"),
        ("/s/course/", ("ch-run",), "charliecloud"),
    ],
)
def test_the_runtime_follows_the_image_and_what_is_installed(image, programs, runtime):
    assert containers.choose_runtime(image, _installed(*programs)) == runtime


def test_a_sif_without_apptainer_says_how_to_get_it():
    with pytest.raises(
        ValueError,
        match=r"course.sif is a SIF file, which only Apptainer runs.*module load apptainer",
    ):
        containers.choose_runtime("course.sif", _installed("ch-run"))


def test_no_runtime_at_all_names_both_and_the_fix():
    with pytest.raises(
        ValueError,
        match=r"neither ch-run nor apptainer is on PATH.*apt-get install charliecloud-runtime",
    ):
        containers.choose_runtime("course.sqfs", _installed())


@pytest.mark.parametrize(
    ("runtime", "starts"),
    [
        ("charliecloud", "--cd=/mnt/1 '/s/course image.sqfs' -- python3 -m ipykernel_launcher"),
        ("apptainer", "--pwd=/mnt/1 '/s/course image.sqfs' python3 -m ipykernel_launcher"),
    ],
)
def test_the_container_kernel_is_written_from_the_same_template(runtime, starts):
    spec = kernel_spec.container_kernel_spec("/s/course image.sqfs", runtime)
    shell, flag, script, name, connection = spec["argv"]
    assert (shell, flag, name, connection) == (
        "/bin/sh",
        "-c",
        "course-container",
        "{connection_file}",
    )
    program = " ".join(containers.RUNTIMES[runtime].program)
    assert script.startswith(f'export USER="${{USER:-$(id -un)}}"; exec {program} ')
    # the connection file's folder and the notebook's, bound where the kernel reads them
    assert " '--bind='\"${1%/*}\"':/mnt/0' '--bind='\"$PWD\"':/mnt/1' " in script
    assert starts in script  # a path with a space stays one word
    assert script.endswith("-f '/mnt/0/'\"${1##*/}\"''")
    assert spec["interrupt_mode"] == "message" and spec["env"] == {}
