"""`course grade`: grade learners' notebooks with nbval, each in its own sandbox.

For each submission the grader builds a *grading notebook* from the released notebook (made from
solutions/ as `course release` makes notebooks/): every cell comes from the release except the
learner's exercise cells, matched by the exercise id in their metadata (so reordered, duplicated
or deleted cells do not matter). It carries no outputs: the reference outputs of solutions/
stay with the grader. `pytest --nbval` runs it in a bubblewrap sandbox (sandbox.py) with a
per-cell time limit and records every cell's outputs; the whole run has a per-notebook limit,
after which every process of it is killed. An exercise earns its points when its check cell
printed "passed" AND the check cell's outputs equal the reference's (compared outside the
sandbox by nbval's rules, outputs.py). `course check` (learner.py) calls the same
`grade_notebook`, without the sandbox, so learners see the verdicts the instructor will see.

What this isolation gives and what it does not is written in README.md, section "Grading".
"""

from __future__ import annotations

import math
import re
import shutil
import signal
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from course_utils.files import atomic_write_text
from course_utils.grading import outputs, sandbox
from course_utils.grading.exercises import FAILED, PASSED, registry
from course_utils.grading.gradebook import (
    CRASHED,
    ERROR,
    OK,
    TIMEOUT,
    UNREADABLE,
    ExerciseGrade,
    SubmissionGrade,
    clip,
    safe_name,
    summary_table,
    write_outputs,
)
from course_utils.grading.nbval_runner import Limits, Run, kill_running, run_nbval
from course_utils.grading.release import course_meta, release_notebook
from course_utils.processes import exit_description

MAX_SUBMISSION_BYTES = 50 * 2**20  # a notebook larger than this is not read (outputs do not count)
FLATNAME = re.compile(r"^(?P<learner>.+?)__(?P<lesson>\d\d)_[^/]*\.ipynb$")

# `course grade` options that set the sandbox's limits (Limits' fields of the same names).
SANDBOX_OPTIONS = ("max_procs", "max_memory", "max_file_size", "max_disk", "cpu_time")
# Prepended to every check cell: an exercise cell that rebinds `check` changes nothing.
FRESH_CHECK = "from course_utils.grading import check  # added by course grade"
# Patterns in exercise cells an instructor may want to look at; they never change the points.
FLAG_PATTERNS = {
    "mentions solutions/": r"solutions",
    "opens or removes files": r"\bopen\(|\.write_text|\.write_bytes|shutil\.|os\.(remove|unlink)",
    "exits or kills the process": r"sys\.exit|os\._exit|os\.kill|signal\.",
    "starts processes": r"subprocess|os\.system|os\.fork|multiprocessing",
    "touches the grading machinery": r"\bgrading\b|_REGISTRY|_SESSION|\bcheck\s*=|\bprint\s*=|"
    r"builtins|sys\.modules|sys\.stdout",
}


@dataclass(frozen=True)
class Submission:
    learner: str
    lesson: str
    path: Path


@dataclass
class Lesson:
    """The instructor's side of a lesson: the released notebook and the reference check outputs.

    The release is made from solutions/ as `course release` makes it (`course release --check`
    keeps notebooks/ equal to it), so a learner's edited copy in notebooks/ is never the reference.
    """

    lesson: str
    release: nbformat.NotebookNode
    reference: dict[str, list]  # exercise id -> outputs of its check cell in solutions/

    @classmethod
    def load(cls, lesson: str, solutions: Path) -> Lesson:
        matches = sorted(solutions.glob(f"{lesson}_*.ipynb"))
        if not matches:
            raise ValueError(
                f"lesson {lesson}: no solution notebook {lesson}_*.ipynb in "
                f"{solutions}; grade a lesson that exists"
            )
        solution = nbformat.read(matches[0], as_version=4)
        reference = {
            course_meta(c)["exercise"]: c.outputs
            for c in solution.cells
            if c.cell_type == "code" and course_meta(c).get("role") == "check"
        }
        return cls(lesson, release_notebook(solution), reference)


# ---- finding submissions -------------------------------------------------------------------


