"""NCCL_DEBUG=INFO excerpts for the transports lesson 10 cannot run on a CPU: CONSTRUCTED, not
recorded. Each is written in the line format NCCL prints, checked against NCCL's source and
against logs that users posted in public issue threads (the `sources` of each excerpt); host
names, process ids and addresses are made up. A log recorded on a GPU node would replace them.

Line format (NCCL 2.30.7, src/debug.cc): "<host>:<pid>:<tid> [<cuda device>] NCCL INFO <text>";
the channel lines come from src/transport/p2p.cc ("Channel %02d/%01d : %d[%d] -> %d[%d] via
P2P/IPC%s%s"), net.cc ("... [send] via NET/%s/%d%s" with "/GDRDMA" when GPUDirect RDMA is on),
net_socket.cc ("NET/Socket : Using%s") and net_ib/init.cc ("NET/IB : No device found.").
"""

from __future__ import annotations

from dataclasses import dataclass

NCCL_SOURCE = "https://github.com/NVIDIA/nccl (src/debug.cc, src/transport/p2p.cc, net.cc, net_socket.cc, net_ib/init.cc; v2.30.7)"  # noqa: E501


@dataclass(frozen=True)
class Excerpt:
    """A constructed log excerpt, the transport it shows, and where its lines were checked."""

    title: str
    kind: str  # a key of transport.KINDS
    text: str
    sources: tuple[str, ...]

    def labelled(self) -> str:
        """The text under a header that says it was constructed, and from what."""
        return f"# CONSTRUCTED, not recorded: {self.title}\n{self.text}"


EXCERPTS = {
    "nvlink": Excerpt(
        "2 GPUs of one node talking directly (NVLink on this node)",
        "p2p",
        """\
gpu-a01:20114:20114 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.11<0>
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
gpu-a01:20115:20191 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC/read
gpu-a01:20114:20190 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read
gpu-a01:20115:20191 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/IPC/read""",
        (
            "https://github.com/NVIDIA/nccl/issues/952 (lines 'Channel 01/0 : 8[0] -> 15[7] via "
            "P2P/IPC/read')",
            "https://github.com/NVIDIA/Megatron-LM/issues/516 ('via P2P/IPC/read' within a node)",
            NCCL_SOURCE,
        ),
    ),
    "ib-gdr": Excerpt(
        "2 nodes over InfiniBand with GPUDirect RDMA",
        "ib-gdr",
        """\
gpu-a01:20114:20114 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.11<0>
gpu-a01:20114:20114 [0] NCCL INFO Using network IB
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
gpu-a01:20115:20192 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA
gpu-a02:31877:31950 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA""",  # noqa: E501
        (
            "https://github.com/NVIDIA/nccl/issues/707 ('[send] via NET/IB/2/GDRDMA')",
            "https://github.com/NVIDIA/nccl/issues/307 (a maintainer: with GPUDirect RDMA "
            "'you should be able to see logs like [send] via NET/IB/<id>/GDRDMA')",
            "https://github.com/Mellanox/nv_peer_memory/issues/56 ('NET/IB : Using "
            "[0]mlx5_0:1/IB ; OOB ib0:...')",
            NCCL_SOURCE,
        ),
    ),
    "ib": Excerpt(
        "2 nodes over InfiniBand, GPUDirect RDMA off (no nvidia-peermem module)",
        "ib",
        """\
gpu-a01:20114:20114 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.1.0.11<0>
gpu-a01:20114:20189 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
gpu-a01:20115:20192 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0
gpu-a02:31877:31950 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0""",
        (
            "https://github.com/NVIDIA/nccl/issues/899 ('GPU Direct RDMA Disabled for HCA 1 "
            "'mlx5_1' (no module)' and '[receive] via NET/IB/0')",
            "https://github.com/NVIDIA/nccl/issues/1412 (a maintainer, on channel lines without "
            "GDRDMA: 'Have you loaded the nvidia-peermem module or used a DMA-BUF enabled GPU "
            "driver + Kernel?')",
            "the 'GPU Direct RDMA Disabled ... (no module)' line is printed at INFO by the NCCL "
            "of issue 899; NCCL 2.30 logs it only at TRACE (src/graph/paths.cc): the channel "
            "lines without /GDRDMA are the sign that stays",
            NCCL_SOURCE,
        ),
    ),
    "socket": Excerpt(
        "2 nodes that found no InfiniBand: NCCL's silent fallback to TCP sockets",
        "socket",
        """\
gpu-a01:20114:20114 [0] NCCL INFO NET/IB : No device found.
gpu-a01:20114:20114 [0] NCCL INFO NET/Socket : Using [0]eth0:10.2.0.11<0>
gpu-a01:20114:20114 [0] NCCL INFO Using network Socket
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read
gpu-a01:20115:20192 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0
gpu-a02:31877:31950 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/Socket/0""",
        (
            "https://github.com/NVIDIA/nccl/issues/226 ('NET/IB : No device found.' and "
            "'NET/Socket : Using [0]ens3:172.31.12.210<0>')",
            "https://github.com/NVIDIA/nccl/issues/952 ('[send] via NET/Socket/3')",
            NCCL_SOURCE,
        ),
    ),
}
