"""Lesson 07 checkers: each passes on the reference answer, fails on a wrong one, and reports
'not attempted yet' on a stub."""

import re

import pytest
import torch

from course_utils.grading import FAILED, NOT_ATTEMPTED, PASSED, run_check


def export_dynamic(model, example):
    batch = torch.export.Dim("batch", min=1, max=1024)
    return torch.export.export(model, (example,), dynamic_shapes=({0: batch},))


def export_static(model, example):
    return torch.export.export(model, (example,))


def gated_cond(x):
    return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))


def gated_if(x):
    return x * 2 if x.sum() > 0 else x - 1


def kernels_available(capability, arch_list):
    major, minor = capability
    for arch in arch_list:
        kind, _, number = arch.partition("_")
        specific = number.endswith("a")
        number = int(number.rstrip("a"))
        if kind == "sm" and specific and number == major * 10 + minor:
            return True
        if kind == "sm" and not specific and number // 10 == major and number % 10 <= minor:
            return True
        if kind == "compute" and number <= major * 10 + minor:
            return True
    return False


def exact_match_only(capability, arch_list):
    return f"sm_{capability[0]}{capability[1]}" in arch_list


def stub(*args):
    raise NotImplementedError("Exercise 07.k")


@pytest.mark.parametrize(
    "exercise_id, answer",
    [("07.1", export_dynamic), ("07.2", gated_cond), ("07.3", kernels_available)],
)
def test_reference_answers_pass(exercise_id, answer):
    result = run_check(exercise_id, answer)
    assert result.verdict == PASSED, result.message


@pytest.mark.parametrize(
    "exercise_id, answer, message",
    [
        ("07.1", export_static, r"batch 3: expected the program to accept any batch size"),
        ("07.2", gated_if, r"expected torch.export to capture gated, got .*use torch.cond"),
        (
            "07.3",
            exact_match_only,
            r"kernels_available\(\(8, 6\), \['sm_80'\]\): expected True, got False",
        ),
    ],
)
def test_wrong_answers_fail_with_a_useful_message(exercise_id, answer, message):
    result = run_check(exercise_id, answer)
    assert result.verdict == FAILED
    assert re.search(message, result.message), result.message


@pytest.mark.parametrize("exercise_id", ["07.1", "07.2", "07.3"])
def test_stubs_are_not_attempted(exercise_id):
    assert run_check(exercise_id, stub).verdict == NOT_ATTEMPTED


# ---- held-out cases ------------------------------------------------------------------------


def test_07_3_held_out_cases_fail_a_table_of_the_visible_answers(held_out_catches):
    from course_utils.grading.checks.lesson07 import ARCH_CASES

    visible = {(cap, tuple(archs)): want for cap, archs, want in ARCH_CASES}

    def table(capability, arch_list):  # right on every visible case, and only there
        return visible.get((tuple(capability), tuple(arch_list)), False)

    failure = held_out_catches("07.3", kernels_available, table)
    assert re.fullmatch(r"kernels_available\(\(\d+, \d+\), \[.*\]\): expected True, got False",
                        failure), failure  # fmt: skip
