"""runner/sandbox: the bwrap command line, the whitelist of what a submission sees, the probe.

No sandbox runs here (tests/integration/test_sandbox_runs.py runs them): these check the plain
descriptions the grader turns into a command.
"""

import os
import shutil
from pathlib import Path

import pytest

from course_utils.grading.runner import cgroups, limits, sandbox
from course_utils.paths import PACKAGE_DIR, REPO_ROOT

LAYOUT = sandbox.Layout(
    read_only=("/usr", "/opt/venv"),
    symlinks=(("usr/bin", "/bin"),),
    files=(("/host/run/nb.ipynb", "/tmp/grading/nb.ipynb"),),
    writable=(("/host/run/cells.jsonl", "/run/course/cells.jsonl"),),
    env={"HOME": "/tmp/grading", "B": "2"},
    max_disk=64 * limits.MiB,
)


def pairs(argv: list[str], option: str, arity: int = 2) -> list[tuple[str, ...]]:
    return [tuple(argv[i + 1 : i + 1 + arity]) for i, a in enumerate(argv) if a == option]


def test_bwrap_command_unshares_everything_and_clears_the_environment():
    argv = sandbox.bwrap_command(LAYOUT, ["python", "-c", "pass"], bwrap="/x/bwrap")
    assert argv[0] == "/x/bwrap"
    for option in (
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ):
        assert option in argv, option
    assert argv[argv.index("--uid") + 1] == str(sandbox.SANDBOX_UID)
    assert argv[-4:] == ["--", "python", "-c", "pass"]
    assert argv[-6:-4] == ["--chdir", "/tmp/grading"]
    assert pairs(argv, "--setenv") == [("B", "2"), ("HOME", "/tmp/grading")]


def test_bwrap_command_binds_only_what_the_layout_names():
    argv = sandbox.bwrap_command(LAYOUT, ["true"])
    assert pairs(argv, "--ro-bind") == [
        ("/usr", "/usr"),
        ("/opt/venv", "/opt/venv"),
        ("/host/run/nb.ipynb", "/tmp/grading/nb.ipynb"),
    ]
    assert pairs(argv, "--bind") == [("/host/run/cells.jsonl", "/run/course/cells.jsonl")]
    assert pairs(argv, "--symlink") == [("usr/bin", "/bin")]
    assert "--dev-bind" not in argv and "--share-net" not in argv
    # Sized tmpfs for the work folder and /dev/shm; /dev and / itself read-only after the binds.
    assert pairs(argv, "--tmpfs", 1) == [("/dev/shm",), ("/tmp",)]
    assert pairs(argv, "--size", 1) == [(str(64 * limits.MiB),)] * 2
    assert [argv[i - 2 : i] for i, a in enumerate(argv) if a == "--tmpfs"] == [
        ["--size", str(64 * limits.MiB)]
    ] * 2
    assert pairs(argv, "--remount-ro", 1) == [("/dev",), ("/",)]
    last_bind = max(i for i, a in enumerate(argv) if a in ("--bind", "--ro-bind"))
    assert argv.index("--remount-ro", argv.index("/dev") + 1) < last_bind < len(argv) - 1
    root_ro = [i for i, a in enumerate(argv) if a == "--remount-ro" and argv[i + 1] == "/"]
    assert root_ro[0] > last_bind


def test_read_only_paths_under_the_work_folder_are_bound_on_top_of_its_tmpfs():
    # A clone or venv under /tmp (CI clones there) must stay visible inside the sandbox.
    layout = sandbox.Layout(read_only=("/usr", "/tmp/clone/.venv"))
    argv = sandbox.bwrap_command(layout, ["true"])
    work_tmpfs = next(i for i, a in enumerate(argv) if a == "--tmpfs" and argv[i + 1] == "/tmp")
    first_bind = argv.index("--ro-bind")
    assert work_tmpfs < first_bind
    assert ("/tmp/clone/.venv", "/tmp/clone/.venv") in pairs(argv, "--ro-bind")


@pytest.mark.parametrize(
    "said, admins",
    [
        (
            "bwrap: No permissions to creating new namespace, likely because the kernel does not "
            "allow non-privileged user namespaces",
            True,
        ),
        ("bwrap: setting up uid map: Permission denied", True),
        ("bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted", True),
        ("prlimit: failed to execute /tmp/x/.venv/bin/python: No such file or directory", False),
        ("ModuleNotFoundError: No module named 'course_utils'", False),
    ],
)
def test_probe_fix_tells_a_refused_namespace_from_a_missing_path(said, admins):
    fix = sandbox.probe_fix(said)
    assert ("user namespaces" in fix) is admins
    assert ("whitelist" in fix) is not admins
    assert "--no-sandbox" in fix


def test_the_real_whitelist_hides_the_course_and_the_home():
    visible, links = sandbox.visible_paths()
    assert str(PACKAGE_DIR) in visible
    assert str(REPO_ROOT) not in visible and "/" not in visible
    hidden = [REPO_ROOT / "solutions", REPO_ROOT / "notebooks", REPO_ROOT / "tests", Path.home()]
    sandbox.check_hidden(visible, hidden)  # raises if a visible path holds one of them
    assert all(not link.startswith("/usr") for _, link in links)
    assert str(REPO_ROOT / "cpp") in visible  # lesson 07 builds against the C++ sources


