"""outputs: check cells compared with the reference outside the sandbox, by nbval's rules."""

import copy

import nbformat
from nbval.plugin import coalesce_streams

from course_utils.grading.notebooks import course_meta
from course_utils.grading.runner import outputs
from course_utils.paths import REPO_ROOT, SANITIZE_FILE

RULES = outputs.sanitize_rules(SANITIZE_FILE)


def stream(text, name="stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def result(text, **more):
    return nbformat.v4.new_output("execute_result", data={"text/plain": text, **more})


def test_equal_outputs_after_sanitizing():
    reference = [stream("[01.1] passed: took 1.25 s at 0x7f00aa\n")]
    recorded = outputs.recordable([stream("[01.1] passed: took 3 ms at 0x55aa\n")])
    assert outputs.difference(recorded, reference, RULES) == ""
    assert outputs.difference(recorded, reference, {}) != ""  # the rules did it


def test_the_course_s_folder_in_a_printed_sbatch_line_is_the_machine_s_own():
    """A lesson prints the sbatch command with the course's folder, wherever it was cloned."""
    line = "sbatch --parsable --export=ALL,COURSE_DIR={} runs/05/job/05.3-job.sh --seed 7\n"
    reference = [stream(line.format("/work/main"))]
    elsewhere = outputs.recordable([stream(line.format("/tmp/clone"))])
    assert outputs.difference(elsewhere, reference, RULES) == ""
    other_job = outputs.recordable([stream(line.format("/tmp/clone").replace("7", "8"))])
    assert outputs.difference(other_job, reference, RULES) != ""


def test_reference_streams_are_coalesced_as_nbval_does():
    reference = [stream("a\n"), stream("b\n")]
    assert outputs.difference(outputs.recordable([stream("a\nb\n")]), reference, RULES) == ""
    assert reference[0].text == "a\n"  # the lesson's reference is not changed by the comparison


def test_a_print_or_a_warning_during_the_check_is_a_difference():
    reference = [stream("[01.2] passed: ok\n")]
    printed = outputs.recordable([stream("debug torch.Size([4, 3])\n[01.2] passed: ok\n")])
    assert outputs.difference(printed, reference, RULES).startswith("stdout differs: expected")
    warned = outputs.recordable([stream("[01.2] passed: ok\n"), stream("Warn\n", "stderr")])
    assert outputs.difference(warned, reference, RULES) == (
        "output fields differ: missing none, unexpected ['stderr']"
    )
    assert "missing ['stdout']" in outputs.difference([], reference, RULES)


def test_results_compare_text_and_leave_images_out():
    reference = [result("tensor([1, 2])", **{"image/png": "AAAA"})]
    same = outputs.recordable([result("tensor([1, 2])", **{"image/png": "BBBB"})])
    assert same == [{"output_type": "execute_result", "data": {"text/plain": "tensor([1, 2])"}}]
    assert outputs.difference(same, reference, RULES) == ""
    other = outputs.recordable([result("tensor([1, 3])")])
    assert outputs.difference(other, reference, RULES).startswith("text/plain differs")


def test_a_cut_value_never_equals_the_reference():
    long = "x" * (outputs.VALUE_LIMIT + 10)
    recorded = outputs.recordable([stream(long)])
    assert len(recorded[0]["text"]) < outputs.VALUE_LIMIT + 100
    assert outputs.difference(recorded, [stream(long)], RULES).startswith("stdout differs")


def test_every_reference_matches_itself_as_recorded():
    """Every check cell of every lesson: its outputs, recorded (cut to VALUE_LIMIT), match."""
    checks = 0
    for path in sorted((REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if course_meta(cell).get("role") == "check":
                # a kernel may send one print as two stream messages; nbval coalesces them
                # before nbval_record sees them, so the recorded side is coalesced too
                recorded = outputs.recordable(coalesce_streams(copy.deepcopy(cell.outputs)))
                assert outputs.difference(recorded, cell.outputs, RULES) == "", (path, cell.source)
                checks += 1
    assert checks >= 27  # at least three per lesson


def test_clip_keeps_the_tail_without_terminal_colours():
    assert outputs.clip("short") == "short"
    cut = outputs.clip("x" * 50 + "END", limit=10)
    assert cut.endswith("xxxxxxxEND") and "43 characters cut" in cut
    assert outputs.clip("\x1b[31mKeyError\x1b[0m: 'a'") == "KeyError: 'a'"
