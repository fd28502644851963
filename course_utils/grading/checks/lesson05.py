"""Checkers of lesson 05, distributed data parallel.

05.1 is a run: a probe in the learner's process runs their `train_ddp` on 2 real ranks (forked
with torchrun's variables, `batch.local_run`) at a seed the judge draws. The judge trains one
process on the doubled batch at that seed itself and holds rank 0's parameters, which the probe
brings back as plain tensors, against it (within 1e-6, yet not bit for bit: ranks that split a
batch and average round differently); every rank's checksum must equal the judge's hash of them.
05.2 is code: the learner's plan for each rank of a node, against the course's functions.
05.3 is a run: the learner's header, written for the documentation's GPU cluster and for the
small CPU job (`ddp_jobs.GPU_JOB`, `ddp_jobs.CPU_JOB`), is read as sbatch reads it (GPUs per
node; no --signal, read as sbatch reads it too: the commands it runs with trap none); the second
becomes a job with slurm/ddp_srun.sh's body, running their `train_ddp` on 2 nodes x 2 ranks at
the judge's seed: submitted where Slurm answers, and then graded on sacct's record too (state,
nodes, tasks, the job name the judge drew), else 2 emulated nodes here (`batch.local_run`).
Where it ran is said as "[via slurm]" or "[via local ranks: no Slurm here]" (lesson 10's words,
which the sanitize file makes compare equal). The probes are in probes/lesson05.py.
"""

import random
import re
import secrets

import torch

from course_utils import accounting, ddp_jobs, distributed, models, rank_logs, sbatch
from course_utils import device as devices
from course_utils.ddp_jobs import CPU_JOB, GPU_JOB, DdpJob
from course_utils.grading import CheckFailed, call_answer, exercise, expect, held_out, run_probe
from course_utils.grading.checks import slurm_record
from course_utils.grading.probes.lesson05 import run_on_two_ranks, run_the_job
from course_utils.jobs import ddp_exercise, single_process

CHECKSUM = re.compile(r"^rank (\d+)/(\d+) on (\S+): parameter checksum ([0-9a-f]{16})$")


def _draw_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


def _one_process(seed: int, batch_size: int) -> dict:
    """The judge's own run: one process, the whole global batch, at the learner's seed (one
    thread, as each rank has, so that its rounding is what one process would give there)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, dataset = single_process.seeded(seed, ddp_exercise.IMAGES)
        start = {k: v.clone() for k, v in model.state_dict().items()}
        single_process.train(model, dataset, batch_size, ddp_exercise.LR, ddp_exercise.STEPS, "cpu")
    finally:
        torch.set_num_threads(threads)
    return {"start": start, "trained": model.state_dict(), "sum": models.parameter_sum(model)}


def _checksums(output: str, ranks: int) -> dict[int, tuple[str, str]]:
    """rank -> (node, checksum) from the ranks' lines; exactly one line per rank."""
    found: dict[int, list[tuple[str, str]]] = {}
    for line in output.splitlines():
        m = CHECKSUM.match(line.strip())
        if m and int(m[2]) == ranks:
            found.setdefault(int(m[1]), []).append((m[3], m[4]))
    expect(
        sorted(found) == list(range(ranks)) and all(len(v) == 1 for v in found.values()),
        f"one 'parameter checksum' line from each of the {ranks} ranks",
        f"lines from ranks {sorted(found)}, {sum(map(len, found.values()))} in all"
        + (": print nothing of the kind in train_ddp" if found else ""),
    )
    return {rank: lines[0] for rank, lines in found.items()}


def _hash(state: dict) -> str:
    model = models.Net()
    model.load_state_dict(state)
    return models.parameter_hash(model)


