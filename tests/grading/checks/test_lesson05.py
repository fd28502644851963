"""Lesson 05 checkers: pass on the reference, fail on a known-wrong answer, stub: not attempted."""

from course_utils.grading import NOT_ATTEMPTED, run_check


def _stub(*args):
    raise NotImplementedError("Exercise 05.k")


def ranks_from_slurm(environ):
    return tuple(int(environ[k]) for k in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"))


def test_05_1():
    assert run_check("05.2", ranks_from_slurm).passed
    uses_node_id = run_check(
        "05.2", lambda e: (int(e["SLURM_PROCID"]), int(e["SLURM_NODEID"]), int(e["SLURM_NTASKS"]))
    )
    assert uses_node_id.verdict == "failed"
    assert "expected (5, 1, 8), got (5, 2, 8)" in uses_node_id.message
    assert run_check("05.2", _stub).verdict == NOT_ATTEMPTED


def epoch_orders(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def test_05_2():
    assert run_check("05.1", epoch_orders).passed
    no_set_epoch = run_check("05.1", lambda s, n: [list(s) for _ in range(n)])
    assert no_set_epoch.verdict == "failed"
    assert no_set_epoch.message == (
        "expected a different order in epoch 0 and epoch 1, got the same order "
        "(call sampler.set_epoch(epoch) at the start of each epoch)"
    )
    assert run_check("05.1", _stub).verdict == NOT_ATTEMPTED


def test_05_3():
    assert run_check("05.3", lambda lr, b0, b, w: lr * b * w / b0).passed
    forgets_world = run_check("05.3", lambda lr, b0, b, w: lr * b / b0)
    assert forgets_world.verdict == "failed"
    assert "expected 0.2, got 0.025" in forgets_world.message
    assert run_check("05.3", _stub).verdict == NOT_ATTEMPTED
