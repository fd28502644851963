"""How many GPUs to ask for: one decision, with the deadline and the efficiency both in it.

Taught in lesson 08 (from a table of measured throughputs) and applied in lesson 10 (to the
learner's own scaling runs). The two questions a job's owner has, "will it finish in time?" and
"is each GPU still worth its hours?", are answered together:

- a GPU count qualifies when its parallel efficiency, rate(n) / (n x rate(1)), is at least the
  floor (80% by default): below it, each added GPU buys less than most of a GPU's work, and the
  centre's hours go to waiting on communication;
- among the qualifying counts that meet the deadline, the fewest GPUs: they cost the fewest
  GPU-hours (GPU-hours grow as efficiency falls) and wait the least in the queue;
- with no deadline, the most qualifying GPUs: the fastest run that still uses them well;
- when no qualifying count meets the deadline, the fastest qualifying one, and the answer says
  that the deadline cannot be met at that efficiency (ask for more time, or accept lower
  efficiency knowingly).
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_EFFICIENCY = 0.8


@dataclass(frozen=True)
class Choice:
    gpus: int
    hours: float  # wall time of the work at that count
    gpu_hours: float  # what the centre charges: gpus x hours
    efficiency: float
    meets_deadline: bool
    why: str


def efficiencies(rates: dict[int, float]) -> dict[int, float]:
    """Parallel efficiency of each count: rate(n) / (n x rate(1))."""
    if 1 not in rates or not rates[1] > 0:
        raise ValueError(
            f"rates {sorted(rates)} lack a positive rate at 1 GPU: efficiency is measured against "
            "one GPU, so measure 1 GPU first"
        )
    return {n: rates[n] / (n * rates[1]) for n in sorted(rates)}


def choose(
    rates: dict[int, float],
    work: float,
    deadline_hours: float | None = None,
    min_efficiency: float = MIN_EFFICIENCY,
) -> Choice:
    """The GPU count to ask for: `rates` maps a count to its measured throughput (items per
    second), `work` is the items the job must process, `deadline_hours` the wall time it must
    fit in (None: as fast as is efficient)."""
    if not 0 < min_efficiency <= 1:
        raise ValueError(f"min_efficiency={min_efficiency} must be in (0, 1], e.g. 0.8")
    if not work > 0:
        raise ValueError(f"work={work} must be positive (the items the job processes)")
    efficiency = efficiencies(rates)
    hours = {n: work / rates[n] / 3600 for n in rates}
    good = [n for n in sorted(rates) if n == 1 or efficiency[n] >= min_efficiency]
    floor = f"{min_efficiency:.0%} efficiency"
    if deadline_hours is None:
        n = max(good)
        return _choice(n, hours, efficiency, True, f"the most GPUs that keep {floor}")
    in_time = [n for n in good if hours[n] <= deadline_hours]
    if in_time:
        n = min(in_time)
        why = f"the fewest GPUs that finish within {deadline_hours:g} h and keep {floor}"
        return _choice(n, hours, efficiency, True, why)
    n = max(good)
    why = (
        f"no count that keeps {floor} finishes within {deadline_hours:g} h: the fastest that "
        f"does takes {hours[n]:.1f} h; ask for more time, or accept lower efficiency knowingly"
    )
    return _choice(n, hours, efficiency, False, why)


def _choice(n: int, hours: dict, efficiency: dict, meets: bool, why: str) -> Choice:
    return Choice(n, hours[n], n * hours[n], efficiency[n], meets, why)
