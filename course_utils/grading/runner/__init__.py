"""The runner: one notebook run under `pytest --nbval`, within limits. It knows nothing of grades.

`course grade` (grading/grader/) hands it a notebook and `Limits` and gets back a `Run`: what
each cell did, whether the time limit cut it off, the log, what the run wrote on its side
channel. `course check` and `course grade
--no-sandbox` use it without the sandbox. The grader imports the runner, never the reverse
(tests/test_layout.py).
    limits.py        `Limits`, their defaults (the one place), sizes such as 8G
    nbval_runner.py  `run_notebook` / `run_nbval`: one run, in one temporary folder
    commands.py      the run's command line and environment, in the sandbox or not
    leftovers.py     ending what a run started: its tree, its token, its pids cgroup
    sandbox.py       the bubblewrap sandbox: what a run sees, its prlimit, whether bwrap works
    cgroups.py       a pids cgroup where RLIMIT_NPROC does not count (root)
    nbval_record.py  a pytest plugin inside the run: one JSON line per cell
    announce.py      a pytest plugin inside the run: each check cell announced to the judge
    kernel_watch.py  a pytest plugin: a cell whose kernel dies fails at once
    outputs.py       what the record keeps of a cell's outputs, and nbval's comparison of them
Nothing is imported here: the plugins load this package inside every run.
"""
