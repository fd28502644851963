"""hpc.configure_interop_threads in a fresh process: PyTorch sizes the inter-op pool once."""


def test_configure_interop_threads_sets_once_then_says_what_it_kept():
    import subprocess
    import sys

    code = (
        "from course_utils import hpc; "
        "print(hpc.configure_interop_threads(1), hpc.configure_interop_threads(2))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]  # the second call cannot resize the pool