def judge_ranks(ran: dict, seed: int, nodes: int, per_node: int) -> None:
    """The judge's verdict on a run of train_ddp on `nodes` x `per_node` ranks at `seed`."""
    ranks, where = nodes * per_node, f"train_ddp on {nodes} node(s) x {per_node} ranks"
    expect(
        type(ran) is dict and type(ran.get("output")) is str and type(ran.get("returncode")) is int,
        "the run's record as the course's probe makes it",
        type(ran).__name__,
        where,
    )
    if ran["returncode"] != 0:
        cause = rank_logs.failure_cause(ran["output"]) or ran["output"].strip()[-400:]
        raise CheckFailed(f"{where} failed: {cause}")
    sums = _checksums(ran["output"], ranks)
    placed = {rank: node for rank, (node, _) in sums.items()}
    on_nodes = [[placed[n * per_node + r] for r in range(per_node)] for n in range(nodes)]
    expect(
        all(len(set(ns)) == 1 for ns in on_nodes) and len({ns[0] for ns in on_nodes}) == nodes,
        f"{per_node} ranks on each of {nodes} node(s)",
        f"ranks on {placed}",
        where,
    )
    expect(
        len({s for _, s in sums.values()}) == 1,
        "identical parameters on every rank",
        "different parameters: wrap the model in DistributedDataParallel and train the wrapper, "
        "so that gradients are averaged across ranks",
        where,
    )
    state, want = ran["state"], _one_process(seed, ranks * ddp_exercise.BATCH_SIZE)
    keys = list(want["trained"])
    expect(
        type(state) is dict
        and sorted(state) == sorted(keys)
        and all(
            type(state[k]) is torch.Tensor
            and (state[k].dtype, state[k].shape)
            == (want["trained"][k].dtype, want["trained"][k].shape)
            for k in keys
        ),
        "rank 0's parameters of the lesson's Net, saved by the course's program",
        "none" if state is None else f"{type(state).__name__} with keys {sorted(state)[:4]}",
        where,
    )
    expect(
        _hash(state) == sums[0][1],
        "rank 0's checksum line equal to the checksum of the parameters it saved",
        "another checksum: print nothing of the kind in train_ddp",
        where,
    )
    expect(
        any(not torch.equal(state[k], want["start"][k]) for k in keys),
        "trained parameters",
        "the initial ones: take `steps` optimizer steps",
        where,
    )
    diff = max((state[k] - want["trained"][k]).abs().max().item() for k in keys)
    expect(
        diff < 1e-6,
        f"the parameters of 1 process trained on the {ranks}x batch (within 1e-6)",
        f"a difference of {diff:.2g}: each rank must train on its own share of every global "
        "batch (DistributedSampler(dataset, shuffle=True, seed=0), batch_size per rank)",
        where,
    )
    expect(
        any(not torch.equal(state[k], want["trained"][k]) for k in keys),
        "ranks that each computed the gradient of their share and averaged them",
        "bit for bit what one process computes on the whole global batch: every rank trained "
        "alone on all of it",
        where,
    )


@exercise(
    "05.1",
    "make a training function data-parallel (run on 2 ranks)",
    reference=(r"ddp_minimal\.train\(", r"single_process\.train\("),
)
def check_train_ddp(train_ddp, seed: int | None = None):
    seed = _draw_seed() if seed is None else seed
    ran = run_probe(run_on_two_ranks, train_ddp, seed=seed)
    judge_ranks(ran, seed, nodes=1, per_node=2)
    return "2 ranks x batch 32 train like 1 process x batch 64 (parameters within 1e-6)"


# ---- 05.2 ----------------------------------------------------------------------------------


@exercise("05.2", "device and backend of each rank on a node")
def check_rank_plan(rank_plan):
    for ranks, gpus in [(4, 4), (2, 1), (4, 2), (2, 0), (1, 1), (8, 8)]:
        _check_rank_plan_case(rank_plan, ranks, gpus)
    return "nccl only with a GPU per rank; ranks that share a GPU take turns on it over gloo"


def _check_rank_plan_case(rank_plan, ranks: int, gpus: int) -> None:
    got = call_answer(rank_plan, ranks, gpus)
    want = [
        (
            distributed.choose_backend(ranks, gpus),
            str(devices.plan_device(r, ranks, gpus=gpus).device),
        )
        for r in range(ranks)
    ]
    where = f"rank_plan(ranks_per_node={ranks}, gpus_per_node={gpus})"
    pairs = type(got) is list and all(
        type(p) in (tuple, list) and len(p) == 2 and all(type(v) is str for v in p) for p in got
    )
    expect(
        pairs and len(got) == ranks,
        f"a list of {ranks} (backend, device) pairs of strings",
        repr(got)[:200],
        where,
    )
    got = [tuple(p) for p in got]
    if got != want and ranks > gpus > 0 and got[0][0] == "nccl":
        raise CheckFailed(
            f"{where}: expected {want}, got {got}: NCCL refuses two ranks on one GPU "
            '("Duplicate GPU detected"); ranks that share a GPU use gloo'
        )
    expect(got == want, want, got, where)


# ---- 05.3 ----------------------------------------------------------------------------------


