"""Chrome traces as the judge reads them (03.4 and 04.3): a learner's exported trace, parsed
here, and held to the operators of the judge's own profile of the same step."""

import json

from course_utils.grading import CheckFailed, expect

# The share of the operators of the judge's own profile of a step that the learner's trace of
# the same step must hold (03.4 and 04.3: a trace typed in by hand misses most of them).
OPERATORS_COVERED = 0.8


def expect_operators(events: list[dict], mine: set[str], step: str, what: str = "") -> None:
    """The trace's events hold the operators the judge's own profile of `step` recorded
    (`mine`), all but a few."""
    missing = sorted(mine - {e["name"] for e in events})
    expect(
        len(missing) <= (1 - OPERATORS_COVERED) * len(mine),
        f"the operators of {step}, as the check's own profile of it records {len(mine)}",
        f"a trace without {len(missing)} of them ({', '.join(missing[:3])}, ...): export the "
        "trace the profiler recorded, unchanged",
        what,
    )


def trace_events(text: str) -> list[dict]:
    """The complete events of a Chrome trace's text (as profiling.read_trace reads a file)."""
    try:
        events = json.loads(text)["traceEvents"]
        found = [e for e in events if type(e) is dict and e.get("ph") == "X" and "dur" in e]
        for e in found:
            float(e["dur"]), float(e["ts"]), str(e["name"])
    except (ValueError, KeyError, TypeError) as e:
        raise CheckFailed(
            f"a Chrome trace (JSON with traceEvents), as export_chrome_trace writes it; yours "
            f"could not be read ({type(e).__name__}: {str(e)[:80]})"
        ) from None
    return found
