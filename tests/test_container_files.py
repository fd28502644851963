"""The container's files: the image's lock agrees with requirements.txt (container/build.sh
installs the lock alone), and NGC's Apptainer definition (container/ngc.def) keeps the image's
PyTorch. The image's runs: tests/integration/test_container.py."""

import re

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
