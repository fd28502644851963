"""Lesson 06 graded in the sandbox against submissions that forge the evidence: a run's
history typed in by hand, with settings that make a reference trivial, and a pass line printed;
a training run in the kernel, stopped by a real SIGUSR1, its "stopped" record written through
the package's own writer; a rename that moves nothing but is the rename a check could look for
(06.2); and the kernel's run again with the records' pids rewritten. None earns a point: the
judge draws the run's seed and steps and trains the same run itself, hears from the program it
asks for (a history typed in comes from none), refuses records written from the kernel or by
processes the learner's function did not start, and sees each rename as
it happens. The last one also carries the flags an instructor reads (it writes the history and
calls the course's own training). One `course grade` run grades them all (module-scoped)."""

import pytest
from submissions import feedback, grade_lesson

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

TYPED = {  # a history and a checkpoint made by hand for a trivial run, and a pass line printed
    "06.4": """
def preempt_and_resume(ckpt_dir, seed, steps):
    import json
    from course_utils.models import TinyNet, parameter_hash
    folder = Path(ckpt_dir)
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    model = TinyNet()
    ck.save_checkpoint(ck.checkpoint_path(folder, 1), model=model, step=1)
    config = {"seed": 0, "max_steps": 1, "epochs": 1, "save_every": 1}
    history = [
        {"event": "start", "pid": 11, "resumed_from": 0, "config": config},
        {"event": "stopped", "pid": 11, "signal": "SIGUSR1", "step": 1, "requeued": False},
        {"event": "start", "pid": 12, "resumed_from": 1, "config": config},
        {"event": "finished", "pid": 12, "step": 1, "hash": parameter_hash(model)},
    ]
    (folder / "history.json").write_text(json.dumps(history))
    print("[06.4] passed: stopped by SIGUSR1, saved, resumed in a new process")
""",
}
KERNEL = {  # the run in the kernel, a real signal, the stop recorded by the package's writer
    "06.4": """
def preempt_and_resume(ckpt_dir, seed, steps):
    from course_utils.fault_tolerance import resumable
    config = resumable.Config(ckpt_dir=str(ckpt_dir), seed=seed, max_steps=steps, epochs=3,
                              save_every=3)
    resumable.train(config, stop_after=6, log=lambda msg: None)
    resumable.record(ckpt_dir, "stopped", signal="SIGUSR1", step=3, requeued=False)
    resumable.train(config, log=lambda msg: None)
""",
}
RENAME = {  # 06.2: the path written in place, then the rename a check looks for, moving nothing
    "06.2": """
def atomic_save(obj, path):
    import io
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    Path(path).write_bytes(buffer.getvalue())
    os.replace(path, path)
""",
}
PIDS = {  # the kernel's run, its records' pids rewritten
    "06.4": KERNEL["06.4"]
    + """
    import json
    path = Path(ckpt_dir) / "history.json"
    records = json.loads(path.read_text())
    for record, pid in zip(records, [11, 11, 12, 12]):
        record["pid"] = pid
    path.write_text(json.dumps(records))
""",
}
# The rename (06.2) rides with the typed history (06.4): one notebook fewer to run.
SUBMISSIONS = {"typed": TYPED | RENAME, "kernel": KERNEL, "pids": PIDS}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    return grade_lesson(tmp_path_factory.mktemp("grade06"), "06", SUBMISSIONS)


@pytest.mark.parametrize("learner", sorted(SUBMISSIONS))
def test_forged_evidence_earns_no_point(graded, learner):
    rows, out = graded
    row = rows[learner]
    assert row["sandbox"].startswith("bubblewrap"), row
    assert row["total"] == "0", feedback(out, learner)


def test_each_forgery_is_told_what_the_check_found(graded):
    _, out = graded
    assert "the check heard from no such program" in feedback(out, "typed")  # history typed in
    assert "got records written from this kernel" in feedback(out, "kernel")
    assert "got path modified and opened in place: write a temporary file" in feedback(out, "typed")
    # the pids rewritten change nothing: the program's own reports say who wrote the records
    assert "got records written from this kernel" in feedback(out, "pids")


def test_the_rewritten_records_carry_flags_too(graded):
    rows, _ = graded
    flags = rows["pids"]["flags"]
    assert "06.4: opens or removes files" in flags, flags
    assert "06.4: calls the course's own answer" in flags, flags
