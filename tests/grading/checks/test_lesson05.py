"""Lesson 05 checkers: pass on the reference, fail with a useful message on a known-wrong answer,
and a stub is not attempted. The runs themselves (ranks, the 05.3 job, Slurm) are in
tests/integration/test_checks_lesson05_ddp.py; here the judge's side meets evidence made by
hand: what a forged or a lazy run would bring back."""

import pytest
import torch
from lesson05_answers import ddp_header

from course_utils import ddp_jobs, models
from course_utils.ddp_jobs import CPU_JOB, GPU_JOB, DdpJob
from course_utils.grading import NOT_ATTEMPTED, CheckFailed, held_out_cases, run_check
from course_utils.grading.checks import lesson05
from course_utils.grading.exercises import run_held_out
from course_utils.jobs import ddp_exercise, single_process


def _stub(*args):
    raise NotImplementedError("Exercise 05.k")


def train_ddp_stub(model, dataset, batch_size, lr, steps):
    # Your code here, then run the check cell below.
    raise NotImplementedError("Exercise 05.1: make a training function data-parallel")


def test_05_1_stub_is_not_attempted_without_starting_ranks():
    result = run_check("05.1", train_ddp_stub)
    assert (
        result.verdict == NOT_ATTEMPTED
        and "run exercise 05.1 first (write train_ddp)" in result.message
    )
    assert "expected a function train_ddp, got int" in run_check("05.1", 3).message


# ---- the judge's side of a run: evidence made by hand --------------------------------------

SEED = 11


def _trained(seed: int, batch_size: int) -> dict:
    """One process's training at `seed`, with one thread as each rank has (the thread count
    changes the last bits of a convolution's gradient)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, dataset = single_process.seeded(seed, ddp_exercise.IMAGES)
        single_process.train(model, dataset, batch_size, ddp_exercise.LR, ddp_exercise.STEPS, "cpu")
    finally:
        torch.set_num_threads(threads)
    return model.state_dict()


def _hash(state: dict) -> str:
    model = models.Net()
    model.load_state_dict(state)
    return models.parameter_hash(model)


def _ran(state, lines=None, returncode=0) -> dict:
    if lines is None:
        lines = [f"rank {r}/2 on vm: parameter checksum {_hash(state)}" for r in range(2)]
    return {
        "launcher": "local",
        "returncode": returncode,
        "output": "\n".join(lines),
        "job_id": None,
        "state": dict(state) if state is not None else None,  # as the wire gives it
    }


@pytest.fixture(scope="module")
def ddp_like():
    """Parameters as 2 averaging ranks would end: the single process's, off in the last bits."""
    state = _trained(SEED, 64)
    return {k: v * (1 + 2**-23) if v.is_floating_point() else v for k, v in state.items()}


def test_the_judge_passes_ranks_that_averaged(ddp_like):
    lesson05.judge_ranks(_ran(ddp_like), SEED, nodes=1, per_node=2)


def test_a_run_of_one_process_on_every_rank_is_caught():
    # every rank trained alone on the whole global batch: bit for bit the judge's own result
    with pytest.raises(CheckFailed, match="every rank trained alone on all of it"):
        lesson05.judge_ranks(_ran(_trained(SEED, 64)), SEED, nodes=1, per_node=2)


def test_one_process_everywhere_through_the_courses_program_is_flagged():
    from course_utils.grading.grader.plan import review_flags

    lazy = (
        "def train_ddp(model, dataset, batch_size, lr, steps):\n"
        "    return single_process.train(model, dataset, 2 * batch_size, lr, steps, 'cpu')"
    )
    [flag] = review_flags({"05.1": lazy})
    assert flag.startswith("05.1: calls the course's own answer"), flag


def test_a_state_dict_typed_in_for_another_seed_is_caught():
    # a run remembered from an earlier check (another seed): the judge drew a new one
    with pytest.raises(CheckFailed, match="a difference of"):
        lesson05.judge_ranks(_ran(_trained(SEED + 1, 64)), SEED, nodes=1, per_node=2)


