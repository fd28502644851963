"""The judge: where a grade is decided, out of the learner's reach.

Three processes grade a notebook, and each has its doors:
    the grader   (grader/) builds the grading notebook, starts the judge and the run, reads the
                 verdicts; it gives the judge one end of a socket pair and the runner the other;
    the judge    (process.py) imports the checkers and references, which no run is shown; its
                 one door into the run is a Unix socket; it takes a check only while the runner
                 says that exercise's check cell runs, once per cell, and sees the kernel from
                 outside (outside.py: its files, its processes, its programs' reports);
    the run      (runner/, in the sandbox): pytest with nbval, which runs no learner code and
                 announces each check cell on its end of the pair, and the learner's kernel,
                 whose `check` knocks on the door and answers the judge's requests with plain
                 data (kernel.py, proxies.py, wire.py; evidence.py helps the probes).
The judge's side, never shown inside a graded run:
    process.py   the judge process: one per graded notebook, deciding every verdict
    outside.py   what the judge sees of the learner's process from outside it
    beside.py    a judge started beside one run, ended after it, and read
    plugin.py    the notebook lanes' pytest plugin: every check of a session through a judge
Shown inside a graded run (runner/sandbox.py, SHOWN), with this index:
    kernel.py    the kernel's end of a check: knock on the door, answer the judge's requests
    proxies.py   how a checker reaches the learner's answers (proxies, plain data); `probe`
    wire.py      answers as plain data: what crosses between the learner's process and the judge
    evidence.py  what a probe reports about the learner's objects, as plain data
Nothing is imported here: import a name from the module that defines it.
"""

SHOWN = ("__init__.py", "kernel.py", "proxies.py", "wire.py", "evidence.py")
