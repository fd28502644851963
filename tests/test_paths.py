"""course_utils.paths: the course's own files, found through the installed package."""

import pytest

from course_utils import paths


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