def test_checksum_lines_printed_without_training_are_caught(ddp_like):
    fake = "rank {r}/2 on vm: parameter checksum 0123456789abcdef"
    lines = [fake.format(r=r) for r in range(2)]
    with pytest.raises(CheckFailed, match="equal to the checksum of the parameters it saved"):
        lesson05.judge_ranks(_ran(ddp_like, lines), SEED, nodes=1, per_node=2)
    doubled = lines + [f"rank {r}/2 on vm: parameter checksum {_hash(ddp_like)}" for r in range(2)]
    with pytest.raises(CheckFailed, match="one 'parameter checksum' line from each of the 2"):
        lesson05.judge_ranks(_ran(ddp_like, doubled), SEED, nodes=1, per_node=2)


def test_a_missing_or_foreign_state_dict_is_caught(ddp_like):
    lines = [f"rank {r}/2 on vm: parameter checksum {_hash(ddp_like)}" for r in range(2)]
    with pytest.raises(CheckFailed, match="rank 0's parameters of the lesson's Net"):
        lesson05.judge_ranks(_ran(None, lines), SEED, nodes=1, per_node=2)
    wrong = {k: v.double() for k, v in ddp_like.items()}
    with pytest.raises(CheckFailed, match="rank 0's parameters"):
        lesson05.judge_ranks(_ran(wrong, lines), SEED, nodes=1, per_node=2)


def test_untrained_and_unaveraged_runs_are_caught():
    start, _ = single_process.seeded(SEED, ddp_exercise.IMAGES)
    with pytest.raises(CheckFailed, match="take `steps` optimizer steps"):
        lesson05.judge_ranks(_ran(start.state_dict()), SEED, nodes=1, per_node=2)
    state = _trained(SEED, 64)
    lines = [f"rank 0/2 on vm: parameter checksum {_hash(state)}"]
    lines.append("rank 1/2 on vm: parameter checksum 0123456789abcdef")
    with pytest.raises(CheckFailed, match="wrap the model in DistributedDataParallel"):
        lesson05.judge_ranks(_ran(state, lines), SEED, nodes=1, per_node=2)


def test_ranks_on_the_wrong_nodes_and_a_failed_run_are_caught(ddp_like):
    h = _hash(ddp_like)
    one_node = [f"rank {r}/4 on node0: parameter checksum {h}" for r in range(4)]
    with pytest.raises(CheckFailed, match="2 ranks on each of 2 node"):
        lesson05.judge_ranks(_ran(ddp_like, one_node), SEED, nodes=2, per_node=2)
    failed = _ran(ddp_like, ["Traceback (most recent call last):", "RuntimeError: no loader"], 1)
    with pytest.raises(CheckFailed, match="failed: .*RuntimeError: no loader"):
        lesson05.judge_ranks(failed, SEED, nodes=1, per_node=2)


# ---- 05.2 ----------------------------------------------------------------------------------


def rank_plan(ranks_per_node, gpus_per_node):
    backend = "nccl" if gpus_per_node >= ranks_per_node else "gloo"
    if gpus_per_node == 0:
        return [(backend, "cpu")] * ranks_per_node
    return [(backend, f"cuda:{r % gpus_per_node}") for r in range(ranks_per_node)]


def test_05_2_rank_plan():
    assert run_check("05.2", rank_plan).passed

    def always_nccl(ranks, gpus):
        return [("nccl", d) for _, d in rank_plan(ranks, gpus)]

    wrong = run_check("05.2", always_nccl)
    assert wrong.verdict == "failed" and "Duplicate GPU detected" in wrong.message
    assert "rank_plan(ranks_per_node=2, gpus_per_node=1)" in wrong.message

    def all_on_gpu0(ranks, gpus):
        return [(b, "cuda:0" if gpus else "cpu") for b, _ in rank_plan(ranks, gpus)]

    crowded = run_check("05.2", all_on_gpu0)
    assert crowded.verdict == "failed" and "rank_plan(ranks_per_node=4, gpus_per_node=4)" in (
        crowded.message
    )

    def devices_as_objects(ranks, gpus):
        return [(b, torch.device(d)) for b, d in rank_plan(ranks, gpus)]

    typed = run_check("05.2", devices_as_objects)
    assert typed.verdict == "failed" and "pairs of strings" in typed.message
    assert run_check("05.2", _stub).verdict == NOT_ATTEMPTED


def test_05_2_held_out_cases_fail_a_table_of_the_visible_answers(held_out_catches):
    visible = {(r, g): rank_plan(r, g) for r, g in [(4, 4), (2, 1), (4, 2), (2, 0), (1, 1), (8, 8)]}

    def table(ranks, gpus):  # right on every visible case, and only there
        return visible.get((ranks, gpus), [("gloo", "cpu")] * ranks)

    assert held_out_cases("05.2") == 4
    assert "rank_plan(ranks_per_node=" in held_out_catches("05.2", rank_plan, table)


