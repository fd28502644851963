"""Speed-up, parallel efficiency and how many GPUs to ask for, from a scaling study's records.
Taught in lesson 10.

Weak scaling, as the lab runs it: every rank keeps its batch, so n ranks do n times the work per
step. speed-up(n) = throughput(n) / throughput(1); efficiency(n) = speed-up(n) / n (1.0 is
perfect). How many GPUs to ask for is the course's one decision, `how_many.choose` (lesson 08),
applied to the learner's own runs: the counts that keep 80% efficiency qualify, and of those the
fewest that meet the deadline (no deadline: the most). `jobs_table` shows how well each job
used the CPUs and memory it held, from Slurm's accounting (`accounting.efficiency`).
"""

from __future__ import annotations

from dataclasses import dataclass

from course_utils import accounting, how_many
from course_utils.lab.energy import NOT_REPORTED
from course_utils.tables import text_table

THRESHOLD = how_many.MIN_EFFICIENCY
WORK = 1_000_000  # images: the fixed amount of work the cost columns are computed for


@dataclass(frozen=True)
class Row:
    name: str
    nodes: int
    ranks: int
    throughput: float  # images/s of the whole job: its timed images over the slowest rank's time
    step_time: float  # seconds: the largest of the ranks' median steps
    communication_share: float
    speedup: float
    efficiency: float
    joules: float | None = None  # the run's energy, where the hardware reported it
    energy_source: str = "not reported"  # "nvml", "rapl" or "not reported"
    images: int = 0  # images the run's timed steps trained (all ranks)
    per_step: int = 0  # images one step trains (all ranks: ranks x batch per rank)

    @property
    def mean_step(self) -> float:
        """Seconds: the slowest rank's time for its timed steps over their number, the step
        the throughput is made of (images/s = per_step / mean_step)."""
        return self.per_step / self.throughput

    @property
    def hours(self) -> float:
        """Wall hours to train WORK images."""
        return WORK / self.throughput / 3600

    @property
    def rank_hours(self) -> float:
        """GPU-hours (rank-hours) the same work costs: what the allocation is billed."""
        return self.hours * self.ranks

    @property
    def kilojoules_per_work(self) -> float | None:
        """kJ to train WORK images at this run's energy per image, or None where no counter
        answered. The meter spans the whole training (its warm-up step and the communication
        probe too), so this is an upper bound of the timed steps' energy."""
        if self.joules is None or self.images <= 0:
            return None
        return self.joules / self.images * WORK / 1e3


def efficiency(throughput: float, baseline: float, ranks: int) -> float:
    """Parallel efficiency of `ranks` ranks: (throughput / baseline) / ranks."""
    if baseline <= 0 or throughput < 0 or ranks < 1:
        raise ValueError(
            f"baseline={baseline} must be > 0, throughput={throughput} >= 0, ranks={ranks} >= 1"
        )
    return throughput / baseline / ranks


def scaling_rows(records: list[dict]) -> list[Row]:
    """One row per record, against the record of 1 rank (exactly one must be there)."""
    ones = [r for r in records if r["configuration"]["ranks"] == 1]
    if len(ones) != 1:
        names = [r["name"] for r in ones]
        raise ValueError(
            f"expected exactly one record of 1 rank as the baseline, found {len(ones)} {names}: "
            "run the 1-rank job (once) first"
        )
    base = ones[0]["throughput"]
    rows = []
    for r in records:
        c = r["configuration"]
        speedup = r["throughput"] / base
        energy = r.get("energy") or {}
        rows.append(
            Row(
                r["name"],
                c["nodes"],
                c["ranks"],
                r["throughput"],
                r["step_time"],
                r["communication_share"],
                speedup,
                speedup / c["ranks"],
                energy.get("joules"),
                energy.get("source", NOT_REPORTED),
                c["batch_per_rank"] * c["steps"] * c["ranks"],
                c["batch_per_rank"] * c["ranks"],
            )
        )
    return sorted(rows, key=lambda row: (row.ranks, row.nodes))


@dataclass(frozen=True)
class Decision:
    ranks: int
    nodes: int
    name: str
    why: str


def rates(rows: list[Row]) -> dict[int, float]:
    """The best throughput measured at each rank count (of two shapes with 4 ranks, 1x4 and 2x2,
    the faster): what `how_many.choose` weighs."""
    best: dict[int, float] = {}
    for row in rows:
        best[row.ranks] = max(best.get(row.ranks, 0.0), row.throughput)
    return dict(sorted(best.items()))


def ranks_to_ask(
    rows: list[Row],
    threshold: float = THRESHOLD,
    deadline_hours: float | None = None,
    work: float = WORK,
) -> Decision:
    """The course's one decision (`how_many.choose`, lesson 08) on these runs: the GPU counts
    that keep `threshold` efficiency qualify; with no deadline the most of them, with one the
    fewest that finish `work` images in time; the shape is the fastest run of that count."""
    choice = how_many.choose(rates(rows), work, deadline_hours, threshold)
    best = max((r for r in rows if r.ranks == choice.gpus), key=lambda r: r.throughput)
    above = [r for r in rows if r.ranks > choice.gpus and r.efficiency < threshold]
    why = choice.why
    if above and deadline_hours is None:
        worst = max(above, key=lambda r: r.efficiency)
        why += f"; {worst.ranks} ranks ({worst.name}) reach only {worst.efficiency:.0%}"
    elif not above and choice.gpus == max(r.ranks for r in rows) and deadline_hours is None:
        why += ": the largest count measured keeps it (measure more ranks to find its limit)"
    return Decision(choice.gpus, best.nodes, best.name, why)