def _link_chain(path: str) -> list[str]:
    """`path` and every link it goes through, to the file at the end."""
    chain = [path]
    while os.path.islink(chain[-1]):
        target = os.readlink(chain[-1])
        chain.append(os.path.normpath(os.path.join(os.path.dirname(chain[-1]), target)))
    return chain


def test_the_compilers_resolve_inside_the_sandbox():
    # Debian's c++ is /usr/bin/c++ -> /etc/alternatives/c++ -> /usr/bin/g++: lesson 07's builds
    # failed in the sandbox ("c++ not found on PATH") until /etc/alternatives was shown.
    visible, _ = sandbox.visible_paths()
    found = [shutil.which(tool) for tool in ("c++", "cc", "cmake")]
    if not any(found):
        pytest.skip("no compiler here to follow")
    for path in filter(None, found):
        for hop in _link_chain(path):
            assert sandbox._covered(hop, visible), f"{hop} (on the way to {path}) is not shown"


def test_check_hidden_refuses_a_path_that_holds_a_hidden_folder(tmp_path):
    (tmp_path / "solutions").mkdir()
    sandbox.check_hidden([str(tmp_path / "venv")], [tmp_path / "solutions"])
    with pytest.raises(ValueError, match=r"would show .* which holds .*solutions.* hidden"):
        sandbox.check_hidden([str(tmp_path)], [tmp_path / "solutions"])


def test_outermost_drops_paths_inside_others():
    assert sandbox._outermost(["/a/b", "/a", "/c", "/a/b/c", "/ab"]) == ["/a", "/c", "/ab"]


def test_sandbox_env_takes_nothing_from_the_grader(monkeypatch):
    monkeypatch.setenv("INSTRUCTOR_TOKEN", "secret")
    env = sandbox.sandbox_env("tok", 3)
    assert "INSTRUCTOR_TOKEN" not in env and "secret" not in env.values()
    assert env["HOME"] == sandbox.HOME and env["TMPDIR"] == sandbox.WORK
    assert env["PYTHONPATH"] == str(PACKAGE_DIR.parent)
    assert (env["COURSE_GRADE_RUN"], env["OMP_NUM_THREADS"]) == ("tok", "3")
    # lesson 07's builds: into the run's own tmpfs, against the read-only sources
    assert env["COURSE_BUILD_DIR"] == sandbox.BUILD and sandbox.BUILD.startswith(sandbox.WORK)
    assert env["COURSE_CPP_DIR"] == str(REPO_ROOT / "cpp")


def test_the_graders_own_programs_are_shown_read_only_once_built(tmp_path, monkeypatch):
    """Lesson 07's runs use the course's programs the grader built (lesson07.prepare_runs)
    instead of building them cold, each in its own run."""
    from course_utils import cpp

    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    assert sandbox.course_programs() == []
    assert cpp.PREBUILT_VARIABLE not in sandbox.sandbox_env("tok", 2)
    (tmp_path / "cpp").mkdir()
    for name in cpp.PROGRAMS:
        (tmp_path / "cpp" / name).write_text("")
    assert str(tmp_path / "cpp") in sandbox.visible_paths()[0]
    assert sandbox.sandbox_env("tok", 2)[cpp.PREBUILT_VARIABLE] == str(tmp_path / "cpp")


def test_identity_files_name_only_the_sandbox_user(tmp_path):
    files = dict(
        (inside, Path(host).read_text()) for host, inside in sandbox.identity_files(tmp_path)
    )
    assert files["/etc/passwd"].count("\n") == 1 and "learner:x:65534" in files["/etc/passwd"]
    assert sandbox.HOSTNAME in files["/etc/hosts"]


def test_limit_command_sets_each_limit_and_leaves_out_zeros():
    assert sandbox.limit_command(64, 2**30, 10, 30, "/usr/bin/prlimit") == [
        "/usr/bin/prlimit",
        "--core=0",
        "--nproc=64",
        "--as=1073741824",
        "--fsize=10",
        "--cpu=30",
        "--",
    ]
    assert sandbox.limit_command(0, 0, 0, 0, "prlimit") == ["prlimit", "--core=0", "--"]


def test_problem_names_the_fix_when_bwrap_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(tmp_path / "no-bwrap"))
    why = sandbox.problem(64)
    assert "not found COURSE_BWRAP=" in why
    assert "apt-get install bubblewrap" in why and "--no-sandbox" in why


def test_problem_as_root_without_a_pids_cgroup_names_the_fix(monkeypatch):
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: "/bin/true")
    monkeypatch.setattr(cgroups, "nproc_counts", lambda: False)
    monkeypatch.setattr(cgroups, "pids_cgroup_parent", lambda: None)
    why = sandbox.problem(64)
    assert "root ignores RLIMIT_NPROC" in why and "--max-procs 0" in why