# ---- 05.3 ----------------------------------------------------------------------------------


def _changed(old: str, new: str):
    def header(job):
        return ddp_header(job).replace(old, new)

    return header


def _failure(header) -> str:
    result = run_check("05.3", header, train_ddp_stub)  # fails on paper, before any job
    assert result.verdict == "failed", result
    return result.message


def test_05_3_the_documentation_s_header_is_what_it_was():
    assert ddp_header(GPU_JOB.as_dict()) == (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n#SBATCH --gres=gpu:4\n"
        "#SBATCH --cpus-per-task=12\n#SBATCH --mem=480G\n#SBATCH --time=02:00:00\n"
    )
    for job in (GPU_JOB, CPU_JOB):
        lesson05.check_header(ddp_header(job.as_dict()), job, "the reference")


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("B:USR1@300", "SIGUSR1 to the batch shell 300 s before the limit"),
        ("B:10@300", "SIGUSR1 to the batch shell 300 s before the limit"),
        ("B:SIGUSR1@300", "SIGUSR1 to the batch shell 300 s before the limit"),
        ("USR1", "SIGUSR1 to every job step (not the batch shell) 60 s before the limit"),
    ],
)
def test_05_3_a_signal_the_commands_do_not_trap_is_refused_as_sbatch_reads_it(spec, said):
    """slurm/ddp_srun.sh traps nothing: bash's (and Python's) default for SIGUSR1 is to exit, so
    the warning would end the job early without a checkpoint."""
    message = _failure(lambda job: ddp_header(job) + f"#SBATCH --signal={spec}\n")
    assert f"expected no --signal, got --signal={spec} ({said})" in message
    assert "trap nothing" in message and "checkpoint_requeue.sh" in message
    assert "ends" in message and "early" in message
    bad = _failure(lambda job: ddp_header(job) + "#SBATCH --signal=B:FOO@1\n")
    assert "expected no --signal, got one sbatch refuses: --signal='B:FOO@1'" in bad


def test_05_3_gpus_per_task_is_refused_and_says_why():
    message = _failure(_changed("--gres=gpu:4", "--gpus-per-task=1"))
    assert message.startswith("GPU_JOB: expected --gres=gpu:4 or --gpus-per-node=4 (GPUs per")
    assert "ConstrainDevices=yes" in message and "--gpu-bind=none" in message
    assert lesson05.check_header(
        ddp_header(GPU_JOB.as_dict()).replace("--gres=gpu:4", "--gpus-per-node=4"),
        GPU_JOB,
        "per node",
    )


def test_05_3_wrong_headers_say_what_was_expected():
    one_cpu = _failure(_changed("--cpus-per-task=12", "--cpus-per-task=1"))
    assert "expected --cpus-per-task=12 (the bundle" in one_cpu and "got --cpus-per-task=1" in (
        one_cpu
    )
    one_task = _failure(_changed("--ntasks-per-node=4", "--ntasks-per-node=1"))
    assert "one task per rank" in one_task and "got 1 tasks per node" in one_task
    spread = _failure(_changed("--ntasks-per-node=4", "--ntasks=8"))
    assert "got --ntasks=8 without --ntasks-per-node" in spread
    per_task = _failure(_changed("--mem=480G", "--mem=120G"))
    assert "--mem=480G (memory per node" in per_task
    gres_per_task = _failure(_changed("--gres=gpu:4", "--gres=gpu:1"))
    assert "GPUs per node, not per task" in gres_per_task
    unreadable = _failure(lambda job: ddp_header(job) + "#SBATCH --time=two hours\n")
    assert "sbatch could not read it" in unreadable
    no_shebang = _failure(lambda job: ddp_header(job).removeprefix("#!/bin/bash\n"))
    assert "a first line such as #!/bin/bash" in no_shebang


def test_05_3_the_cpu_job_asks_for_no_gpu():
    def always_gres(job):
        header = ddp_header(job)
        return header if "--gres" in header else header + "#SBATCH --gres=gpu:2\n"

    message = _failure(always_gres)
    assert message.startswith("CPU_JOB: expected no GPU (a CPU job), got 2 GPU(s) per node")


