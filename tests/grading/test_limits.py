"""runner/limits: `Limits`, their defaults, what the gradebook says of them, sizes."""

import pytest

from course_utils.grading.runner import cgroups, limits
from course_utils.grading.runner.limits import Limits


@pytest.mark.parametrize(
    "text, size",
    [("8G", 8 * 2**30), ("512M", 512 * 2**20), ("1.5g", 3 * 2**29), ("100k", 102400), ("0", 0)]
    + [("4GiB", 4 * 2**30), ("123", 123)],
)
def test_parse_size(text, size):
    assert limits.parse_size(text) == size


def test_parse_size_says_what_it_takes():
    with pytest.raises(ValueError, match=r"--max-memory 'lots': give a size such as 8G"):
        limits.parse_size("lots", "--max-memory")


def test_format_size():
    assert [limits.format_size(n) for n in (0, 8 * 2**30, 3 * 2**29, 2**20, 10)] == [
        "no limit",
        "8 GiB",
        "1.5 GiB",
        "1 MiB",
        "10 B",
    ]


def test_limits_describe_goes_into_the_gradebook(monkeypatch):
    monkeypatch.setattr(cgroups, "process_cap_kind", lambda n: "pids cgroup")
    assert Limits(sandbox=False).describe() == "none"
    text = Limits(max_procs=64, max_memory=6 * 2**30, max_disk=2**28, cpu_time=60).describe()
    assert text == (
        "bubblewrap, no network; processes 64 (pids cgroup), memory 6 GiB, file 1 GiB, "
        "disk 256 MiB, CPU 60 s"
    )


@pytest.mark.parametrize(
    "size, text",
    [(8 * 2**30, "8G"), (2**30, "1G"), (512 * 2**20, "512M"), (3 * 2**29, "1536M")]
    + [(102400, "100k"), (123, "123"), (0, "0")],
)
def test_size_option_is_what_parse_size_reads_back(size, text):
    assert limits.size_option(size) == text
    assert limits.parse_size(text) == size


def test_default_limits_share_the_cpus_and_keep_the_defaults(monkeypatch):
    import course_utils.hpc

    monkeypatch.setattr(course_utils.hpc, "allocated_cpus", lambda: 8)
    got = limits.default_limits(300, jobs=4)
    assert (got.timeout, got.cell_timeout, got.threads, got.cpu_time) == (300, 120, 2, 2400)
    assert (got.max_procs, got.max_memory, got.max_disk) == (512, 8 * 2**30, 2 * 2**30)
    short = limits.default_limits(30, jobs=16, cell_timeout=60, max_procs=None, sandbox=False)
    assert (short.cell_timeout, short.threads, short.max_procs, short.sandbox) == (
        30,
        1,
        512,
        False,
    )
    assert limits.default_limits(600, 1, cpu_time=0, max_memory=0).cpu_time == 0


def test_the_command_help_reads_the_defaults(monkeypatch, capsys):
    from course_utils.cli import build_parser

    changed = Limits(
        timeout=450, cell_timeout=90, max_procs=64, max_memory=3 * 2**30, max_disk=2**28
    )
    monkeypatch.setattr(limits, "DEFAULTS", changed)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["grade", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "seconds per cell (default: 90)" in text
    assert "(default 64; 0: none)" in text and "e.g. 3G (default 3G; 0: none)" in text
    assert "a tmpfs (default 256M)" in text and "writes (default 1G)" in text
    assert build_parser().parse_args(["grade", "subs"]).timeout == changed.timeout
