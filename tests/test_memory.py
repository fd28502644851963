"""course_utils.failing.memory: the three steps give the big batch's gradients; snapshot summaries.

Peak memory is measured in its own processes: tests/integration/test_failures_runs.py."""

from pathlib import Path

from course_utils import processes
from course_utils.failing import memory

SMALL = memory.StepShape(batch=64, width=8, depth=3, micro_batches=4, segments=2)


def _grads(step):
    model = memory.deep_mlp(SMALL)
    x, y = memory.batch(SMALL)
    memory.STEP_FUNCTIONS[step](model, x, y, SMALL)
    return memory.gradients(model)


def test_accumulation_and_checkpointing_keep_the_gradients():
    reference = _grads("big batch")
    assert memory.max_relative_difference(_grads("accumulation"), reference) < 1e-6
    assert memory.max_relative_difference(_grads("checkpointing"), reference) < 1e-6
    assert memory.max_relative_difference(reference, reference) == 0


def test_uneven_micro_batches_are_weighted_by_size():
    shape = memory.StepShape(batch=10, width=4, depth=2, micro_batches=4)
    model, (x, y) = memory.deep_mlp(shape), memory.batch(shape)
    memory.big_batch_step(model, x, y, shape)
    want = memory.gradients(model)
    model = memory.deep_mlp(shape)
    memory.accumulation_step(model, x, y, shape)  # chunks of 3, 3, 3, 1
    assert memory.max_relative_difference(memory.gradients(model), want) < 1e-6


def test_snapshot_summary_names_the_largest_blocks_and_their_lines():
    mib = 2**20
    frames = [
        {"filename": "/x/torch/nn/functional.py", "line": 1, "name": "linear"},
        {"filename": "/home/me/train.py", "line": 42, "name": "step"},
    ]
    snapshot = {
        "segments": [
            {
                "total_size": 8 * mib,
                "blocks": [
                    {"size": 4 * mib, "state": "active_allocated", "frames": frames},
                    {"size": 2 * mib, "state": "inactive", "frames": []},
                    {"size": 1 * mib, "state": "active_allocated"},
                ],
            },
        ]
    }
    assert memory.snapshot_summary(snapshot, top=2) == [
        "1 segments reserve 8.0 MiB; 2 live blocks hold 5.0 MiB",
        "      4.0 MiB from train.py:42 step",
        "      1.0 MiB from an unrecorded place",
    ]


def test_measure_cpu_runs_on_one_thread_with_no_gpu_visible(fake_commands, monkeypatch):
    # Autograd starts a thread per visible GPU, and memory_peak forks after its warm-up: on a GPU
    # node the children failed until the measurement hid the GPUs (it measures host memory).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")

    def memory_peak(command):
        Path(command[command.index("--out") + 1]).write_text('{"big batch": {"peak_bytes": 1}}')
        return processes.Finished(command, 0, "", "", 0.1)

    fake = fake_commands({"python -m course_utils.jobs.memory_peak": memory_peak})
    assert memory.measure_cpu(memory.StepShape()) == {"big batch": {"peak_bytes": 1}}
    assert fake.envs[0]["CUDA_VISIBLE_DEVICES"] == "" and fake.envs[0]["OMP_NUM_THREADS"] == "1"
