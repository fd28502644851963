"""course_utils.paths: the repository's folders and the course's commit (git answered here)."""

from course_utils import paths, processes


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
