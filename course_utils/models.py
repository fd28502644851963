"""The lesson models: the CIFAR-10 CNN of the cluster documentation, and a wider variant
(lesson 02; every later lesson trains the same CNN)."""

from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    """The small CIFAR-10 CNN of PyTorch's tutorial, as the cluster documentation trains it."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class WideNet(nn.Module):
    """A wider CNN with BatchNorm: enough work per image for GPU and precision lessons to show."""

    def __init__(self, num_classes: int = 10, width: int = 32):
        super().__init__()

        def block(cin, cout):
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
            )

        self.features = nn.Sequential(
            block(3, width), block(width, 2 * width), block(2 * width, 4 * width)
        )
        self.head = nn.Linear(4 * width * 4 * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class TinyNet(nn.Sequential):
    """A small MLP with dropout, so the RNG state matters for an exact resume."""

    def __init__(self, hidden: int = 32, num_classes: int = 10):
        super().__init__(
            nn.Flatten(),
            nn.Linear(3 * 32 * 32, hidden),
            nn.ReLU(),
            nn.Dropout(0.2),
            nn.Linear(hidden, num_classes),
        )


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def parameter_hash(model: nn.Module) -> str:
    """SHA-256 (first 16 hex digits) of all parameters and buffers, bit for bit.

    Equal hashes mean bitwise-equal models: DDP replicas after training, or a resumed run and an
    uninterrupted one.
    """
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def parameter_sum(model: nn.Module) -> float:
    """One number for a model's parameters, in float64: what a job leaves in its record for a
    check to compare with its own training of the same steps, within a tolerance (DDP replicas
    and one process agree to about 1e-8 per parameter, not bit for bit). Lessons 05 and 09."""
    return sum(float(p.detach().double().sum()) for p in model.parameters())
