"""The course's own tooling, apart from grading: authoring the lessons and checking them.
    release.py     `course release`: notebooks/ from solutions/ (exercise stubs, no outputs)
    authoring.py   edit a lesson as a percent script, build it back (executed)
    gpu_report.py  `make test-gpu`: every step on a GPU node, one summary table
    site.py        `make site`: the lessons as a static site's sources (student versions, outputs)
Library code never imports this package.
"""
