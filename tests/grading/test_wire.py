"""wire: answers cross to the judge as plain data, decoded without running code, exact types."""

import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from course_utils.grading.judge import wire


def roundtrip(value):
    return wire.decode(wire.encode(value))


def test_plain_values_come_back_with_their_exact_types():
    value = {
        "t": torch.arange(3.0),
        "a": np.arange(4, dtype=np.int16),
        "f": np.float64(2.5),  # NumPy's own scalar: a plain float
        "p": Path("runs/09"),  # a path: its text
        "nested": [1, (2.0, "x"), {"k": None, "b": True}],
        "param": torch.nn.Parameter(torch.ones(2)),
        "size": torch.Size([2, 3]),
    }
    got = roundtrip(value)
    assert type(got["t"]) is torch.Tensor and torch.equal(got["t"], torch.arange(3.0))
    assert type(got["a"]) is np.ndarray and got["a"].dtype == np.int16
    assert type(got["f"]) is float and got["f"] == 2.5
    assert got["p"] == "runs/09" and got["nested"] == [1, (2.0, "x"), {"k": None, "b": True}]
    assert type(got["param"]) is torch.Tensor and got["size"] == (2, 3)


class LyingTensor(torch.Tensor):
    """Says True to every comparison: what a learner who knows some Python could return."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose, torch.Tensor.__eq__):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class FitsAnything(float):
    def __le__(self, other):
        return True

    def __ge__(self, other):
        return True


class AlwaysClose(np.ndarray):
    pass


@pytest.mark.parametrize(
    "liar",
    [
        torch.zeros(3).as_subclass(LyingTensor),
        FitsAnything(1.0),
        np.zeros(3).view(AlwaysClose),
        {"records": [FitsAnything(0.5)]},
    ],
    ids=["tensor subclass", "float subclass", "ndarray subclass", "nested"],
)
def test_an_object_of_the_learners_own_class_is_refused(liar):
    with pytest.raises(wire.NotPlain, match="not plain data"):
        roundtrip(liar)


def test_a_crafted_pickle_runs_nothing(tmp_path):
    """Bytes that would create a folder when unpickled: refused, and nothing is created."""
    marker = tmp_path / "PWNED"

    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    buffer = io.BytesIO()
    torch.save({"x": Payload()}, buffer)
    with pytest.raises(wire.NotPlain):
        wire.decode(buffer.getvalue())
    with pytest.raises(wire.NotPlain):
        wire.decode(pickle.dumps(Payload()))
    assert not marker.exists()


def test_a_flood_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(wire, "MAX_PAYLOAD", 100)
    with pytest.raises(wire.NotPlain, match="over the 100 a check reads"):
        wire.decode(b"x" * 101)
