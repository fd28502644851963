"""`course doctor`'s container rows, decided from injected answers: the runtimes' marks, the
node's NVIDIA driver and whether its library loads (the doctor run inside the image with
ch-run: tests/integration/test_container.py)."""

import pytest

from course_utils.doctor import findings
from course_utils.doctor.container import Container, container_findings, detect


def _files(*present):
    return lambda path: path in present


@pytest.mark.parametrize(
    ("environ", "files", "runtime", "evidence"),
    [
        ({"CH_RUNNING": "Weird Al Yankovic"}, (), "charliecloud", "CH_RUNNING is set"),
        (
            {"APPTAINER_CONTAINER": "/scratch/course.sif", "SINGULARITY_CONTAINER": "/x"},
            (),
            "apptainer",
            "APPTAINER_CONTAINER is set",
        ),
        ({"SINGULARITY_CONTAINER": "/x.sif"}, (), "singularity", "SINGULARITY_CONTAINER is set"),
        ({"container": "podman"}, ("/run/.containerenv",), "podman", "/run/.containerenv exists"),
        ({}, ("/.dockerenv",), "docker", "/.dockerenv exists"),
        ({"container": "lxc"}, (), "lxc", "container=lxc"),
    ],
)
def test_each_runtime_is_told_by_its_own_mark(environ, files, runtime, evidence):
    assert detect(environ, _files(*files)) == Container(runtime, evidence)


def test_no_mark_is_no_container():
    assert detect({"HOME": "/home/ann", "CH_RUNNING": ""}, _files()) is None
    (row,) = container_findings(None, "/home/ann/venvs/course/lib", None, False)
    assert row.topic == "container" and row.value.startswith("none")


def test_inside_a_container_the_row_names_the_runtime_and_where_the_packages_are():
    found = Container("charliecloud", "CH_RUNNING is set")
    (row,) = container_findings(found, "/usr/local/lib/python3.11/dist-packages", None, False)
    assert row.status == findings.INFO
    assert row.value.startswith("charliecloud (CH_RUNNING is set); Python ")
    assert row.value.endswith("packages in /usr/local/lib/python3.11/dist-packages")


def test_a_gpu_node_whose_driver_stayed_outside_is_told_to_bind_it():
    found = Container("apptainer", "APPTAINER_CONTAINER is set")
    _, gpu = container_findings(found, "/usr/local/lib/python3.12/dist-packages", "580.65", False)
    assert gpu.status == findings.WARN
    assert "driver 580.65, but its libraries (libcuda) are not inside" in gpu.value
    assert "apptainer exec --nv" in gpu.advice and "ch-fromhost --nvidia" in gpu.advice
    _, bound = container_findings(found, "/usr/local/lib", "580.65", True)
    assert bound.status == findings.OK and "580.65" in bound.value