def find_submissions(folder: Path, lesson: str | None = None) -> tuple[list[Submission], list[str]]:
    """Submissions in `folder`, as `<learner>/NN_topic.ipynb` or `<learner>__NN_topic.ipynb`.

    Returns the submissions (one per learner and lesson) and warnings about files passed over.
    """
    if not folder.is_dir():
        raise ValueError(
            f"submissions folder {folder} does not exist; pass the folder that holds "
            "one folder per learner or files named <learner>__NN_topic.ipynb"
        )
    found, skipped = {}, []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            for nb in sorted(entry.glob("[0-9][0-9]_*.ipynb")):
                _add(found, skipped, Submission(entry.name, nb.name[:2], nb))
        elif entry.suffix == ".ipynb":
            m = FLATNAME.match(entry.name)
            if m:
                _add(found, skipped, Submission(m["learner"], m["lesson"], entry))
            else:
                skipped.append(f"skipped {entry}: name it <learner>__NN_topic.ipynb")
    subs = [s for s in found.values() if lesson is None or s.lesson == lesson]
    return sorted(subs, key=lambda s: (s.lesson, s.learner)), skipped


def _add(found: dict, skipped: list, sub: Submission) -> None:
    key = (sub.learner, sub.lesson)
    if key in found:
        skipped.append(
            f"skipped {sub.path}: {found[key].path.name} is graded for "
            f"{sub.learner}, lesson {sub.lesson} (one notebook per lesson)"
        )
    else:
        found[key] = sub


# ---- building the grading notebook ---------------------------------------------------------


def read_notebook(path: Path, max_bytes: int = MAX_SUBMISSION_BYTES) -> nbformat.NotebookNode:
    """Read a submission as nbformat 4; ValueError says why it cannot be read."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(
            f"the file is {size / 2**20:.0f} MB, over the {max_bytes / 2**20:.0f} MB "
            "limit; clear the outputs (Edit > Clear All Outputs) and resubmit"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(path.read_text(encoding="utf-8", errors="replace"), as_version=4)
        [(c.cell_type, c.source, c.get("metadata", {})) for c in nb.cells]
    except Exception as e:  # malformed JSON, not a notebook, a future nbformat...
        raise ValueError(
            f"not a readable notebook ({type(e).__name__}: {clip(str(e), 200)}); "
            "open it in Jupyter, save it, and resubmit"
        ) from e
    return nb


def learner_exercises(nb: nbformat.NotebookNode, stubs: dict[str, str]) -> tuple[dict, list]:
    """Source of each exercise cell of a submission, by id, and notes on what was chosen.

    Of several cells with the same id, the last one the learner changed from the released stub
    is taken (else the last one).
    """
    copies: dict[str, list[str]] = {}
    for cell in nb.cells:
        meta = course_meta(cell) if isinstance(cell.get("metadata"), dict) else {}
        if cell.cell_type == "code" and meta.get("role") == "exercise":
            copies.setdefault(str(meta.get("exercise")), []).append(str(cell.source))
    chosen, notes = {}, []
    for ex_id, stub in stubs.items():
        sources = copies.get(ex_id, [])
        if not sources:
            notes.append(f"exercise {ex_id}: no exercise cell found; the released stub was graded")
            continue
        edited = [s for s in sources if s.strip() != stub.strip()]
        chosen[ex_id] = (edited or sources)[-1]
        if len(sources) > 1:
            notes.append(
                f"exercise {ex_id}: {len(sources)} cells carry this id; the last edited "
                "one was graded"
            )
    return chosen, notes


@dataclass
class GradingPlan:
    notebook: nbformat.NotebookNode
    cells: dict[str, tuple[int, int]] = field(default_factory=dict)  # id -> (exercise, check) cell
    points: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def build_grading_notebook(lesson: Lesson, submission: nbformat.NotebookNode) -> GradingPlan:
    """The release with the learner's exercise cells, and no outputs at all.

    Every cell's execution_count is None, so nbval only runs it (and nbval_record records its
    outputs); check cells are compared with `lesson.reference` outside the run (`compare_checks`).
    """
    nb = nbformat.from_dict(lesson.release)
    stubs = {
        course_meta(c)["exercise"]: c.source
        for c in nb.cells
        if c.cell_type == "code" and course_meta(c).get("role") == "exercise"
    }
    answers, notes = learner_exercises(submission, stubs)
    plan = GradingPlan(nb, notes=notes)
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for number, cell in enumerate(code_cells):
        meta = course_meta(cell)
        cell.outputs, cell.execution_count = [], None
        ex_id = meta.get("exercise")
        if meta.get("role") == "exercise":
            cell.source = answers.get(ex_id, cell.source)
            plan.points[ex_id] = int(meta.get("points", 1))
            plan.cells[ex_id] = (number, -1)
        elif meta.get("role") == "check":
            if ex_id not in lesson.reference:
                raise ValueError(
                    f"lesson {lesson.lesson}: solutions/ has no check cell for "
                    f"{ex_id}; rebuild the solution notebook"
                )
            cell.source = f"{FRESH_CHECK}\n{cell.source}"
            plan.cells[ex_id] = (plan.cells.get(ex_id, (-1, -1))[0], number)
    plan.flags = review_flags(answers)
    return plan


def review_flags(answers: dict[str, str]) -> list[str]:
    """Things in the exercise cells an instructor may want to read; they do not change points."""
    flags = []
    for ex_id, source in sorted(answers.items()):
        flags += [
            f"{ex_id}: {what}"
            for what, pattern in FLAG_PATTERNS.items()
            if re.search(pattern, source)
        ]
    return flags


# ---- from nbval's records to grades --------------------------------------------------------


def _cell_problem(rec: dict) -> str:
    if rec.get("died"):
        return "the kernel died in it (os._exit, a crash, or out of memory)"
    if rec.get("problem", "").startswith("Kernel dead"):
        return "the kernel had died in an earlier cell"
    if rec.get("ename"):
        return f"it raised {rec['ename']}: {rec['evalue']}"
    return rec.get("problem") or "it failed"


def judge(
    ex_id: str,
    title: str,
    points: int,
    exercise: dict | None,
    check: dict | None,
    cell_timeout: float,
) -> ExerciseGrade:
    """The verdict of one exercise from nbval's records of its exercise and check cells."""
    from course_utils.grading import parse_results

    def failed(message: str) -> ExerciseGrade:
        return ExerciseGrade(ex_id, title, points, FAILED, message)

    context = ""
    if exercise is not None and not exercise["ok"]:
        context = f" (your exercise cell did not run cleanly: {_cell_problem(exercise)})"
    if check is None:
        return failed("not graded: the notebook stopped before this check ran" + context)
    result = parse_results(check["stdout"]).get(ex_id)
    if result is None:
        if check.get("timed_out") and not check.get("died"):
            return failed(
                f"the check did not finish within {cell_timeout:g} s (an endless loop?)" + context
            )
        return failed(f"the check printed no verdict: {_cell_problem(check)}{context}")
    if result.verdict == PASSED and not check["ok"]:
        extra = check["stdout"].replace(result.line(), "").strip() + "\n" + check["stderr"]
        extra = extra.strip()
        return failed(
            "the check passed, but the check cell's output differs from the reference "
            "solution's: your code printed or warned during the check"
            + (f": {clip(extra, 200)!r}" if extra else "")
        )
    return ExerciseGrade(ex_id, title, points, result.verdict, result.message + context)


