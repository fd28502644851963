"""Checkers of lesson 00, setup and environment."""

import shlex

from course_utils.grading import CheckFailed, call_answer, exercise, expect


@exercise("00.1", "add torchvision on top of a module's PyTorch")
def check_pip_command(command):
    """`command` is the learner's function returning the pip command line."""
    got = call_answer(command)
    expect(isinstance(got, str), "a string with a pip command", type(got).__name__)
    words = shlex.split(got)
    expect("pip" in " ".join(words[:3]) and "install" in words, "a `pip install ...` command", got)
    expect(any(w.startswith("torchvision") for w in words), "torchvision to be installed", got)
    expect(
        "--no-deps" in words,
        "--no-deps, so pip leaves the module's torch alone",
        f"{got!r} (without --no-deps pip may download a second, different torch)",
    )
    expect(
        not any(w == "torch" or w.startswith(("torch=", "torch<", "torch>")) for w in words),
        "torch itself not named (the module provides it)",
        got,
    )
    return "torchvision goes in without replacing the module's torch"


@exercise("00.3", "read the blocking problems from `course doctor --json`")
def check_blocking(blocking_problems):
    report = [
        {"topic": "python", "value": "3.11.7", "status": "ok", "advice": ""},
        {
            "topic": "gpu 0",
            "value": "NVIDIA X, compute capability 12.1",
            "status": "error",
            "advice": "install a build that includes sm_121",
        },
        {
            "topic": "cpu threads",
            "value": "allocated CPUs 4, torch threads 64",
            "status": "warn",
            "advice": "configure_threads()",
        },
        {"topic": "torchvision", "value": "import failed", "status": "error", "advice": "..."},
    ]
    got = call_answer(blocking_problems, report)
    expect(isinstance(got, list), "a list of topics", type(got).__name__)
    expect(
        got == ["gpu 0", "torchvision"],
        "['gpu 0', 'torchvision'] (status 'error' only, in order)",
        got,
    )
    expect(call_answer(blocking_problems, []) == [], "[] for an empty report", "something else")
    return "only 'error' findings block; 'warn' deserves a look"


@exercise("00.2", "does this torchvision belong to this PyTorch?")
def check_pairing(compatible):
    cases = {
        ("2.14.1", "0.29.1"): True,
        ("2.11.0+cu130", "0.26.0+cu130"): True,
        ("2.6.0", "0.21.0"): True,
        ("2.14.1", "0.24.1"): False,
        ("2.9.1", "0.29.1"): False,
    }
    for (torch_v, tv_v), want in cases.items():
        got = call_answer(compatible, torch_v, tv_v)
        if got is not want:
            raise CheckFailed(f"compatible({torch_v!r}, {tv_v!r}): expected {want}, got {got!r}")
    return "torchvision 0.(N+15) pairs with torch 2.N"
