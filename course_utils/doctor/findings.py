"""One finding of `course doctor`: a row of its report (taught in lesson 00).

Each part of the doctor (doctor_versions, doctor_gpu, doctor_slurm, ...) returns Findings; the
report (`course_utils.doctor`) collects and prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

# "error" is blocking (non-zero exit): the course cannot run correctly here. "warn" deserves
# attention; "ok" and "info" do not.
OK, INFO, WARN, ERROR = "ok", "info", "warn", "error"


@dataclass(frozen=True)
class Finding:
    topic: str
    value: str
    status: str = INFO
    advice: str = ""
