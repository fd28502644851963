"""staging: where node-local disk is, once-per-node unpacking, reading, what staging saves
(lesson 10). Real files in tmp_path; no process is started (the ranks' concurrency is tested
in tests/integration/test_lab_local.py and test_lab_slurm.py)."""

import json
import os
from pathlib import Path

import pytest

from course_utils.batch import JOB_VARIABLE
from course_utils.lab import staging
from course_utils.ranks import NODE_VARIABLE, node_name


def _archive(tmp_path: Path, files: int = 5) -> Path:
    folder = tmp_path / "shared" / "images"
    folder.mkdir(parents=True)
    for i in range(files):
        (folder / f"{i}.bin").write_bytes(bytes([i]) * (100 + i))
    return staging.make_archive(folder, tmp_path / "shared" / "images.tar")


def test_local_base_prefers_slurm_tmpdir_then_tmpdir_then_tmp():
    both = {"SLURM_TMPDIR": "/localscratch/job7", "TMPDIR": "/scratch/tmp"}
    assert staging.local_base(both) == staging.Base(Path("/localscratch/job7"), "SLURM_TMPDIR")
    assert staging.local_base({"TMPDIR": "/scratch/tmp"}).source == "TMPDIR"
    assert staging.local_base({"SLURM_TMPDIR": "", "TMPDIR": ""}) == staging.Base(
        Path("/tmp"), "/tmp"
    )
    assert str(staging.local_base({})) == "/tmp (neither SLURM_TMPDIR nor TMPDIR is set)"
    assert str(staging.local_base({"TMPDIR": "/x"})) == "/x (from $TMPDIR)"


def test_a_relative_base_is_refused_with_the_variable_named():
    with pytest.raises(ValueError, match=r"TMPDIR='scratch' is not an absolute path.*unset TMPDIR"):
        staging.local_base({"TMPDIR": "scratch"})


def test_node_name_and_folder_per_job_and_node():
    env = {"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "cn3", "TMPDIR": "/t"}
    assert node_name(env) == "cn3"
    assert staging.stage_folder(env) == Path("/t/course-lab-42/cn3")
    emulated = {**env, NODE_VARIABLE: "node1"}  # the local emulation of 2 nodes
    assert staging.stage_folder(emulated) == Path("/t/course-lab-42/node1")
    local = {JOB_VARIABLE: "local-9-1", NODE_VARIABLE: "node0", "TMPDIR": "/t"}
    assert staging.stage_folder(local) == Path("/t/course-lab-local-9-1/node0")


def test_stage_unpacks_once_per_node_and_every_rank_gets_the_copy(tmp_path):
    archive = _archive(tmp_path)
    env = {"SLURM_JOB_ID": "7", "SLURMD_NODENAME": "cn1", "TMPDIR": str(tmp_path / "local")}
    first, second = staging.stage(archive, env), staging.stage(archive, env)
    assert (first.copied, second.copied) == (True, False)
    assert first.path == second.path == tmp_path / "local" / "course-lab-7" / "cn1"
    assert (first.files, first.nbytes) == (second.files, second.nbytes) == (5, sum(range(100, 105)))
    assert (first.path / "images" / "3.bin").read_bytes() == bytes([3]) * 103
    other = staging.stage(archive, {**env, "SLURMD_NODENAME": "cn2"})
    assert other.copied and other.path.name == "cn2"  # another node: its own copy
    assert first.as_dict()["base_from"] == "TMPDIR" and first.as_dict()["copied"] is True


def test_a_copy_left_without_its_marker_is_made_again(tmp_path):
    archive = _archive(tmp_path)
    env = {"SLURM_JOB_ID": "8", "SLURMD_NODENAME": "cn1", "TMPDIR": str(tmp_path / "local")}
    broken = staging.stage_folder(env) / "images"
    broken.mkdir(parents=True)
    (broken / "0.bin").write_bytes(b"half")  # a rank died while unpacking: no marker
    staged = staging.stage(archive, env)
    assert staged.copied and (staged.path / "images" / "0.bin").read_bytes() == bytes([0]) * 100


def test_stage_refuses_a_missing_archive(tmp_path):
    with pytest.raises(ValueError, match=r"no archive at .*missing\.tar: write it first"):
        staging.stage(tmp_path / "missing.tar", {"TMPDIR": str(tmp_path)})


def test_the_last_rank_of_a_node_removes_its_copy(tmp_path):
    archive = _archive(tmp_path)
    env = {"SLURM_JOB_ID": "9", "SLURMD_NODENAME": "cn1", "TMPDIR": str(tmp_path / "local")}
    ranks = [staging.stage(archive, env) for _ in range(3)]
    assert [staging.release(s, ranks_on_node=3) for s in ranks] == [False, False, True]
    assert not (tmp_path / "local" / "course-lab-9").exists()


def test_reading_small_files_and_one_archive(tmp_path):
    archive = _archive(tmp_path, files=4)
    files = staging.read_files(tmp_path / "shared" / "images", repeats=2)
    assert (files.files, files.nbytes) == (4, sum(range(100, 104))) and files.seconds > 0
    whole = staging.read_archive(archive, repeats=2, chunk=64)
    assert (whole.files, whole.nbytes) == (1, archive.stat().st_size) and whole.mb_per_s > 0


def test_staging_saving_is_reads_saved_minus_the_copy():
    assert staging.staging_saving(0.5, 0.1, 1.0, reads=20) == pytest.approx(7.0)
    # a node of 2 ranks in a job of 4 reads half the data set per epoch (DistributedSampler):
    # 10 epochs are 5 reads of it, not 10 x 2
    half = staging.node_share(2, 4)
    assert half == 0.5 and staging.staging_saving(0.5, 0.1, 1.0, 10 * half) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="ranks_on_node=3 must be between 1 and world_size=2"):
        staging.node_share(3, 2)
    assert staging.staging_saving(0.1, 0.1, 0.3, reads=20) == pytest.approx(-0.3)  # no gain
    with pytest.raises(ValueError, match="must not be negative"):
        staging.staging_saving(0.1, 0.1, 0.3, reads=-1)


