"""The `course` command: doctor, data, release, check, grade."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_doctor(args) -> int:
    from course_utils import doctor

    return doctor.main(as_json=args.json)


def cmd_data(args) -> int:
    from course_utils import data, hpc

    if args.action == "fetch":
        if hpc.in_slurm_job() and not args.force:
            print(
                "refusing to download inside a Slurm job: compute nodes usually have no internet. "
                "Run `course data fetch` on a login node, or pass --force.",
                file=sys.stderr,
            )
            return 2
        folder = data.fetch_cifar10(args.root)
        print(f"CIFAR-10 downloaded and verified in {folder}")
        return 0
    data.cifar10(args.root, train=True)
    data.cifar10(args.root, train=False)
    return 0


def cmd_release(args) -> int:
    from course_utils.grading.release import release
    from course_utils.paths import repo_dir

    solutions = Path(args.solutions) if args.solutions else repo_dir("solutions")
    notebooks = Path(args.notebooks) if args.notebooks else repo_dir("notebooks")
    return release(solutions, notebooks, check_only=args.check)


def cmd_check(args) -> int:
    from course_utils.grading.learner import check_lesson

    return check_lesson(args.lesson, Path(args.notebook) if args.notebook else None)


def cmd_grade(args) -> int:
    from course_utils.grading.grader import grade_main

    return grade_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description="PyTorch on HPC clusters: tools.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="report the environment and what to fix")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("data", help="CIFAR-10: fetch on a login node, or show what is found")
    p.add_argument("action", choices=["fetch", "info"])
    p.add_argument("--root", help="data folder (default: $COURSE_DATA, else ./data)")
    p.add_argument("--force", action="store_true", help="download even inside a Slurm job")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("release", help="write notebooks/ from solutions/")
    p.add_argument("--check", action="store_true", help="only verify notebooks/ is up to date")
    p.add_argument("--solutions", help="folder of solution notebooks (default: ./solutions)")
    p.add_argument("--notebooks", help="folder of student notebooks (default: ./notebooks)")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("check", help="run your lesson notebook and report its exercises")
    p.add_argument("lesson", help="lesson number, e.g. 01")
    p.add_argument("--notebook", help="notebook to check (default: notebooks/NN_*.ipynb)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("grade", help="instructors: grade a folder of submissions with nbval")
    p.add_argument("submissions", help="folder of submissions")
    p.add_argument("--lesson", help="grade only this lesson, e.g. 01")
    p.add_argument("--out", default="grading-out", help="output folder (default: grading-out)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="submissions graded at once")
    p.add_argument("--timeout", type=float, default=600, help="seconds per notebook")
    p.add_argument("--cell-timeout", type=float, help="seconds per cell (default: 120)")
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox: learners' code runs with your rights "
        "(the gradebook's sandbox column says none)",
    )
    p.add_argument(
        "--max-procs", type=int, help="processes and threads per submission (default 512; 0: none)"
    )
    p.add_argument("--max-memory", help="address space per process, e.g. 8G (default 8G; 0: none)")
    p.add_argument("--max-file-size", help="largest file a submission writes (default 1G)")
    p.add_argument("--max-disk", help="a submission's writable space, a tmpfs (default 2G)")
    p.add_argument(
        "--cpu-time",
        type=int,
        help="CPU seconds per process (default: the time limit times the allocated CPUs)",
    )
    p.set_defaults(func=cmd_grade)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
