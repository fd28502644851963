"""The `course` command: doctor, kernel, data, cpp, release, check, grade."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_doctor(args) -> int:
    from course_utils.doctor import report

    return report.main(as_json=args.json)


def cmd_kernel(args) -> int:
    import os

    from course_utils import containers, kernel_spec

    if args.container:
        name = args.name or kernel_spec.CONTAINER_NAME
        display = args.display_name or kernel_spec.CONTAINER_DISPLAY_NAME
        try:
            folder, runtime = kernel_spec.install_container(
                args.container, args.runtime, name, display, args.prefix
            )
        except ValueError as e:
            print(f"course kernel: {e}", file=sys.stderr)
            return 2
        program = " ".join(containers.RUNTIMES[runtime].program)
        print(
            f"kernel {name!r} registered in {folder}; it runs inside {args.container} ({program})"
        )
        return 0
    name = args.name or kernel_spec.NAME
    folder = kernel_spec.install(name, args.display_name or kernel_spec.DISPLAY_NAME, args.prefix)
    kept = ", ".join(sorted(kernel_spec.kernel_env(os.environ))) or "none"
    print(f"kernel {name!r} registered in {folder}; it carries {kept} from this shell")
    return 0


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
        try:
            folder = data.fetch_cifar10(args.root)
        except data.FetchError as e:
            print(f"course data fetch: {e}", file=sys.stderr)
            return 1
        print(f"CIFAR-10 downloaded and verified in {folder}")
        return 0
    if args.action == "synthetic":
        from course_utils.synthetic import write_standin

        folder = write_standin(data.data_root(args.root), args.train_size, args.test_size)
        print(
            f"wrote a SYNTHETIC stand-in for CIFAR-10 (not CIFAR-10: {args.train_size} training "
            f"and {args.test_size} test images of class patterns in noise) in {folder}, in "
            "torchvision's format. torchvision checks CIFAR-10's published md5s, which no "
            'stand-in matches: a plain `python train.py` gets "Dataset not found or corrupted". '
            "The course's launcher accepts it (the slurm/ scripts use it). Run your script as:"
        )
        print(f"    {STANDIN_RUN}")
        return 0
    data.cifar10(args.root, train=True)
    data.cifar10(args.root, train=False)
    return 0


# The one line a user needs to run their own CIFAR-10 script on the stand-in.
STANDIN_RUN = "python -m course_utils.jobs.your_program train.py [ARGS...]"


def cmd_cpp(args) -> int:
    from course_utils import cpp

    source, folder = Path(args.source), Path(args.build)
    if args.action == "configure":
        cpp.configure_project(source, folder, args.cuda_toolkit)
        print(f"configured {source} in {folder}; build it with: cmake --build {folder}")
        return 0
    built = cpp.build_project(source, folder, args.target or (), args.cuda_toolkit)
    print(
        f"{source}: {'up to date' if built.up_to_date else 'built'} in {folder} "
        f"({built.seconds:.1f} s)"
    )
    return 0


def cmd_release(args) -> int:
    from course_utils.grading.notebooks import ReleaseError
    from course_utils.paths import repo_dir
    from course_utils.tooling.release import release

    solutions = Path(args.solutions) if args.solutions else repo_dir("solutions")
    notebooks = Path(args.notebooks) if args.notebooks else repo_dir("notebooks")
    try:
        return release(solutions, notebooks, check_only=args.check)
    except ReleaseError as error:  # an authoring mistake: one line, nothing written
        print(f"course release: {error}", file=sys.stderr)
        return 1


def cmd_check(args) -> int:
    from course_utils.grading.grader.learner import check_lesson

    return check_lesson(args.lesson, Path(args.notebook) if args.notebook else None)


def cmd_grade(args) -> int:
    from course_utils.grading.grader.command import grade_main

    return grade_main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description="PyTorch on HPC clusters: tools.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("doctor", help="report the environment and what to fix")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser(
        "kernel", help="register this environment as a Jupyter kernel, with its modules' settings"
    )
    p.add_argument("--name", help="kernel name (default: course, or course-container)")
    p.add_argument("--display-name", help="name in JupyterLab (default: PyTorch on HPC (course))")
    p.add_argument("--prefix", help="install under this prefix (default: your ~/.local)")
    p.add_argument(
        "--container",
        metavar="IMAGE",
        help="a kernel that runs inside this image (the course's course.sqfs, a .sif, a folder)",
    )
    p.add_argument(
        "--runtime",
        choices=("charliecloud", "apptainer"),
        help="with --container: ch-run or apptainer exec --nv (default: apptainer for a .sif, "
        "else ch-run where it is installed)",
    )
    p.set_defaults(func=cmd_kernel)

    p = sub.add_parser(
        "data", help="CIFAR-10: fetch on a login node, write the synthetic stand-in, or show"
    )
    p.add_argument("action", choices=["fetch", "synthetic", "info"])
    p.add_argument("--root", help="data folder (default: $COURSE_DATA, else ./data)")
    p.add_argument("--force", action="store_true", help="download even inside a Slurm job")
    p.add_argument("--train-size", type=int, default=50_000, help="synthetic: training images")
    p.add_argument("--test-size", type=int, default=10_000, help="synthetic: test images")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("cpp", help="build your own CMake project against the course's LibTorch")
    p.add_argument("action", choices=["configure", "build"])
    p.add_argument(
        "source", help="folder of the project's CMakeLists.txt (with include(CourseTorch))"
    )
    p.add_argument("build", help="build folder, e.g. build/myapp")
    p.add_argument("--target", nargs="+", help="build only these targets (default: all)")
    p.add_argument("--cuda-toolkit", action="store_true", help="use a real CUDA toolkit (nvcc)")
    p.set_defaults(func=cmd_cpp)

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
    add_grade_options(p)
    p.set_defaults(func=cmd_grade)
    return parser


def add_grade_options(p: argparse.ArgumentParser) -> None:
    """`course grade`'s options; the defaults of its limits are `Limits`' own."""
    from course_utils.grading.runner.limits import DEFAULTS as limits
    from course_utils.grading.runner.limits import size_option

    p.add_argument("submissions", help="folder of submissions")
    p.add_argument("--lesson", help="grade only this lesson, e.g. 01")
    p.add_argument("--out", default="grading-out", help="output folder (default: grading-out)")
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        help="submissions graded at once (default 1; with --slurm, per task: its CPUs / 2)",
    )
    p.add_argument(
        "--seed",
        type=int,
        help="seed of the held-out cases, written in the gradebook (default: a new one; with "
        "--slurm, the one OUT's earlier results used)",
    )
    p.add_argument(
        "--lms",
        choices=("canvas", "moodle"),
        help="also write OUT/canvas.csv or OUT/moodle.csv for that LMS's grade import",
    )
    p.add_argument(
        "--slurm",
        action="store_true",
        help="grade across a Slurm job array (slurm/grade_array.sh) and merge one gradebook; "
        "again, it grades only what has no result yet",
    )
    p.add_argument("--tasks", type=int, help="with --slurm: tasks of the array (default: 1 per 32)")
    p.add_argument(
        "--sbatch",
        nargs=argparse.REMAINDER,
        default=[],
        metavar="OPTION",
        help="with --slurm, last: sbatch options for the array, e.g. --sbatch --partition=cpu "
        "--time=02:00:00 --cpus-per-task=8",
    )
    p.add_argument(
        "--account",
        help="the course's Slurm account: learners' jobs must be on it, and run "
        "exercises must name their jobs (README, 'Grading on the scheduler's record')",
    )
    p.add_argument("--since", help="learners' jobs submitted at or after this, e.g. 2026-11-01")
    p.add_argument("--until", help="learners' jobs submitted at or before this")
    p.add_argument("--logins", help="CSV file learner,login where a cluster login differs")
    p.add_argument("--timeout", type=float, default=limits.timeout, help="seconds per notebook")
    p.add_argument(
        "--cell-timeout", type=float, help=f"seconds per cell (default: {limits.cell_timeout:g})"
    )
    p.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox: learners' code runs with your rights "
        "(the gradebook's sandbox column says none)",
    )
    p.add_argument(
        "--max-procs",
        type=int,
        help=f"processes and threads per submission (default {limits.max_procs}; 0: none)",
    )
    memory = size_option(limits.max_memory)
    p.add_argument(
        "--max-memory", help=f"address space per process, e.g. {memory} (default {memory}; 0: none)"
    )
    p.add_argument(
        "--max-file-size",
        help=f"largest file a submission writes (default {size_option(limits.max_file_size)})",
    )
    p.add_argument(
        "--max-disk",
        help=f"a submission's writable space, a tmpfs (default {size_option(limits.max_disk)})",
    )
    p.add_argument(
        "--cpu-time",
        type=int,
        help="CPU seconds per process (default: the time limit times the allocated CPUs)",
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