def test_results_of_the_staging_program(tmp_path):
    for rank, (node, copied) in enumerate([("cn1", True), ("cn1", False), ("cn2", True)]):
        result = {"rank": rank, "node": node, "copied": copied}
        if not copied:
            result["readings"] = {"shared files": {"files": 2, "bytes": 2.5e6, "seconds": 0.5}}
        (tmp_path / f"rank{rank}.json").write_text(json.dumps(result))
    results = staging.load_results(tmp_path)
    assert [r["rank"] for r in results] == [0, 1, 2]
    assert staging.copies_per_node(results) == {"cn1": 1, "cn2": 1}
    table = staging.readings_table(results)
    assert "cn1   shared files      2  2.5  500.0     5" in table
    with pytest.raises(ValueError, match="no rank\\*.json"):
        staging.load_results(tmp_path / "empty")


def test_make_archive_is_written_whole(tmp_path):
    archive = _archive(tmp_path)
    assert archive.is_file() and not list(archive.parent.glob(f".{archive.name}*"))
    assert os.path.getsize(archive) > 500


def test_the_job_variables_a_learners_function_gets_on_either_route():
    slurm = {"SLURM_JOB_ID": "42", "SLURMD_NODENAME": "cn3", "PATH": "/bin"}
    assert staging.job_environ(slurm) == slurm  # a Slurm task: as it is
    local = {JOB_VARIABLE: "local-9-1", NODE_VARIABLE: "node1", "RANK": "3", "LOCAL_RANK": "1"}
    got = staging.job_environ(local)
    assert (got["SLURM_JOB_ID"], got["SLURMD_NODENAME"]) == ("local-9-1", "node1")
    assert (got["SLURM_PROCID"], got["SLURM_LOCALID"]) == ("3", "1")


def test_a_copys_digest_names_every_file_and_its_contents(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    files = {"a.bin": b"1" * 10, "b.bin": b"2" * 20}
    for name, data in files.items():
        (folder / name).write_bytes(data)
    assert staging.content_digest(folder) == staging.bytes_digest(files)
    (folder / "b.bin").write_bytes(b"2" * 19)  # a copy cut short
    assert staging.content_digest(folder) != staging.bytes_digest(files)
    assert staging.content_digest(tmp_path / "none") is None and staging.bytes_digest({}) is None


def test_what_counts_as_reading_the_archive():
    names = {"/data/images.tar"}
    assert staging.reads_archive("open", ("/data/images.tar", "rb", 0), names)
    assert staging.reads_archive("open", (b"/data/images.tar", "r", 0), names)
    assert not staging.reads_archive("open", ("/data/other", "rb", 0), names)
    assert not staging.reads_archive("open", (3, "rb", 0), names)  # a descriptor
    assert staging.reads_archive("os.system", (b"tar xf /data/images.tar -C /t",), names)
    spawn = ("tar", ["tar", "xf", "/data/images.tar"], None, None)
    assert staging.reads_archive("subprocess.Popen", spawn, names)
    assert not staging.reads_archive("os.listdir", ("/data/images.tar",), names)