def test_05_3_stubs_are_not_attempted():
    assert run_check("05.3", _stub, train_ddp_stub).verdict == NOT_ATTEMPTED
    waiting = run_check("05.3", ddp_header, train_ddp_stub)
    assert waiting.verdict == NOT_ATTEMPTED and "exercise 05.1" in waiting.message


def test_05_3_held_out_cases_fail_a_table_of_the_visible_headers():
    visible = {job: ddp_header(job.as_dict()) for job in (GPU_JOB, CPU_JOB)}

    def table(job):  # right on both visible jobs, and only there
        return visible.get(DdpJob(**job), visible[GPU_JOB])

    for job in (GPU_JOB, CPU_JOB):  # what is visible passes
        lesson05.check_header(table(job.as_dict()), job, "visible")
    assert held_out_cases("05.3") == 3
    for seed in range(3):
        assert run_held_out("05.3", seed, ddp_header, train_ddp_stub).passed == 3
    caught = [run_held_out("05.3", seed, table, train_ddp_stub) for seed in range(3)]
    assert all(r.passed < r.cases for r in caught), caught
    assert caught[0].failures[0].startswith("ddp_header({")


def test_05_3_the_job_is_ddp_srun_sh_with_the_learner_s_header():
    header = "#!/bin/bash\n#SBATCH --nodes=2\n"
    script = ddp_jobs.job_script(header)
    body = script[len(header) :]
    assert script.startswith(header) and "#SBATCH" not in body
    assert body.startswith("# the commands of slurm/ddp_srun.sh\nset -e")
    assert "srun --kill-on-bad-exit=1" in body


def test_05_3_sacct_s_record_is_read(fake_commands):
    rows = (
        "41|ddp-05-3-ab|COMPLETED|0:0|00:00:43|4||0|00:00:10|cpu=4,mem=8G,node=2|2|\n"
        "41.batch|batch|COMPLETED|0:0|00:00:43|2||0|00:00:01|cpu=2,mem=4G,node=1|1|1\n"
        "41.0|python|COMPLETED|0:0|00:00:42|4||0|00:00:09|cpu=4,mem=8G,node=2|2|{tasks}\n"
    )
    fake_commands({"sacct": rows.format(tasks=4)})
    lesson05.scheduler_says("41", "ddp-05-3-ab", CPU_JOB)
    with pytest.raises(CheckFailed, match="named ddp-05-3-cd"):
        lesson05.scheduler_says("41", "ddp-05-3-cd", CPU_JOB)  # another job's record
    fake_commands({"sacct": rows.format(tasks=2)})
    with pytest.raises(CheckFailed, match="a step of 4 tasks on 2 nodes"):
        lesson05.scheduler_says("41", "ddp-05-3-ab", CPU_JOB)
    fake_commands({"sacct": rows.replace("COMPLETED", "FAILED", 1).format(tasks=4)})
    with pytest.raises(CheckFailed, match="COMPLETED in sacct, got FAILED"):
        lesson05.scheduler_says("41", "ddp-05-3-ab", CPU_JOB)
    fake_commands({"sacct": ""})
    with pytest.raises(CheckFailed, match="sacct's record of job 41"):
        lesson05.scheduler_says("41", "ddp-05-3-ab", CPU_JOB)


# ---- the lesson's prose, against the code it describes ----------------------------------------


def test_the_lesson_says_what_its_code_does():
    import nbformat

    from course_utils import ranks
    from course_utils.paths import REPO_ROOT

    lesson = nbformat.read(REPO_ROOT / "solutions" / "05_distributed_data_parallel.ipynb", 4)
    prose = " ".join(c.source.replace("\n# ", " ").replace("\n", " ") for c in lesson.cells)
    # the port rule, and the collision it admits
    assert f"{ranks.JOB_PORT_BASE} + id mod {ranks.JOB_PORT_SPAN}" in prose
    assert ranks.port_for_job(4242) == ranks.port_for_job(4242 + ranks.JOB_PORT_SPAN)
    # "an all-reduce of 62k parameters per step"
    parameters = sum(p.numel() for p in models.Net().parameters())
    assert f"{round(parameters / 1000)}k parameters" in prose
    # the exercise's text names the jobs it is checked on
    assert "`GPU_JOB`" in prose and "`CPU_JOB`" in prose