def best_lr(sweep: list[dict]) -> float:
    """The sweep's learning rate whose run ended with the lowest loss (the mean of its last
    steps' losses, `loss.last` in its record)."""
    if not sweep:
        raise ValueError("no sweep records: run the sweep first")
    return min(sweep, key=lambda r: r["loss"]["last"])["configuration"]["lr"]


def per_job(steps: list[accounting.Step]) -> dict[str, list[accounting.Step]]:
    """sacct's lines grouped by job: an array's tasks ("123_0", "123_1") are jobs of their own."""
    jobs: dict[str, list[accounting.Step]] = {}
    for step in steps:
        jobs.setdefault(step.job_id.split(".")[0], []).append(step)
    return jobs


def jobs_table(jobs: list[tuple[str, accounting.Efficiency]]) -> str:
    """How well each job used what it held, as seff computes it from sacct's record: CPU
    efficiency (CPU time over elapsed x CPUs) and memory efficiency (peak over the request)."""

    def percent(x):
        return "-" if x is None else f"{x:.0%}"

    def mb(x):
        return "-" if x is None else round(x)

    body = [
        [
            name,
            e.job_id,
            e.state,
            round(e.elapsed_s),
            e.cpus,
            percent(e.cpu),
            mb(e.memory_mb),
            mb(e.requested_mb),
            percent(e.memory),
        ]
        for name, e in jobs
    ]
    header = ["run", "job", "state", "s", "CPUs", "CPU eff", "peak MB", "asked MB", "mem eff"]
    return text_table(header, body)


TABLE_KEY = (
    "img/step: the images of one step, all ranks; mean ms: the slowest rank's time for its timed\n"
    "steps over their number, so images/s = img/step / mean; median ms: the largest of the\n"
    "ranks' median steps (a median leaves out a slow step)"
)


def table(rows: list[Row]) -> str:
    """The runs side by side, with a key that says which rank's time each column is."""
    header = [
        "run",
        "nodes",
        "ranks",
        "img/step",
        "mean ms",
        "images/s",
        "median ms",
        "comm %",
        "speed-up",
        "efficiency",
        f"h per {WORK:,.0f} img",
        "rank-hours",
        "energy",
        f"kJ per {WORK:,.0f} img",
    ]
    body = [
        [
            r.name,
            r.nodes,
            r.ranks,
            r.per_step,
            round(r.mean_step * 1e3, 1),
            round(r.throughput),
            round(r.step_time * 1e3, 1),
            round(100 * r.communication_share),
            round(r.speedup, 2),
            f"{r.efficiency:.0%}",
            round(r.hours, 3),
            round(r.rank_hours, 3),
            energy_text(r),
            NOT_REPORTED if r.kilojoules_per_work is None else round(r.kilojoules_per_work, 1),
        ]
        for r in rows
    ]
    return f"{text_table(header, body)}\n{TABLE_KEY}"


def energy_text(row: Row) -> str:
    """ "812 J (nvml)", or "not reported" where no counter answered."""
    if row.joules is None:
        return NOT_REPORTED
    return f"{row.joules:,.0f} J ({row.energy_source})"


def plot(rows: list[Row], threshold: float = THRESHOLD, title: str = ""):
    """One figure: speed-up (left axis, with the ideal line) and efficiency (right axis, with the
    threshold) against ranks; each point named by its run (nodes x ranks per node)."""
    import matplotlib.pyplot as plt

    fig, speed = plt.subplots(figsize=(6.4, 4))
    ranks = [r.ranks for r in rows]
    top = max(ranks)
    speed.plot([1, top], [1, top], ":", color="grey", label="ideal speed-up")
    speed.plot(ranks, [r.speedup for r in rows], "o-", color="tab:blue", label="speed-up")
    for r in rows:
        speed.annotate(r.name, (r.ranks, r.speedup), textcoords="offset points", xytext=(4, 4))
    speed.set_xlabel("ranks (processes, one per GPU on a GPU node)")
    speed.set_ylabel("speed-up over 1 rank (x)")
    eff = speed.twinx()
    eff.plot(
        ranks,
        [100 * r.efficiency for r in rows],
        "s--",
        color="tab:red",
        label="parallel efficiency",
    )
    eff.axhline(100 * threshold, color="tab:red", linewidth=0.8, alpha=0.5)
    eff.set_ylabel("parallel efficiency (%)")
    eff.set_ylim(0, 110)
    lines = speed.get_legend_handles_labels()[0] + eff.get_legend_handles_labels()[0]
    speed.legend(lines, [line.get_label() for line in lines], loc="upper left")
    speed.set_title(title or "Weak scaling: speed-up and efficiency against ranks")
    fig.tight_layout()
    return fig


def sweep_table(records: list[dict]) -> str:
    """The sweep's runs, by learning rate: final loss and throughput."""
    rows = sorted(records, key=lambda r: r["configuration"]["lr"])
    body = [
        [r["name"], r["configuration"]["lr"], round(r["loss"]["last"], 4), round(r["throughput"])]
        for r in rows
    ]
    return text_table(["run", "lr", "last loss", "images/s"], body)
