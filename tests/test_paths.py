"""course_utils.paths: the course's own files, found through the installed package; the build
folder; the course's commit (git answered here)."""

import pytest

from course_utils import paths, processes


def test_course_files_are_found_from_any_folder(tmp_path, monkeypatch):
    # a hub's copy of notebooks/ in a learner's home: no ../slurm there
    monkeypatch.chdir(tmp_path)
    script = paths.course_file("slurm/ddp_srun.sh")
    assert script == paths.REPO_ROOT / "slurm" / "ddp_srun.sh"
    assert script.read_text().startswith("#!/bin/bash")


def test_a_missing_course_file_names_the_install_that_keeps_them(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    with pytest.raises(
        FileNotFoundError, match=r"slurm/ddp_srun.sh is not in the course .*pip install -e"
    ):
        paths.course_file("slurm/ddp_srun.sh")


def test_commit_reads_git_and_an_override_wins(fake_commands, monkeypatch):
    monkeypatch.delenv("COURSE_COMMIT", raising=False)
    fake = fake_commands({"git rev-parse": "1a2b3c4\n"})
    assert paths.commit() == "1a2b3c4"
    assert fake.calls == [("git", "-C", str(paths.REPO_ROOT), "rev-parse", "--short", "HEAD")]
    monkeypatch.setenv("COURSE_COMMIT", "feedbee")  # a copy without .git (a GPU node's)
    assert paths.commit() == "feedbee" and len(fake.calls) == 1


def test_commit_is_unknown_without_git_or_a_repository(fake_commands, monkeypatch):
    monkeypatch.delenv("COURSE_COMMIT", raising=False)
    not_a_repo = processes.Finished(("git",), 128, "", "fatal: not a git repository\n", 0.0)
    fake_commands({"git rev-parse": not_a_repo})
    assert paths.commit() == "unknown"

    def no_git(command):
        raise FileNotFoundError(2, "No such file or directory", "git")

    fake_commands({"git rev-parse": no_git})
    assert paths.commit() == "unknown"


def test_build_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_BUILD_DIR", raising=False)
    assert paths.build_root() == paths.REPO_ROOT / "build"
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    assert paths.build_root() == tmp_path


def test_as_learner_sees_writes_the_course_relative_and_the_home_as_tilde():
    root = str(paths.REPO_ROOT)
    text = (
        f'File "{root}/course_utils/jobs/faulty_ddp.py", line 9\n'
        f"of binary: {root}/.venv/bin/python in {root}\n"
        "Python v3.11.7 (/home/ada/.pyenv/versions/3.11.7/bin/python3.11)\n"
        f"{root}-old/x.py /home/adam/y /opt/site/python\n"
    )
    assert paths.as_learner_sees(text, home="/home/ada") == (
        'File "course_utils/jobs/faulty_ddp.py", line 9\n'
        "of binary: .venv/bin/python in .\n"
        "Python v3.11.7 (~/.pyenv/versions/3.11.7/bin/python3.11)\n"
        f"{root}-old/x.py /home/adam/y /opt/site/python\n"
    )


def test_shown_paths_are_relative_to_the_course_or_home(tmp_path, monkeypatch):
    assert paths.shown(paths.REPO_ROOT / "build" / "cpp") == "build/cpp"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert paths.shown(tmp_path / "course" / "build") == "~/course/build"
    assert paths.shown("/elsewhere/build") == "/elsewhere/build"
