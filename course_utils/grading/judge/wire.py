"""Answers as plain data: what crosses the boundary between the learner's process and the judge.

The learner's side `encode`s what their code returned; the judge `decode`s it with
`torch.load(weights_only=True)`, which rebuilds tensors and Python's own containers and refuses
any class of the learner's (a tensor subclass whose `__torch_function__` says True to `equal`, a
float subclass that fits any bound, an ndarray subclass for `np.allclose`). `decode` then walks
the value and keeps only exact types: `torch.Tensor`, `int`, `float`, `bool`, `str`, `bytes`,
`None`, `list`, `tuple`, `dict`, `torch.dtype`, `torch.device`, and NumPy arrays, which travel as
a tagged tensor. Nothing of the learner's runs in the judge, whatever the bytes say.
"""

from __future__ import annotations

import collections
import io
import pathlib
import re
import warnings

import numpy as np
import torch

from course_utils.messages import MAX_PAYLOAD

_NDARRAY = "__course_ndarray__"  # the tag of a NumPy array (a tensor of its data and dtype)
_SCALARS = (int, float, bool, str, bytes, type(None), torch.dtype, torch.device)


class NotPlain(ValueError):
    """An answer that is not plain data: the message names what came and the rule."""


def to_plain(value):
    """What `encode` saves, made on the learner's side: NumPy's own arrays and scalars and
    paths become plain values; anything else goes as it is (and `decode` judges it)."""
    if type(value) is np.ndarray:
        return {_NDARRAY: torch.from_numpy(np.ascontiguousarray(value).copy())}
    if isinstance(value, np.generic) and type(value).__module__ == "numpy":
        return value.item()  # np.float64 and friends: NumPy's own scalar classes
    if isinstance(value, pathlib.PurePath) and type(value).__module__.startswith("pathlib"):
        return str(value)
    if type(value) in (list, tuple):
        return type(value)(to_plain(v) for v in value)
    if type(value) in (dict, collections.OrderedDict):
        return {k: to_plain(v) for k, v in value.items()}
    if type(value) is torch.nn.Parameter:
        return value.detach()
    return value


def encode(value) -> bytes:
    """`value` as bytes for the judge (torch.save of `to_plain(value)`)."""
    buffer = io.BytesIO()
    torch.save(to_plain(value), buffer)
    return buffer.getvalue()


def decode(data: bytes):
    """The plain value in `data`, or NotPlain naming why it is not one. Runs no code of the
    sender's: the unpickler of `torch.load(weights_only=True)` only builds allowed types."""
    if len(data) > MAX_PAYLOAD:
        raise NotPlain(f"an answer of {len(data):,} bytes, over the {MAX_PAYLOAD:,} a check reads")
    try:
        with warnings.catch_warnings():  # what the bytes provoke is not the judge's to show
            warnings.simplefilter("ignore")
            value = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as e:  # the unpickler refused a class: name it, in a few words
        found = re.search(r"GLOBAL ([\w.]+)", str(e))
        what = f" ({found[1]})" if found else ""
        raise NotPlain(
            f"an answer that is not plain data{what}: an object of a class of your own, such as "
            "a subclass of torch.Tensor, float or numpy.ndarray, is refused; return plain "
            "tensors, numbers, strings, lists and dicts"
        ) from None
    return from_plain(value)


def from_plain(value, where: str = "the answer"):
    """`value` with every part checked for an exact plain type (NumPy arrays rebuilt)."""
    kind = type(value)
    if kind is torch.Tensor:
        return value
    if kind is torch.nn.Parameter:
        return value.detach()
    if kind is torch.Size:
        return tuple(value)
    if kind in _SCALARS:
        return value
    if kind in (list, tuple):
        return kind(from_plain(v, f"{where}[{i}]") for i, v in enumerate(value))
    if kind in (dict, collections.OrderedDict):
        if set(value) == {_NDARRAY}:
            return _ndarray(value[_NDARRAY], where)
        bad = [k for k in value if type(k) not in (str, int, float, bool, tuple)]
        if bad:
            raise NotPlain(f"{where}: a dict key of type {type(bad[0]).__name__}")
        return {k: from_plain(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise NotPlain(f"{where}: a {kind.__name__}, not plain data")


def _ndarray(tensor, where: str) -> np.ndarray:
    if type(tensor) is not torch.Tensor:
        raise NotPlain(f"{where}: a NumPy array whose data is a {type(tensor).__name__}")
    return tensor.numpy()
