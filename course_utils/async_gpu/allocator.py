"""What the CUDA caching allocator holds besides your tensors: the cuBLAS workspace (lesson 03).

cuBLAS needs scratch memory for some matmul algorithms. PyTorch allocates it through its own
caching allocator, one workspace per cuBLAS handle and stream, on the first matmul, and keeps it:
it counts in `memory_allocated()`, and `empty_cache()` cannot return it (it is in use).
`torch._C._cuda_clearCublasWorkspaces()` frees it. Its size is PyTorch's choice, read from
`CUBLAS_WORKSPACE_CONFIG` (":SIZE:COUNT" pairs, SIZE in KiB), and without the variable a default
that depends on the GPU (PyTorch's CublasHandlePool.cpp): ":4096:2:16:8" (8 MiB and 128 KiB),
and ":4096:8" (32 MiB) from Hopper on (compute capability 9.0; newer releases give Blackwell the
same). `cublas_workspace_bytes` is that rule, a function of the GPU's answer, so it is tested
here on a CPU; a GPU run (lesson 03's gated cell) measures it.
"""

from __future__ import annotations

import re

PAIR = re.compile(r":(\d+):(\d+)")


def default_workspace_config(capability: tuple[int, int]) -> str:
    """PyTorch's CUBLAS_WORKSPACE_CONFIG default for a GPU of compute `capability`."""
    major, _minor = capability
    return ":4096:8" if major >= 9 else ":4096:2:16:8"


def workspace_config_bytes(config: str) -> int:
    """Bytes a CUBLAS_WORKSPACE_CONFIG value asks for: the sum of SIZE KiB x COUNT per pair."""
    pairs = PAIR.findall(config)
    if not pairs or PAIR.sub("", config).strip():
        raise ValueError(
            f"CUBLAS_WORKSPACE_CONFIG={config!r} is not a list of :SIZE:COUNT pairs (SIZE in KiB), "
            "such as ':4096:8'; unset it for PyTorch's default"
        )
    return sum(int(size) * int(count) for size, count in pairs) * 1024


def cublas_workspace_bytes(capability: tuple[int, int], config: str | None = None) -> int:
    """The cuBLAS workspace PyTorch allocates per handle and stream on a GPU of `capability`:
    from `config` (the CUBLAS_WORKSPACE_CONFIG value) when set, else PyTorch's default."""
    return workspace_config_bytes(config or default_workspace_config(capability))
