"""course_utils: the tested helpers of the course "PyTorch on HPC clusters"."""

__version__ = "0.1.0"
