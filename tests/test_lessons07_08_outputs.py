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


# ---- lesson 08: the tuner's verdicts against the spread ---------------------------------------

ROW = re.compile(
    r"^(?P<step>.+?)\s+(?P<rate>[\d,]+)\s+(?P<best>[\d,]+)\s+(?P<change>[+-]\d+)% vs best "
    r"\((?P<how>beyond|within) (?P<needed>\d+)%\): (?P<verdict>.+)$"
)


def _tuning_rows() -> list[dict]:
    rows = []
    for line in _output("08", "speed.tune(").splitlines():
        m = ROW.match(line)
        if m:
            rows.append(m.groupdict())
    assert len(rows) >= 5
    return rows


def test_08_each_tuning_verdict_follows_its_rates_and_spread():
    for row in _tuning_rows():
        rate, best = _number(row["rate"]), _number(row["best"])
        change, needed = int(row["change"]), int(row["needed"])
        low, high = (rate - 0.5) / (best + 0.5), (rate + 0.5) / (best - 0.5)  # printed rounded
        assert 100 * (low - 1) - 0.5 <= change <= 100 * (high - 1) + 0.5, row
        assert (row["how"] == "within") == (abs(change) <= needed), row  # up to rounding
        if row["how"] == "within":
            assert row["verdict"].startswith("no difference measured, dropped"), row
        else:
            want = "kept" if change > 0 else "dropped"
            assert row["verdict"].startswith(want), row


def _listed(text: str, label: str) -> list[str]:
    line = next(li for li in text.splitlines() if li.startswith(label + ":"))
    names = line.split(":", 1)[1].strip()
    return [] if names == "-" else names.split(", ")


def test_08_what_helped_is_what_the_table_kept():
    rows = _tuning_rows()
    text = _output("08", '("helped here"')
    kept = [r["step"].strip() for r in rows if r["verdict"].startswith("kept")]
    same = [r["step"].strip() for r in rows if r["how"] == "within"]
    assert _listed(text, "helped here") == kept
    assert _listed(text, "no difference measured") == same


@pytest.mark.parametrize("marker", ["comparison = speed.compare(", "mine = speed.compare("])
def test_08_side_by_side_verdicts_follow_their_spread(marker):
    text = _output("08", marker)
    m = re.search(r"([\d.]+)x,? \(?medians of \d alternations, spread (\d+)%\): (.+)$", text, re.M)
    assert m, text
    ratio, spread, verdict = float(m[1]), int(m[2]) / 100, m[3]
    needed = max(0.03, spread)
    if verdict == "faster":
        assert ratio - 1 > needed - 0.01
    elif verdict == "slower":
        assert 1 - ratio > needed - 0.01
    else:
        assert verdict == "no difference measured" and abs(ratio - 1) <= needed + 0.01
