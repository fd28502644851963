"""runner/cgroups: where a run's pids cgroup goes, from /proc's text; how the limit is kept."""

from pathlib import Path

from course_utils.grading.runner import cgroups

CGROUP_V1 = "9:name=systemd:/\n8:pids:/job_7\n4:memory:/x\n0::/\n"
MOUNTINFO = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "42 31 0:39 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)


def test_pids_cgroup_candidates_v1_and_v2():
    found = cgroups.pids_cgroup_candidates(CGROUP_V1, MOUNTINFO, lambda folder: "")
    assert found == [Path("/sys/fs/cgroup/pids/job_7")]
    v2_only = "0::/user.slice/grader\n"
    mounts = "42 31 0:39 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
    enabled = cgroups.pids_cgroup_candidates(v2_only, mounts, lambda folder: "cpu pids")
    assert enabled == [Path("/sys/fs/cgroup/user.slice/grader")]
    assert cgroups.pids_cgroup_candidates(v2_only, mounts, lambda folder: "cpu") == []


def test_process_cap_kind(monkeypatch):
    monkeypatch.setattr(cgroups, "nproc_counts", lambda: True)
    assert cgroups.process_cap_kind(64) == "RLIMIT_NPROC"
    assert cgroups.process_cap_kind(0) == "no limit"
    monkeypatch.setattr(cgroups, "nproc_counts", lambda: False)  # root
    monkeypatch.setattr(cgroups, "pids_cgroup_parent", lambda: Path("/sys/fs/cgroup/pids"))
    assert cgroups.process_cap_kind(64) == "pids cgroup"
