"""The grader: submissions in, a gradebook out (`course grade`), and `course check` for learners.

It runs each notebook through the runner (grading/runner/), which knows nothing of grades; the
grader imports the runner, never the reverse (tests/test_layout.py).
    submissions.py  finding submissions in a folder; reading one (or saying why it cannot be)
    plan.py         the grading plan: the release with the learner's exercise cells, by id
    verdicts.py     the rules that give points: check outputs compared, each exercise judged,
                    the submission's status
    flags.py        review flags: what in an exercise cell an instructor may want to read
    pipeline.py     one submission through all of it (`grade_notebook`), many (`grade_all`)
    gradebook.py    the gradebook CSV, feedback, JUnit report, the terminal's table
    command.py      `course grade`: its options checked, then grading, then the files
    prepared.py     what a grade settles first and writes last, here and across a job array
    slurm_rules.py  what learners' jobs are held to: --account, --since, --until, --logins
    claims.py       one job, one exercise of one learner, across the whole gradebook
    on_cluster.py   `course grade --slurm`: key, submit, wait, say how each task ended, merge
    array.py        the job array: its manifest, sbatch command, Slurm's record of each task
    task.py         one task of the array: grade its share, keep each result
    results.py      results kept per submission, keyed by content and settings; the seed
    shards.py       shares of about equal time for the tasks
    lms.py          the gradebook in Canvas's or Moodle's import layout (`--lms`)
    learner.py      `course check NN`: the grader's verdicts for a learner's own notebook
Nothing is imported here: import a name from the module that defines it.
"""