def compare_checks(plan: GradingPlan, lesson: Lesson, run: Run, rules: dict[str, str]) -> None:
    """Mark each check cell's record not ok when its outputs differ from the reference's.

    This is the comparison nbval made inside the run when the notebook carried the reference
    outputs; made here, the reference never enters the sandbox.
    """
    for ex_id, (_, check_cell) in plan.cells.items():
        record = run.records.get(check_cell)
        if record is None or not record["ok"]:
            continue
        if outputs.difference(record.get("outputs", []), lesson.reference[ex_id], rules):
            record.update(ok=False, problem="the cell's outputs differ from the reference")


def _status(plan: GradingPlan, run: Run, limits: Limits) -> tuple[str, str]:
    numbers = sorted(run.records)
    died = [n for n in numbers if run.records[n].get("died")]
    slow = [n for n in numbers if run.records[n].get("timed_out") and n not in died]
    where = _where(plan)
    stuck = next((n for n in range(len(_code_cells(plan))) if n not in run.records), None)
    if run.timed_out:
        return TIMEOUT, (
            f"the notebook ran past its {limits.timeout:g} s limit"
            + (f" in code cell {stuck}{where(stuck)}" if stuck is not None else "")
        )
    if died:
        return CRASHED, f"the kernel died in code cell {died[0]}{where(died[0])}"
    if slow:
        return TIMEOUT, (
            f"code cell {slow[0]}{where(slow[0])} ran past the {limits.cell_timeout:g} s cell limit"
        )
    if not run.records:
        return ERROR, f"nbval did not run any cell (exit code {run.returncode}); see the log"
    if stuck is not None:  # pytest itself ended early: killed from inside, or out of a limit
        return CRASHED, (
            f"the grading run ended in code cell {stuck}{where(stuck)} "
            f"({exit_description(run.returncode)})"
        )
    return OK, ""


