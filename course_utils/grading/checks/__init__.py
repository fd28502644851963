"""The checkers, one module per lesson (lesson05.py <-> exercises 05.k), with their references
(lessonNN_*.py beside a lesson's where they are long), and what several lessons' checkers share:
    traces.py        Chrome traces as the judge reads them (03.4, 04.3)
    slurm_record.py  a learner's job as evidence: Slurm's record, held to the course
Never shown inside a graded run (judge/beside.py hides this folder): only the judge imports it.
"""
