"""course_utils.monitor: background sampling, nvidia-smi parsing, probes."""

import sys
import time

import pytest

from course_utils import monitor, processes


def test_parse_smi_reads_one_gpu():
    text = "37, 1024\n55, 2048\n"
    assert monitor.parse_smi(text) == {"gpu %": 37.0, "memory MiB": 1024.0}
    assert monitor.parse_smi(text, 1) == {"gpu %": 55.0, "memory MiB": 2048.0}
    with pytest.raises(ValueError, match="nvidia-smi listed 2 GPU"):
        monitor.parse_smi(text, 2)


def test_gpu_probe_uses_nvidia_smi_without_nvml(tmp_path, monkeypatch, fake_commands):
    smi = tmp_path / "nvidia-smi"  # found on PATH; its answer is injected, nothing runs it
    smi.write_text("")
    smi.chmod(0o755)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml fails
    monkeypatch.setenv("PATH", str(tmp_path))
    fake = fake_commands(
        {"nvidia-smi --query-gpu=utilization.gpu,memory.used": "37, 1024\n55, 2048\n"}
    )
    assert monitor.gpu_probe(1)() == {"gpu %": 55.0, "memory MiB": 2048.0}
    assert fake.calls == [
        (str(smi), "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits")
    ]
    fake_commands({"nvidia-smi": processes.Finished(("nvidia-smi",), 9, "", "No devices\n", 0.1)})
    with pytest.raises(RuntimeError, match="nvidia-smi failed \\(exit code 9\\): No devices"):
        monitor.gpu_probe(0)()
    smi.unlink()
    assert monitor.gpu_probe() is None  # neither NVML nor nvidia-smi


def test_cpu_probe_sees_a_busy_loop_as_this_process_s_clocks_do():
    """The probe's share is this process's CPU time over the wall time between two calls, read
    here from the same clocks around it, so the verdict holds under any load: the loop runs until
    it has had 0.2 s of CPU, however long a busy machine takes to give it that, and a sleep
    uses none."""
    t0, c0 = time.perf_counter(), time.process_time()
    one, two = monitor.cpu_probe(cpus=1), monitor.cpu_probe(cpus=2)
    t1, c1 = time.perf_counter(), time.process_time()
    while time.process_time() - c1 < 0.2:
        pass
    t2, c2 = time.perf_counter(), time.process_time()
    busy, half = one()["cpu %"], two()["cpu %"]
    t3, c3 = time.perf_counter(), time.process_time()
    low, high = 100 * (c2 - c1) / (t3 - t0), 100 * (c3 - c0) / (t2 - t1)
    # Other threads of this process (an earlier test's) can add CPU time inside the bracket: the
    # probe counts them too, and caps at the CPUs it may use.
    assert 0 < min(low, 100) <= busy <= min(high, 100)  # one busy thread: never over its CPUs
    assert min(low / 2, 100) <= half <= min(high / 2, 100)  # the same time, in % of two CPUs
    time.sleep(0.2)
    assert one()["cpu %"] < 10  # asleep: no CPU time, whatever else the machine runs


def test_monitor_samples_in_the_background_and_survives_errors():
    values = iter([1.0, 2.0, 3.0, 4.0] + [RuntimeError("smi died")] * 1000)

    def probe():
        v = next(values)
        if isinstance(v, Exception):
            raise v
        return {"x": v}

    with monitor.Monitor(probe, interval=0.01) as mon:
        time.sleep(0.2)
    assert mon.series("x") == [2.0, 3.0, 4.0]  # the first call only primes the probe
    assert mon.summary() == {"x": {"mean": 3.0, "max": 4.0, "samples": 3}}
    assert mon.errors and mon.errors[0] == "RuntimeError: smi died"


def test_pick_probe_on_cpu_and_bad_interval():
    kind, probe = monitor.pick_probe("cpu")
    assert kind == "cpu" and "cpu %" in probe()
    with pytest.raises(ValueError, match="interval=0 must be > 0"):
        monitor.Monitor(probe, interval=0)