def _code_cells(plan: GradingPlan) -> list:
    return [c for c in plan.notebook.cells if c.cell_type == "code"]


def _where(plan: GradingPlan):
    roles = {}
    for ex_id, (ex_cell, check_cell) in plan.cells.items():
        roles[ex_cell], roles[check_cell] = f" (exercise {ex_id})", f" (check of {ex_id})"
    return lambda n: roles.get(n, "")


def grade_notebook(
    path: Path,
    lesson: Lesson,
    limits: Limits,
    learner: str = "",
    sanitize: Path | None = None,
    logs: Path | None = None,
) -> SubmissionGrade:
    """Grade one notebook file against `lesson`; every outcome becomes a SubmissionGrade.

    `sanitize`: the nbval sanitize file applied to both sides when check cells are compared.
    """
    start = time.perf_counter()
    grade = SubmissionGrade(learner or path.stem, lesson.lesson, str(path))
    grade.sandbox = limits.describe()
    exercises = registry()
    try:
        plan = build_grading_notebook(lesson, read_notebook(path))
    except ValueError as e:
        grade.status, grade.reason = UNREADABLE, str(e)
        plan = build_grading_notebook(lesson, nbformat.v4.new_notebook())
        grade.exercises = [
            ExerciseGrade(
                i,
                exercises[i].title if i in exercises else i,
                p,
                FAILED,
                "not graded: the notebook could not be read",
            )
            for i, p in plan.points.items()
        ]
        grade.seconds = time.perf_counter() - start
        return grade
    grade.notes, grade.flags = plan.notes, plan.flags
    work = Path(tempfile.mkdtemp(prefix="course-grade-"))
    try:
        target = work / f"{lesson.lesson}_grading.ipynb"
        nbformat.write(plan.notebook, target)
        run = run_nbval(target, limits)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    compare_checks(plan, lesson, run, outputs.sanitize_rules(sanitize))
    if logs is not None:
        atomic_write_text(logs / f"{safe_name(grade.learner)}__{lesson.lesson}.log", run.log)
    grade.status, grade.reason = _status(plan, run, limits)
    for ex_id, (ex_cell, check_cell) in plan.cells.items():
        title = exercises[ex_id].title if ex_id in exercises else ex_id
        grade.exercises.append(
            judge(
                ex_id,
                title,
                plan.points.get(ex_id, 1),
                run.records.get(ex_cell),
                run.records.get(check_cell),
                limits.cell_timeout,
            )
        )
    grade.seconds = time.perf_counter() - start
    return grade


# ---- the command ---------------------------------------------------------------------------