def check_header(text, job: DdpJob, what: str) -> sbatch.Request:
    """The rules of exercise 05.3 on a header written for `job`; the request sbatch reads."""
    expect(type(text) is str, "the header as a string", type(text).__name__, what)
    first = text.strip().splitlines()[0] if text.strip() else ""
    expect(first.startswith("#!"), "a first line such as #!/bin/bash", repr(first), what)
    try:
        r = sbatch.read_request(text)
    except ValueError as e:
        raise CheckFailed(f"{what}: sbatch could not read it: {e}") from e
    gpus = job.ranks_per_node * job.gpus_per_rank
    expect(r.nodes == job.nodes, f"--nodes={job.nodes}", f"--nodes={r.nodes}", what)
    expect(
        r.tasks_per_node == job.ranks_per_node,
        f"one task per rank: --ntasks-per-node={job.ranks_per_node} (srun starts the ranks)",
        f"{r.tasks_per_node} tasks per node"
        if r.tasks_per_node
        else f"--ntasks={r.tasks} without --ntasks-per-node (Slurm need not spread them evenly)",
        what,
    )
    if gpus and "--gpus-per-task" in r.options:
        raise CheckFailed(
            f"{what}: expected --gres=gpu:{gpus} or --gpus-per-node={gpus} (GPUs per node), got "
            f"--gpus-per-task={r.options['--gpus-per-task']}: it binds each task to its own GPU, "
            "and where Slurm confines devices (ConstrainDevices=yes) a rank cannot reach its "
            "neighbours' GPUs, so NCCL fails within a node (slurm/ddp_srun.sh's srun gives no "
            "--gpu-bind=none)"
        )
    expect(
        r.gpus_per_node == gpus,
        f"--gres=gpu:{gpus} (GPUs per node, not per task)" if gpus else "no GPU (a CPU job)",
        f"{r.gpus_per_node} GPU(s) per node",
        what,
    )
    expect(
        r.cpus_per_task == job.cpus_per_rank,
        f"--cpus-per-task={job.cpus_per_rank}"
        + (f" (the bundle: {job.cpus_per_rank} per GPU)" if gpus else ""),
        f"--cpus-per-task={r.cpus_per_task}",
        what,
    )
    mem = job.mem_gb_per_rank * job.ranks_per_node
    expect(
        r.mem_mb is not None and abs(r.mem_mb - mem * 1024) < 1024,
        f"--mem={mem}G (memory per node: {job.mem_gb_per_rank} GB x {job.ranks_per_node} ranks)",
        "no --mem" if r.mem_mb is None else f"{r.mem_mb / 1024:.0f} GB per node",
        what,
    )
    hours, minutes = divmod(job.minutes, 60)
    expect(
        r.minutes == job.minutes,
        f"--time={hours:02d}:{minutes:02d}:00",
        f"{r.minutes} minutes",
        what,
    )
    if r.signal is not None:
        raise CheckFailed(f"{what}: {_no_signal(r.signal)}")
    return r


def _no_signal(spec: str) -> str:
    """Why the header of a job that runs slurm/ddp_srun.sh's commands asks for no signal."""
    try:
        sig = sbatch.parse_signal(spec)
    except ValueError as e:
        return f"expected no --signal, got one sbatch refuses: {e}"
    ends = "bash" if sig.batch_shell else "the ranks (Python)"
    early = "the batch shell dies" if sig.batch_shell else "the ranks die"
    return (
        f"expected no --signal, got --signal={spec} ({sig.name} to {sig.whom} {sig.seconds} s "
        f"before the limit): the job runs slurm/ddp_srun.sh's commands, which trap nothing, and "
        f"{ends} ends at {sig.name} by default, so {early} at the warning and the job ends "
        f"{sig.seconds} s early, without a checkpoint. Ask for a warning where the script traps "
        "it and waits (lesson 06: slurm/checkpoint_requeue.sh)"
    )


def scheduler_says(job_id, name: str, job: DdpJob) -> None:
    """The judge reads the scheduler's own record of the learner's job."""
    steps = accounting.ended_job_steps(str(job_id))
    expect(bool(steps), f"sacct's record of job {job_id}", "none (is accounting on?)")
    main = next((s for s in steps if not s.is_step), None)
    expect(main is not None and main.name == name, f"job {job_id} named {name}", steps[0].name)
    expect(main.state == "COMPLETED", f"job {job_id} COMPLETED in sacct", main.state)
    ranks = job.nodes * job.ranks_per_node
    expect(main.nodes == job.nodes, f"{job.nodes} nodes in sacct", f"{main.nodes}")
    expect(
        any(s.is_step and s.tasks == ranks and s.nodes == job.nodes for s in steps),
        f"a step of {ranks} tasks on {job.nodes} nodes (srun) in sacct",
        ", ".join(f"{s.job_id}: {s.tasks} tasks on {s.nodes} nodes" for s in steps if s.is_step),
    )


def where(launcher: str) -> str:
    """How the job was started, in the words the sanitize file recognises (lesson 10's)."""
    return "[via slurm]" if launcher == "slurm" else "[via local ranks: no Slurm here]"


