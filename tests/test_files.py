import os

import pytest

from course_utils import files


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "out.bin"
    assert files.atomic_write(target, lambda f: f.write(b"first")) == target
    files.atomic_write(target, lambda f: f.write(b"second"))
    assert target.read_bytes() == b"second"
    assert [p.name for p in target.parent.iterdir()] == ["out.bin"]


def test_failed_write_keeps_old_file_and_no_temp(tmp_path):
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def crash(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        files.atomic_write(target, crash)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_atomic_write_fsyncs_the_file_and_then_its_folder(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(os.path.isdir(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    files.atomic_write_text(tmp_path / "ckpt.txt", "x")
    assert synced == [False, True]  # the data first, then the rename, through the folder


def test_write_text_if_changed_leaves_an_identical_file_untouched(tmp_path):
    source = tmp_path / "predict.cpp"
    assert files.write_text_if_changed(source, "int main() {}\n")
    os.utime(source, (1, 1))
    assert not files.write_text_if_changed(source, "int main() {}\n")
    assert source.stat().st_mtime == 1  # a build would not recompile it
    assert files.write_text_if_changed(source, "int main() { return 0; }\n")
    assert source.read_text() == "int main() { return 0; }\n"


def test_exclusive_lock_waits_for_the_holder_then_says_who_held_it(tmp_path):
    lock = tmp_path / ".folder.lock"
    with files.exclusive_lock(lock, timeout=1, holding="while testing"):
        # flock belongs to an open file: a second open, even in this process, must wait
        held_too_long = r"held .*\.folder\.lock for more than 0\.05 s while testing$"
        with pytest.raises(TimeoutError, match=held_too_long):
            with files.exclusive_lock(lock, timeout=0.05, holding="while testing"):
                pass
    with files.exclusive_lock(lock, timeout=0.05, holding="while testing") as held:
        assert held == lock  # let go when the first block ended