def default_limits(
    timeout: float, jobs: int, cell_timeout: float | None = None, **sandbox_settings
) -> Limits:
    """Limits of each run: `jobs` runs share the allocated CPUs; `sandbox_settings` are Limits'
    sandbox fields (sandbox, max_procs, max_memory, max_file_size, max_disk, cpu_time); None
    keeps a default. CPU time defaults to what every allocated CPU could spend in `timeout`, so
    it never ends a run the time limit would not."""
    from course_utils.hpc import allocated_cpus

    cell = cell_timeout if cell_timeout else min(timeout, 120.0)
    settings = {k: v for k, v in sandbox_settings.items() if v is not None}
    settings.setdefault("cpu_time", math.ceil(timeout * allocated_cpus()))
    return Limits(
        timeout=timeout,
        cell_timeout=min(cell, timeout),
        threads=max(1, allocated_cpus() // max(1, jobs)),
        **settings,
    )


def grade_all(
    submissions: list[Submission],
    lessons: dict[str, Lesson],
    limits: Limits,
    jobs: int = 1,
    sanitize: Path | None = None,
    logs: Path | None = None,
    progress: bool = True,
) -> list[SubmissionGrade]:
    """Grade every submission, `jobs` at a time; one submission's failure never stops the rest."""
    from tqdm import tqdm

    def one(sub: Submission) -> SubmissionGrade:
        try:
            lesson = lessons[sub.lesson]
            return grade_notebook(sub.path, lesson, limits, sub.learner, sanitize, logs)
        except Exception as e:  # a grader bug must cost one row, not the whole gradebook
            return SubmissionGrade(
                sub.learner,
                sub.lesson,
                str(sub.path),
                ERROR,
                f"the grader failed: {type(e).__name__}: {e}",
            )

    grades = []
    bar = tqdm(total=len(submissions), desc="grading", unit="notebook", disable=not progress)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        with bar:
            for future in as_completed([pool.submit(one, s) for s in submissions]):
                grade = future.result()
                grades.append(grade)
                bar.set_postfix_str(
                    f"{grade.learner} {grade.total}/{grade.max_total} {grade.status}"
                )
                bar.update()
    except BaseException:  # Ctrl-C: start nothing more, and leave no kernel behind
        pool.shutdown(wait=False, cancel_futures=True)
        kill_running()
        raise
    pool.shutdown()
    return grades


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def limits_from_args(args) -> Limits:
    """`course grade`'s limits from its options (sizes such as 8G; 0: no limit); an option
    missing from `args` keeps its default."""
    option = {name: getattr(args, name, None) for name in SANDBOX_OPTIONS}
    sizes = {
        name: None if option[name] is None else sandbox.parse_size(option[name], _flag(name))
        for name in ("max_memory", "max_file_size", "max_disk")
    }
    if sizes["max_disk"] == 0:
        raise ValueError("--max-disk 0: the sandbox needs some writable space; give e.g. 2G")
    for name in ("max_procs", "cpu_time"):
        if option[name] is not None and option[name] < 0:
            raise ValueError(
                f"{_flag(name)} {option[name]}: give a positive number, or 0 for no limit"
            )
    return default_limits(
        args.timeout,
        args.jobs,
        getattr(args, "cell_timeout", None),
        sandbox=not getattr(args, "no_sandbox", False),
        max_procs=option["max_procs"],
        cpu_time=option["cpu_time"],
        **sizes,
    )


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_sandbox(limits: Limits, hidden: list[Path]) -> None:
    """ValueError, with the fix, when the grading sandbox cannot run here or would show a
    folder in `hidden`; nothing to check with --no-sandbox."""
    if not limits.sandbox:
        return
    read_only, _ = sandbox.visible_paths()
    sandbox.check_hidden(read_only, hidden)
    why = sandbox.problem(limits.max_procs)
    if why:
        raise ValueError(f"cannot grade in a sandbox: {why}")


def grade_main(args) -> int:
    """`course grade SUBMISSIONS [--lesson NN] [--out DIR] [-j N] [--timeout S] [--no-sandbox]
    [--max-procs N] [--max-memory SIZE] [--max-file-size SIZE] [--max-disk SIZE]
    [--cpu-time S]`."""
    from course_utils.paths import SANITIZE_FILE, repo_dir

    try:
        if args.lesson and not re.fullmatch(r"\d{1,2}", args.lesson):
            raise ValueError(f"--lesson {args.lesson!r}: give a lesson number, e.g. --lesson 01")
        lesson = f"{int(args.lesson):02d}" if args.lesson else None
        subs, skipped = find_submissions(Path(args.submissions), lesson)
        if not subs:
            raise ValueError(
                f"no submissions found in {args.submissions}"
                + (f" for lesson {lesson}" if lesson else "")
                + "; expected <learner>/NN_topic.ipynb or <learner>__NN_topic.ipynb"
            )
        lessons = {
            n: Lesson.load(n, repo_dir("solutions")) for n in sorted({s.lesson for s in subs})
        }
        if args.jobs < 1 or args.timeout <= 0:
            raise ValueError(f"-j {args.jobs} / --timeout {args.timeout}: both must be positive")
        limits = limits_from_args(args)
        out = Path(args.out)
        hidden = [repo_dir("solutions"), Path(args.submissions), out, Path.home()]
        check_sandbox(limits, hidden)
    except ValueError as e:
        print(f"course grade: {e}", file=sys.stderr)
        return 2
    for line in skipped:
        print(line, file=sys.stderr)
    if not limits.sandbox:
        print(
            "course grade: --no-sandbox: learners' code runs with your rights (the gradebook's "
            "sandbox column says none)",
            file=sys.stderr,
        )
    signal.signal(signal.SIGTERM, _interrupt)  # scancel: clean up like Ctrl-C
    start = time.perf_counter()
    grades = grade_all(subs, lessons, limits, args.jobs, SANITIZE_FILE, out / "logs")
    paths = write_outputs(out, grades)
    print(summary_table(grades))
    print(
        f"graded {len(grades)} submissions in {time.perf_counter() - start:.1f} s "
        f"(-j {args.jobs}); gradebook {paths['gradebook']}, feedback in {paths['feedback']}/, "
        f"JUnit report {paths['junit']}, logs in {out / 'logs'}/"
    )
    print(f"sandbox: {limits.describe()}")
    return 1 if any(g.status == ERROR for g in grades) else 0
