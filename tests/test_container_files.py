"""The container's files: the image's lock agrees with requirements.txt (container/build.sh
installs the lock alone), and NGC's Apptainer definition (container/ngc.def) keeps the image's
PyTorch, linted here. The image's runs, and shellcheck of the definition's scripts:
tests/integration/test_container.py."""

import re

from course_utils.doctor import versions
from course_utils.paths import REPO_ROOT

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==(\S+)$", re.M)


def _pins(path) -> dict[str, str]:
    """name -> version, names as pip compares them (PEP 503)."""
    text = path.read_text()
    return {re.sub(r"[-_.]+", "-", n).lower(): v for n, v in PIN.findall(text)}


def test_the_lock_holds_every_pin_of_requirements_at_its_version():
    pins, lock = (
        _pins(REPO_ROOT / "requirements.txt"),
        _pins(REPO_ROOT / "container/requirements.lock"),
    )
    differ = {
        name: (version, lock.get(name))
        for name, version in pins.items()
        if lock.get(name) != version
    }
    assert not differ, f"{differ}: run make container-lock after changing requirements.txt"


def test_the_lock_pins_each_package_once_and_exactly():
    lines = (REPO_ROOT / "container/requirements.lock").read_text().splitlines()
    packages = [line for line in lines if line and not line.startswith("#")]
    assert all(PIN.fullmatch(line) for line in packages), [
        p for p in packages if not PIN.fullmatch(p)
    ]
    names = [re.sub(r"[-_.]+", "-", p.split("==")[0]).lower() for p in packages]
    assert len(names) == len(set(names))
    assert "torch" in names and len(names) > len(_pins(REPO_ROOT / "requirements.txt"))


# ---- container/ngc.def, linted: Apptainer is not installed here, and NGC is not reachable ------

DEFINITION = REPO_ROOT / "container" / "ngc.def"
# Apptainer's sections (its definition files' reference); an unknown one is ignored by a build
SECTIONS = {
    "setup",
    "files",
    "environment",
    "post",
    "runscript",
    "startscript",
    "test",
    "labels",
    "help",
}


def _definition() -> tuple[dict[str, str], dict[str, list[str]]]:
    """The header ({"Bootstrap": "docker", ...}) and each section's lines, comments left out."""
    header, sections, current = {}, {}, None
    for line in DEFINITION.read_text().splitlines():
        if line.startswith("%"):
            current = line[1:].split()[0]
            assert current not in sections, f"%{current} twice"
            sections[current] = []
        elif current is None and ":" in line and not line.startswith("#"):
            key, value = line.split(":", 1)
            header[key.strip()] = value.strip()
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            sections[current].append(line)
    return header, sections


def test_the_definition_starts_from_an_ngc_pytorch_tag_the_course_supports():
    header, sections = _definition()
    assert header["Bootstrap"] == "docker"
    assert re.fullmatch(r"nvcr\.io/nvidia/pytorch:\d\d\.\d\d-py3", header["From"]), header["From"]
    assert set(sections) <= SECTIONS, set(sections) - SECTIONS
    labels = dict(line.split(None, 1) for line in sections["labels"])
    assert versions.supported_torch(labels["course.pytorch"]), labels


def test_its_files_are_the_course_s_and_land_in_opt_course():
    _, sections = _definition()
    pairs = [line.split() for line in sections["files"]]
    assert all(len(p) == 2 and p[1] == f"/opt/course/{p[0]}" for p in pairs), pairs
    missing = [source for source, _ in pairs if not (REPO_ROOT / source).exists()]
    assert not missing, f"%files names what the course does not have: {missing}"
    assert {"course_utils", "pyproject.toml", "requirements.txt", "slurm"} <= {p[0] for p in pairs}


def test_no_pip_install_may_replace_the_image_s_torch():
    _, sections = _definition()
    installs = [line.strip() for line in sections["post"] if "pip install" in line]
    assert installs, "%post installs the course"
    for command in installs:
        assert "--no-deps" in command or "--constraint /tmp/keep-torch.txt" in command, command
        assert not re.search(r"[\s\"']torch(==|\s|$)", command), f"installs torch: {command}"
    course = [c for c in installs if c.endswith("-e /opt/course")]
    assert course and "--no-deps" in course[0], "the course itself, without its dependencies"
    post = "\n".join(sections["post"])
    assert "torch.__version__}\")' >/tmp/keep-torch.txt" in post  # the constraint holds torch
    guard = post.index("if ! python -c 'import torchvision'")
    assert guard < post.index('"torchvision==$pair.*"'), "torchvision only where it is missing"
