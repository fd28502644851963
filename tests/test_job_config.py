"""course_utils.job_config: programs' options built from one typed, documented config."""

import dataclasses
import re
from dataclasses import dataclass

import pytest

from course_utils import job_config
from course_utils.job_config import option, parse, shared
from course_utils.paths import PACKAGE_DIR


@dataclass(kw_only=True)
class Demo:
    """A demo program."""

    batch_size: int = shared("batch_size", 32)
    max_steps: int | None = shared("max_steps")
    disable_cuda: bool = shared("disable_cuda")
    arch: str = option("net", "which model", choices=["net", "widenet"])
    out: str = option(help="where the result goes")


def test_parse_reads_typed_values_with_the_programs_defaults():
    args = parse(Demo, ["--out", "r.json"])
    assert args == Demo(batch_size=32, max_steps=None, disable_cuda=False, arch="net", out="r.json")
    args = parse(Demo, ["--out", "r", "--batch-size", "8", "--max-steps", "3", "--disable-cuda"])
    assert (args.batch_size, args.max_steps, args.disable_cuda) == (8, 3, True)


def test_help_comes_from_the_shared_config_and_shows_the_programs_default():
    text = " ".join(job_config.parser(Demo).format_help().split())
    assert "A demo program." in text
    assert (
        "--batch-size BATCH_SIZE images per step and process; a job's global batch is this" in text
    )
    assert "(default: 32)" in text and "--arch {net,widenet} which model (default: net)" in text


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--out", "r", "--batch-size", "0"], "--batch-size 0: must be at least 1"),
        (["--out", "r", "--max-steps", "-2"], "--max-steps -2: must be at least 1"),
        (["--out", "r", "--arch", "vit"], "argument --arch: invalid choice: 'vit'"),
        (["--out", "r", "--batch-size", "big"], "argument --batch-size: invalid int value"),
        ([], "the following arguments are required: --out"),
    ],
)
def test_a_value_that_breaks_its_rule_is_a_usage_error(argv, error, capsys):
    with pytest.raises(SystemExit) as e:
        parse(Demo, argv)
    assert e.value.code == 2 and error in capsys.readouterr().err


def test_a_shared_option_is_named_and_typed_as_shared_does():
    with pytest.raises(ValueError, match="'batchsize' is no shared option; choose from"):
        shared("batchsize")

    @dataclass(kw_only=True)
    class Retyped:
        batch_size: float = shared("batch_size")

    with pytest.raises(TypeError, match="Retyped.batch_size is typed <class 'float'>"):
        job_config.parser(Retyped)


def test_every_shared_option_is_documented_and_shared():
    """Shared holds options that two or more programs take, each with its help."""
    programs = [p.read_text() for p in (PACKAGE_DIR / "jobs").glob("*.py")]
    programs.append((PACKAGE_DIR / "fault_tolerance" / "resumable.py").read_text())
    for f in dataclasses.fields(job_config.Shared):
        assert f.metadata["help"], f.name
        users = sum(f'shared("{f.name}"' in text for text in programs)
        assert users >= 2, f"{f.name} is taken by {users} program(s): not a shared option"


def test_no_program_defines_a_shared_option_itself():
    flags = {"--" + f.name.replace("_", "-") for f in dataclasses.fields(job_config.Shared)}
    defined = []
    for path in sorted((PACKAGE_DIR / "jobs").glob("*.py")):
        for flag in re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", path.read_text()):
            if flag in flags:
                defined.append(f"{path.name}: {flag}")
    assert defined == [], f"take these from job_config.shared: {defined}"
