"""Lesson 06 checkers: pass on the reference, fail with a useful message on known-wrong answers.

06.4's reference answer starts the program twice: it passes in the solutions lane (forged runs
are graded in the sandbox in tests/integration/test_grader_lesson06.py). Here its checks run on
records given to them and on runs in this process, which the check refuses (records written from
the kernel); what a killed run leaves is tests/integration/test_fault_tolerance.py's."""

import io
import json
import os
import signal
import tempfile
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils.checkpoint import unwrap_model
from course_utils.fault_tolerance.resumable import EX_TEMPFAIL, Config, record, train
from course_utils.grading import CheckFailed, run_check
from course_utils.grading.checks import lesson06_resume
from course_utils.grading.checks.lesson06_resume import final_hash, uninterrupted
from course_utils.grading.grader.plan import review_flags
from course_utils.grading.notebooks import course_meta
from course_utils.paths import REPO_ROOT


def stub(*args):
    raise NotImplementedError("Exercise 06.x")


# ---- 06.1 ---------------------------------------------------------------------------------


def make_checkpoint(model, optimizer, scheduler, epoch, step):
    return {
        "model": unwrap_model(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "epoch": epoch,
        "step": step,
        "rng": torch.get_rng_state(),
    }


def test_make_checkpoint():
    done = run_check("06.1", make_checkpoint)
    assert done.passed, done.message
    assert run_check("06.1", stub).verdict == "not attempted yet"


def test_a_checkpoint_of_the_wrapper_fails():
    wrapped = run_check("06.1", lambda m, *a: {**make_checkpoint(m, *a), "model": m.state_dict()})
    assert wrapped.verdict == "failed"
    assert wrapped.message == (
        "make_checkpoint of a model wrapped by torch.compile: model: expected model keys "
        "['0.weight', '0.bias'] (unwrap the model first), got "
        "['_orig_mod.0.weight', '_orig_mod.0.bias']"
    )
    module = run_check("06.1", lambda m, *a: {**make_checkpoint(m, *a), "model": unwrap_model(m)})
    plain = "expected 'model' as plain data (a state_dict(), a number, a tensor), got a Sequential"
    assert module.message.endswith(plain)


def test_a_checkpoint_without_state_or_with_another_rng_fails():
    no_rng = run_check(
        "06.1", lambda *a: {k: v for k, v in make_checkpoint(*a).items() if k != "rng"}
    )
    assert no_rng.message.endswith("got no rng")

    def later_rng(*args):  # the RNG state after drawing: not the state at the time of the call
        torch.rand(1)
        return make_checkpoint(*args)

    assert "rng: expected torch.get_rng_state() at the time of the call, got another state" in (
        run_check("06.1", later_rng).message
    )

    def groups_only(model, optimizer, *rest):  # the learning rate, without the momentum
        return {**make_checkpoint(model, optimizer, *rest), "optimizer": optimizer.param_groups}

    groups = run_check("06.1", groups_only)
    assert "optimizer: expected optimizer.state_dict(), with its momentum buffers" in (
        groups.message
    )


# ---- 06.2 ---------------------------------------------------------------------------------


def atomic_save(obj, path):
    tmp = f"{path}.tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


WHAT = "atomic_save(state, path) over an existing checkpoint: "


def test_atomic_save():
    assert run_check("06.2", atomic_save).passed
    assert run_check("06.2", stub).verdict == "not attempted yet"
    plain = run_check("06.2", lambda obj, path: torch.save(obj, path))
    assert plain.message == (
        WHAT + "expected path untouched until the rename (the old checkpoint intact while the "
        "new one is written), got path modified and opened in place: write a temporary file, "
        "not path"
    )


def test_a_temporary_file_in_another_folder_fails():
    def elsewhere(obj, path):  # not atomic where /tmp is another file system than the folder
        tmp = os.path.join(tempfile.mkdtemp(), "x.tmp")
        torch.save(obj, tmp)
        os.replace(tmp, path)

    wrong = run_check("06.2", elsewhere)
    assert wrong.message == (
        WHAT + "expected the temporary file in the folder of path (a rename is atomic within "
        "one file system), got a file renamed from another folder"
    )


def test_a_rename_that_moves_nothing_fails():
    """The path written in place, then renamed onto itself: the rename a check that looks only
    for os.replace(..., path) in the learner's process would accept; the file system saw the
    path written."""

    def in_place(obj, path):
        buffer = io.BytesIO()
        torch.save(obj, buffer)  # fails before the file is touched: the previous one stays
        Path(path).write_bytes(buffer.getvalue())
        os.replace(path, path)

    wrong = run_check("06.2", in_place)
    assert "got path modified and opened in place" in wrong.message


def test_a_rename_of_a_file_never_written_beside_it_fails():
    def linked(obj, path):  # a file made elsewhere, hard-linked beside path, then renamed
        made = Path(tempfile.mkdtemp()) / "made.pt"
        torch.save(obj, made)
        os.link(made, f"{path}.new")
        os.replace(f"{path}.new", path)

    wrong = run_check("06.2", linked)
    assert wrong.message == (
        WHAT + "expected the renamed file written and closed before the rename (complete), got "
        "'ckpt.pt.new' renamed without being written and closed in the folder first"
    )


def test_a_path_written_before_its_rename_or_renamed_unfinished_fails():
    def both(obj, path):  # the path itself written first: a crash there breaks it
        torch.save(obj, path)
        atomic_save(obj, path)

    assert "got path modified and opened in place" in run_check("06.2", both).message

    def unfinished(obj, path):  # renamed before its last bytes are written
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        data, tmp = buffer.getvalue(), f"{path}.tmp"
        with open(tmp, "wb") as f:
            f.write(data[:100])
            f.flush()
            os.replace(tmp, path)
            f.write(data[100:])

    wrong = run_check("06.2", unfinished)
    assert "got path modified in place" in wrong.message


# ---- 06.3 ---------------------------------------------------------------------------------


def test_safe_load():
    assert run_check("06.3", lambda p: torch.load(p, map_location="cpu", weights_only=True)).passed
    assert run_check("06.3", stub).verdict == "not attempted yet"
    unsafe = run_check("06.3", lambda p: torch.load(p, map_location="cpu", weights_only=False))
    assert unsafe.verdict == "failed"
    assert unsafe.message == (
        "expected the malicious file refused, got its code ran (it created a folder); "
        "load with weights_only=True"
    )


def test_code_that_ran_and_cleaned_up_after_itself_still_ran():
    def tidy(p):  # runs the file's code, then removes what it made
        loaded = torch.load(p, map_location="cpu", weights_only=False)
        for made in Path(p).parent.iterdir():
            if made.is_dir():
                made.rmdir()
        return loaded

    wrong = run_check("06.3", tidy)
    assert wrong.message.endswith(
        "got its code ran (it created a folder); load with weights_only=True"
    )


def test_a_load_without_map_location_fails_on_a_file_saved_on_a_gpu():
    """On a CPU node a checkpoint from a GPU job does not load without map_location (on a GPU
    node it would load onto cuda:0); the check's file is tagged cuda:0 as a GPU job's is."""
    wrong = run_check("06.3", lambda p: torch.load(p, weights_only=True))
    assert wrong.message.startswith(
        "safe_load of a checkpoint saved on a GPU (its tensors tagged cuda:0): expected the dict "
        "loaded onto the CPU (map_location='cpu': this node may have no GPU), got RuntimeError: "
        "Attempting to deserialize object on a CUDA device"
    )


# ---- 06.4 ---------------------------------------------------------------------------------

SEED, STEPS = 7, 18  # what a check would draw


def _settings(folder, seed=SEED, steps=STEPS):
    return Config(ckpt_dir=str(folder), seed=seed, max_steps=steps, epochs=3, save_every=3)


def _signal_at_step(n):
    """A log that sends this process SIGUSR1 after step n, as Slurm would (no child process)."""

    def log(msg):
        if msg.startswith(f"step {n} "):
            os.kill(os.getpid(), signal.SIGUSR1)

    return log


def _signalled_run(folder, seed=SEED, steps=STEPS):
    try:
        train(_settings(folder, seed, steps), log=_signal_at_step(5))
    except SystemExit as e:  # the program's exit: saved, "run again to resume"
        assert e.code == EX_TEMPFAIL


def in_the_kernel(folder, seed, steps):
    """A run in the kernel, stopped by a real SIGUSR1 and resumed, its records written
    through the package's own writer: everything right but the processes."""
    _signalled_run(folder, seed, steps)
    train(_settings(folder, seed, steps), log=lambda msg: None)


def test_a_run_in_the_kernel_is_refused():
    wrong = run_check("06.4", in_the_kernel, seed=SEED, steps=STEPS)
    assert wrong.verdict == "failed"
    assert wrong.message == (
        "expected records written by the program (python -m course_utils.jobs.resumable_train) "
        "in processes of its own, got records written from this kernel: run the program, do "
        "not train or write them here"
    )


def test_without_a_run_the_check_is_not_attempted():
    nothing = run_check("06.4", lambda folder, seed, steps: None, seed=SEED, steps=STEPS)
    assert nothing.verdict == "not attempted yet"
    assert nothing.message.startswith("run the program first: preempt_and_resume(ckpt_dir, seed")
    assert run_check("06.4", stub).verdict == "not attempted yet"


def _history(folder, pids=(101, 101, 202, 202)) -> list[dict]:
    """The records of a signalled and resumed run, as if each run had been a process of its
    own (the pids replaced)."""
    records = json.loads((Path(folder) / "history.json").read_text())
    return [{**r, "pid": pid} for r, pid in zip(records, pids, strict=True)]


def test_records_of_a_stopped_and_resumed_run_pass(tmp_path):
    in_the_kernel(tmp_path, SEED, STEPS)
    history = _history(tmp_path)
    assert lesson06_resume.verify_runs(history, os.getpid(), SEED, STEPS)["signal"] == "SIGUSR1"
    final = (tmp_path / f"ckpt-{STEPS:08d}.pt").read_bytes()
    assert final_hash(final) == uninterrupted(SEED, STEPS)
    other = uninterrupted(SEED + 1, STEPS)
    assert final_hash(final) != other, "another seed ends elsewhere"


def _refused(history, pid=None, seed=SEED, steps=STEPS) -> str:
    with pytest.raises(CheckFailed) as e:
        lesson06_resume.verify_runs(history, pid or os.getpid(), seed, steps)
    return str(e.value)


def test_records_with_other_settings_than_the_checks_fail(tmp_path):
    """Forged evidence: a history typed in with settings that make the reference trivial; the
    check's own draw decides the settings."""
    in_the_kernel(tmp_path, 0, 6)
    message = _refused(_history(tmp_path, pids=(101, 101, 202, 202)))
    assert message.startswith(
        "expected runs with --seed 7 --max-steps 18 --epochs 3 (what the check gave), got a run "
        "with {'seed': 0, 'max_steps': 6, 'epochs': 3}"
    ), message


def test_records_without_a_stop_or_a_new_process_fail(tmp_path):
    train(_settings(tmp_path), log=lambda msg: None)
    unsignalled = _refused(_history(tmp_path, pids=(101, 101)))
    assert unsignalled == (
        "expected a run stopped by a signal (SIGUSR1, as Slurm sends) that saved and exited, "
        "got runs start@0, finished@18 (send the signal while it trains)"
    )
    in_the_kernel(tmp_path / "again", SEED, STEPS)
    same = _refused(_history(tmp_path / "again", pids=(101, 101, 101, 101)))
    assert same == (
        "expected the resumed run in a new process, as a requeued job starts one, got the same "
        "process as the stopped run"
    )
    record(tmp_path / "again", "stopped", signal="SIGUSR1", step=3, requeued=False)
    late = _history(tmp_path / "again", pids=(101, 101, 202, 202, 303))
    assert "expected the resumed run to finish at step 18" in _refused(late)


def test_records_of_processes_the_function_did_not_start_fail(tmp_path):
    """Pids typed into the records: the probe lists the processes the function started."""
    in_the_kernel(tmp_path, SEED, STEPS)
    history = _history(tmp_path)
    assert lesson06_resume.verify_runs(history, os.getpid(), SEED, STEPS, started=[101, 202, 303])
    typed = _refused_started(history, started=[303, 404])
    assert typed == (
        "expected records written by the processes your function started during the check, got "
        "records of processes it did not start"
    )


def _refused_started(history, started) -> str:
    with pytest.raises(CheckFailed) as e:
        lesson06_resume.verify_runs(history, os.getpid(), SEED, STEPS, started=started)
    return str(e.value)


def test_a_stop_written_by_another_process_than_its_run_fails(tmp_path):
    in_the_kernel(tmp_path, SEED, STEPS)
    forged = _refused(_history(tmp_path, pids=(101, 999, 202, 202)))
    assert forged.startswith("expected the stop recorded by the run that started before it")


def test_a_resume_that_is_not_exact_ends_elsewhere(tmp_path):
    _signalled_run(tmp_path)
    train(_settings(tmp_path), restore_rng=False, log=lambda msg: None)
    lesson06_resume.verify_runs(_history(tmp_path), os.getpid(), SEED, STEPS)  # the records hold
    final = (tmp_path / f"ckpt-{STEPS:08d}.pt").read_bytes()
    assert final_hash(final) != uninterrupted(SEED, STEPS)


def test_the_draws_stay_in_range():
    draws = {lesson06_resume.draw_run() for _ in range(20)}
    assert len(draws) > 1
    assert all(1 <= seed < 100_000 and 16 <= steps <= 24 for seed, steps in draws)


# ---- held-out cases ------------------------------------------------------------------------


def test_06_1_held_out_cases_fail_the_visible_epoch_and_step_typed_in(held_out_catches):
    def typed_in(model, optimizer, scheduler, epoch, step):
        return make_checkpoint(model, optimizer, scheduler, 2, 17)

    failure = held_out_catches("06.1", make_checkpoint, typed_in)
    assert failure.endswith("got epoch 2, step 17"), failure


# ---- review flags --------------------------------------------------------------------------


def test_the_solution_raises_no_flag_and_the_course_s_own_answers_do():
    """06.2 and 06.4 must open files, start processes and signal them: not flagged for it. The
    course's own writer for 06.2, and a run in the kernel for 06.4, are."""
    solution = nbformat.read(REPO_ROOT / "solutions" / "06_checkpointing.ipynb", as_version=4)
    answers = {
        course_meta(c)["exercise"]: c.source
        for c in solution.cells
        if course_meta(c).get("role") == "exercise"
    }
    assert sorted(answers) == ["06.1", "06.2", "06.3", "06.4"]
    assert review_flags(answers) == []
    lazy = {
        "06.2": "def atomic_save(obj, path):\n    ck.atomic_torch_save(obj, path)",
        "06.4": "def preempt_and_resume(ckpt_dir, seed, steps):\n    train(Config(ckpt_dir))",
    }
    assert review_flags(lazy) == [
        "06.2: calls the course's own answer (atomic_torch_save\\()",
        "06.4: calls the course's own answer (\\btrain\\()",
    ]
