"""Lesson 02 held to its sources: the cluster documentation's eight general steps of
a PyTorch script, numbered as the documentation numbers them; its "6%" quoted without a claim
of how it was measured, which the page does not say; and the line that the sliders need the
widget extension in a hub's server environment."""

import re

import nbformat
import pytest

from course_utils.paths import REPO_ROOT

LESSON = REPO_ROOT / "solutions" / "02_cpu_to_gpu.ipynb"
# The documentation's "Coding a Pytorch Model: General Steps", in its order and words.
STEPS = [
    "import the torch package",
    "read in the data",
    "preprocess the data",
    "design the network model",
    "define the learning process",
    "train the model",
    "apply the model to the test data",
    "display the results",
]


@pytest.fixture(scope="module")
def prose() -> str:
    cells = nbformat.read(LESSON, as_version=4).cells
    return "\n".join(c.source for c in cells if c.cell_type == "markdown")


def test_the_steps_are_the_documentations_eight_in_its_order(prose):
    named = re.findall(r"\*\*[Ss]tep (\d)[,:]\s+([^*.]+?)[*.]", prose)
    found = [(int(n), " ".join(text.split()).lower()) for n, text in named]
    assert [n for n, _ in found] == list(range(1, 9)), found
    assert [text for _, text in found] == STEPS


def test_the_six_percent_is_quoted_without_saying_how_it_was_measured(prose):
    assert "6% of its compute capacity during training" in prose
    assert (
        "it does not say how that\n# figure was measured" not in prose
    )  # (markdown, not a script)
    assert re.search(r"does not say how that\s+figure was measured", prose)
    assert "is the other quantity" not in prose  # the claim that it is SM activity


def test_the_sliders_say_they_need_the_widget_extension_on_a_hub(prose):
    assert re.search(
        r"sliders need the\s+widget extension \(`jupyterlab_widgets`\) in the hub's server", prose
    )
