import sys
from pathlib import Path

import pytest

from course_utils.cli import build_parser, main

COURSE = str(Path(sys.executable).parent / "course")


def test_data_fetch_refuses_inside_a_slurm_job(monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert main(["data", "fetch"]) == 2
    assert "refusing to download inside a Slurm job" in capsys.readouterr().err


def test_data_info_says_which_data(tmp_path, capsys):
    assert main(["data", "info", "--root", str(tmp_path)]) == 0
    assert "synthetic CIFAR-10 stand-in" in capsys.readouterr().out


def test_subcommands_exist():
    parser = build_parser()
    for command in (["doctor"], ["data", "info"], ["release"], ["check", "01"], ["grade", "subs"]):
        assert callable(parser.parse_args(command).func)


@pytest.mark.parametrize("argv", [["--help"], ["release", "--help"]])
def test_help_exits_cleanly(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0 and "usage: course" in capsys.readouterr().out


def test_kernel_container_registers_a_kernel_that_runs_in_the_image(tmp_path, capsys):
    image = tmp_path / "course.sqfs"
    image.write_bytes(b"")  # stands in for the image: only its path goes into kernel.json
    argv = ["kernel", "--container", str(image), "--runtime", "charliecloud"]
    assert main([*argv, "--prefix", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"'course-container' registered in {tmp_path}" in out and "(ch-run --home)" in out
    spec = (tmp_path / "share/jupyter/kernels/course-container/kernel.json").read_text()
    assert f"--cd=/mnt/1 {image} -- python3 -m ipykernel_launcher" in spec


def test_kernel_container_without_the_image_names_the_fix(tmp_path, capsys):
    argv = ["kernel", "--container", str(tmp_path / "course.sqfs"), "--prefix", str(tmp_path)]
    assert main(argv) == 2
    assert "no container image at" in capsys.readouterr().err
    assert not (tmp_path / "share").exists()
