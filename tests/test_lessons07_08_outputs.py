"""What lessons 07 and 08 say about their timings, held against the figures their stored outputs
print: a verdict ("no difference measured", "kept", "faster") agrees with the rates
and spreads beside it, and the lists that summarize the tuning agree with its table."""

import re

import nbformat
import pytest

from course_utils.paths import REPO_ROOT

SOLUTIONS = REPO_ROOT / "solutions"


def _output(lesson: str, marker: str) -> str:
    """The printed output of the one code cell of `lesson` whose source holds `marker`."""
    (path,) = SOLUTIONS.glob(f"{lesson}_*.ipynb")
    cells = [
        c
        for c in nbformat.read(path, as_version=4).cells
        if c.cell_type == "code" and marker in c.source
    ]
    assert len(cells) == 1, f"{len(cells)} cells of {path.name} hold {marker!r}"
    return "".join(o.get("text", "") for o in cells[0].outputs if o.output_type == "stream")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


# ---- lesson 07: Python and C++ timed alike ---------------------------------------------------


def test_07_latency_verdicts_follow_the_rounds_they_print():
    text = _output("07", "routes = {")
    rounds = {
        m["name"].strip(): (float(m["median"]), float(m["low"]), float(m["high"]))
        for m in re.finditer(
            r"^(?P<name>[A-Za-z+ ]+?)\s+(?P<median>[\d.]+) ms  \(rounds (?P<low>[\d.]+) to "
            r"(?P<high>[\d.]+)\)$",
            text,
            re.MULTILINE,
        )
    }
    assert set(rounds) == {"Python eager", "AOTInductor from Python", "AOTInductor in C++"}
    verdicts = re.findall(
        r"^(.+?): ([\d.]+)x the time of (.+?)(: no difference measured.*)?$", text, re.MULTILINE
    )
    assert len(verdicts) == 2, text
    for a, ratio, b, none in verdicts:
        (ma, la, ha), (mb, lb, hb) = rounds[a], rounds[b]
        assert float(ratio) == pytest.approx(ma / mb, abs=0.011), (a, b)
        assert bool(none) == (not (ha < lb or la > hb)), (a, b, rounds)


# ---- lesson 08: the tuner's verdicts against their intervals ------------------------------

ROW = re.compile(
    r"^(?P<step>.+?)\s+(?P<rate>[\d,]+)\s+(?P<best>[\d,]+)\s+(?P<pairs>\d+)\s+"
    r"(?P<ratio>[\d.]+)x\s+(?:(?P<low>[\d.]+)-(?P<high>[\d.]+)x|-)\s+(?P<verdict>.+)$"
)
# "1.23x (99% interval 1.10-1.40x, 12 pairs): faster", or "... interval none yet, 3 pairs) ..."
PAIRED = re.compile(
    r"(?P<ratio>[\d.]+)x \(99% interval (?:(?P<low>[\d.]+)-(?P<high>[\d.]+)x|none yet), "
    r"(?P<pairs>\d+) pairs?\): (?P<verdict>.+)$",
    re.MULTILINE,
)
MIN_GAIN = 0.05  # paired.MIN_GAIN, the lesson's "within 5%"


def _tuning_rows() -> list[dict]:
    rows = []
    for line in _output("08", "speed.tune(").splitlines():
        m = ROW.match(line)
        if m:
            rows.append(m.groupdict())
    assert len(rows) >= 5
    return rows


def _want(low, high, pairs: int) -> str:
    """The verdict an interval, printed to two decimals, allows."""
    if low is None:
        return f"undecided after {pairs} pair{'' if pairs == 1 else 's'}"
    low, high = float(low), float(high)
    if low > 1.005:
        return "faster"
    if high < 0.995:
        return "slower"
    if 1 / (1 + MIN_GAIN) + 0.005 < low and high < 1 + MIN_GAIN - 0.005:
        return "no difference"
    if low < 0.995 and high > 1.005 and (low < 1 / (1 + MIN_GAIN) - 0.005 or high > 1.055):
        return f"undecided after {pairs} pairs"
    return ""  # at the edge, up to rounding: either


def _agrees(verdict: str, low, high, pairs: int) -> bool:
    want = _want(low, high, pairs)
    return verdict == want if want else verdict != ""


def test_08_each_tuning_verdict_follows_its_interval():
    for row in _tuning_rows():
        pairs, verdict = int(row["pairs"]), row["verdict"]
        words, _, action = verdict.partition(": ")
        assert action.startswith("kept" if words == "faster" else "dropped"), row
        assert _agrees(words, row["low"], row["high"], pairs), row
        if row["low"] is not None:
            assert float(row["low"]) <= float(row["ratio"]) <= float(row["high"]), row


def _listed(text: str, label: str) -> list[str]:
    line = next(li for li in text.splitlines() if li.startswith(label + ":"))
    names = line.split(":", 1)[1].strip()
    return [] if names == "-" else names.split(", ")


def test_08_what_helped_is_what_the_table_kept():
    rows = _tuning_rows()
    text = _output("08", '("helped here"')
    for label, words in (
        ("helped here", "faster"),
        ("no difference", "no difference"),
        ("slower here", "slower"),
        ("undecided", "undecided"),
    ):
        want = [r["step"].strip() for r in rows if r["verdict"].startswith(words)]
        assert _listed(text, label) == want, label


@pytest.mark.parametrize("marker", ["comparison = speed.compare(", "mine = speed.compare("])
def test_08_paired_verdicts_follow_their_interval(marker):
    found = list(PAIRED.finditer(_output("08", marker)))
    assert found
    for m in found:
        assert _agrees(m["verdict"], m["low"], m["high"], int(m["pairs"])), m.group(0)
