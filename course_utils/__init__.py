"""course_utils: the tested helpers of the course "PyTorch on HPC clusters".

    course_utils/*.py   lesson helpers that notebooks import (device, data, train, checkpoint, ...)
    course_utils/jobs/  programs a launcher starts: python -m course_utils.jobs.NAME
    course_utils/grading/  the course's own tooling: checkers, grading, release, authoring
README.md's "Map of the course" lists, per lesson, its helpers, programs, Slurm scripts and tests.
"""

import logging

__version__ = "0.1.0"
# torch.utils.cpp_extension logs "No CUDA runtime is found" on a CPU machine with the CUDA wheel
# (when torch.utils.benchmark, torch.compile or AOTInductor load it): it says nothing about what
# the course is doing there, and learners take it for an error.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
# The PyTorch release the course is tested with (requirements.txt pins it; a test keeps them
# equal). Others from 2.6 on are supported; `course doctor` says when this one is not in use.
TESTED_TORCH = "2.14.1"
