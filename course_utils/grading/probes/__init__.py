"""Probes: what a check runs in the learner's process, beside their code, one module per lesson.

A probe (`@probe("NN.k")`, judge/proxies.py) is course code that hands the learner's functions
the objects a check needs (a simulated device, a data set that counts its reads, a launch of
ranks) and returns what happened as plain data. It runs where the learner's code lives, so what
it reports is never a point on its own: the judge holds it to its own references, which stay in
checks/. These modules, unlike checks/, are shown inside a graded run; they hold inputs and
harnesses, never an expected answer.
    lesson00.py ... lesson10.py   the probes of lesson NN's exercises ("NN.k" and "NN.k/part")
Nothing is imported here: the kernel imports a lesson's module when its first probe is asked for.
"""
