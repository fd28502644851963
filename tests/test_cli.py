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
