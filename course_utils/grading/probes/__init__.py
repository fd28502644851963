"""Probes: what a check runs in the learner's process, beside their code, one module per lesson.

A probe (`@probe("NN.k")`, judge/proxies.py) is course code that hands the learner's functions
the objects a check needs (a simulated device, a data set that counts its reads, a launch of
ranks) and returns what happened as plain data. It runs where the learner's code lives, so what
it reports is never a point on its own: the judge holds it to its own references, which stay in
checks/. These modules, unlike checks/, are shown inside a graded run; they hold inputs and
harnesses, never an expected answer.
The probes of lesson NN's exercises ("NN.k" and "NN.k/part"), one module per lesson:
    lesson00.py  the doctor's batch job (00.1), the import-cost runs (00.4)
    lesson01.py  the flatten and its costs, broadcasting, NumPy interop (01.1-01.3)
    lesson02.py  the device choice, the thread and loader rates (02.1-02.3)
    lesson03.py  the timed call, the side stream, images per second, the profile (03.1-03.4)
    lesson04.py  error against n, the profiled autocast step (04.2, 04.3)
    lesson05.py  the learner's DDP training on two ranks and in the job (05.1, 05.3)
    lesson06.py  the checkpoint made, an atomic save of what cannot be pickled (06.1, 06.2)
    lesson07.py  the deployed model, the C++ build and its predictions (07.1, 07.2)
    lesson08.py  the loader timed, the bottleneck named (08.1, 08.3)
    lesson09.py  the runs provoked, run_ranks, the repaired job, accumulation, the loader
                 (09.1-09.5)
    lesson10.py  the staging cases, the study run here, its records, the 2-node log (10.1-10.4)
Nothing is imported here: the kernel imports a lesson's module when its first probe is asked for.
"""