@exercise("05.3", "a multi-node DDP job's header, submitted with your train_ddp")
def check_ddp_job(ddp_header, train_ddp, jobs=None, seed: int | None = None):
    check_header(call_answer(ddp_header, GPU_JOB.as_dict()), GPU_JOB, "GPU_JOB")
    header = call_answer(ddp_header, CPU_JOB.as_dict())
    request = check_header(header, CPU_JOB, "CPU_JOB")
    named = slurm_record.named_jobs(jobs.value() if jobs is not None else None, "DDP_JOBS")
    if named:
        for job_id in named:
            _ddp_job_in_sacct(job_id)
        return _ddp_passed("slurm")
    slurm_record.needs_a_job("05.3", "the sbatch command ddp_jobs.write_job prints")
    seed = _draw_seed() if seed is None else seed
    name = f"ddp-05-3-{secrets.token_hex(4)}"
    per_node = request.tasks_per_node
    ran = run_probe(
        run_the_job,
        train_ddp,
        header=header,
        seed=seed,
        name=name,
        nodes=request.nodes,
        per_node=per_node,
    )
    judge_ranks(ran, seed, request.nodes, per_node)
    if ran["launcher"] == "slurm":
        scheduler_says(ran["job_id"], name, CPU_JOB)
    slurm_record.note(f"your train_ddp run by the check ({ran['launcher']}) at the judge's seed")
    return _ddp_passed(ran["launcher"])


def _ddp_passed(launcher: str) -> str:
    """One line wherever the job ran (the sanitize file makes the two routes' words equal)."""
    return (
        f"{where(launcher)} both headers as sbatch reads them; the CPU job ran your "
        "train_ddp on 2 nodes x 2 ranks like 1 process x batch 128 (on Slurm, sacct's record too)"
    )


def _ddp_job_in_sacct(job_id: str) -> None:
    """A job the learner names: theirs, for the course, CPU_JOB's header and ddp_srun.sh's
    commands as Slurm stored them, COMPLETED on 2 nodes with a step of 4 tasks, and the
    parameter sum rank 0 left in its record the one of 1 process trained on the 4x batch at
    the --seed it was submitted with (the judge trains it)."""
    record = slurm_record.learner_job(job_id, "05.3")
    what = f"job {job_id}"
    stored = record.script or ""
    check_header(stored, CPU_JOB, f"{what}'s header, as Slurm stored it")
    body = ddp_jobs.job_script("")
    expect(body.strip() in stored, "slurm/ddp_srun.sh's commands after the header", "others", what)
    main = next((s for s in record.steps if not s.is_step), None)
    expect(main is not None and main.state == "COMPLETED", "a COMPLETED job", record.state, what)
    ranks = CPU_JOB.nodes * CPU_JOB.ranks_per_node
    steps = [s for s in record.steps if s.is_step and s.tasks == ranks and s.nodes == CPU_JOB.nodes]
    expect(bool(steps), f"a step of {ranks} tasks on {CPU_JOB.nodes} nodes (srun)", "none", what)
    seed, total = slurm_record.seeded_sum(record, "rank 0", "none (did rank 0 finish?)", what)
    want = _one_process(seed, ranks * ddp_exercise.BATCH_SIZE)["sum"]
    expect(
        abs(float(total) - want) < SUM_TOLERANCE,
        f"the parameters of 1 process trained on the {ranks}x batch at seed {seed} "
        f"(their sum {want:.6f})",
        total,
        what,
    )
    slurm_record.note(slurm_record.sacct_evidence(record) + ", its result reproduced")


SUM_TOLERANCE = 1e-3  # DDP and one process agree to ~1e-8 per parameter: 1e-3 over them all


# ---- held-out cases (only `course grade` runs them) --------------------------------------------


@held_out("05.2", cases=4)
def held_out_rank_plan(rng, rank_plan):
    """Nodes of other sizes: a table of the six visible answers fails them."""
    _check_rank_plan_case(rank_plan, rng.randint(1, 16), rng.randint(0, 8))


@held_out("05.3", cases=3)
def held_out_ddp_header(rng, ddp_header, train_ddp, jobs=None):
    """Jobs of other sizes, on paper: a table of the two visible headers fails them."""
    gpus = rng.choice([0, 1])
    job = DdpJob(
        nodes=rng.randint(1, 16),
        ranks_per_node=rng.choice([1, 2, 4, 8]),
        gpus_per_rank=gpus,
        cpus_per_rank=rng.choice([1, 2, 6, 8, 16]),
        mem_gb_per_rank=rng.choice([4, 16, 60, 128]),
        minutes=rng.choice([15, 45, 90, 240, 1440]),
    )
    check_header(call_answer(ddp_header, job.as_dict()), job, f"ddp_header({job.as_dict()})")
