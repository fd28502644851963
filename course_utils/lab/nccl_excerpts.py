"""NCCL_DEBUG=INFO excerpts for the transports lesson 10 cannot run on a CPU: CONSTRUCTED, not
recorded. Each is written in the line format NCCL 2.30.7 prints (the version of the course's
pinned wheel, nvidia-nccl-cu13 2.30.7), every line checked against NCCL's source at tag
v2.30.7-1 (and aws-ofi-nccl's at v1.21.1 for the network plugin) and against logs that users
posted in public issue threads (the `sources` of each excerpt); host names, process ids and
addresses are made up. A log recorded on a GPU node would replace them.

What 2.30.7 prints (src/debug.cc: "<host>:<pid>:<tid> [<cuda device>] NCCL INFO <text>"):
- P2P, src/transport/p2p.cc: "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s" with CUMEM
  (or MNNVL), "/read" only for two sm_80 GPUs over NVLink (A100: src/graph/paths.cc), "/CE"
  for copy engines. cuMem is on by default since 2.19 where the driver supports it (CUDA 12
  and newer: src/misc/cudawrap.cc, NCCL_CUMEM_ENABLE=-2); the legacy "via P2P/CUMEM" of
  older logs appears only with NCCL_CUMEM_ENABLE=0 or an older driver. Printed by the sender.
- SHM, src/transport/shm.cc: "Channel %02d : %d[%d] -> %d[%d] via SHM/direct".
- NET, src/transport/net.cc: "Channel %02d/%d : ... [send] via NET/%s/%d%s%s%s" (the network's
  name, its device, "/GDRDMA" when GPUDirect RDMA is on, "(PCI)", "/Shared"); the name is "IB",
  "Socket" or a plugin's: aws-ofi-nccl (EFA, Slingshot) registers "Libfabric".
- "Bootstrap: Using ib0:..." (src/bootstrap.cc; "Bootstrap : Using" up to 2.23), "Using network
  IB" (src/init.cc), "NET/IB : Using [0]mlx5_0:1/IB ...; OOB ..." and "NET/IB : No device found."
  (src/transport/net_ib/init.cc), "NET/Socket : Using [0]eth0:..." (net_socket.cc).
- "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'" (src/graph/topo.cc) belongs to the NET
  subsystem only: shown with NCCL_DEBUG_SUBSYS=INIT,NET (as slurm/lab_scaling.sh sets it), not
  with NCCL_DEBUG=INFO alone. GPUDirect RDMA needs the nvidia-peermem module or a DMA-BUF
  capable kernel and driver.
Since 2.22 NCCL connects peers at the first collective (NCCL_RUNTIME_CONNECT=1), so the channel
lines come then, not at initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass

NCCL_SOURCE = (
    "https://github.com/NVIDIA/nccl/tree/v2.30.7-1 (src/debug.cc, src/transport/p2p.cc, shm.cc, "
    "net.cc, net_socket.cc, net_ib/init.cc, src/graph/topo.cc, src/bootstrap.cc, src/init.cc)"
)
OFI_SOURCE = (
    "https://github.com/aws/aws-ofi-nccl/tree/v1.21.1 (src/nccl_ofi_interface_nvidia.cpp: the "
    'plugin\'s name "Libfabric"; include/nccl_ofi_log.h: its lines start "NET/OFI "; '
    "src/nccl_ofi_net.cpp)"
)


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
        "2 GPUs of one node talking directly (P2P over NVLink or PCIe: H100s; A100s print "
        "P2P/CUMEM/read)",
        "p2p",
        """\
gpu-a01:20114:20114 [0] NCCL INFO Bootstrap: Using ib0:10.1.0.11<0>
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
gpu-a01:20115:20191 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM
gpu-a01:20114:20190 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM
gpu-a01:20115:20191 [1] NCCL INFO Channel 01/0 : 1[1] -> 0[0] via P2P/CUMEM""",
        (
            "https://github.com/NVIDIA/nccl/issues/952 (lines 'Channel 01/0 : 8[0] -> 15[7] via "
            "P2P/IPC/read')",
            NCCL_SOURCE,
        ),
    ),
    "ib-gdr": Excerpt(
        "2 nodes over InfiniBand with GPUDirect RDMA",
        "ib-gdr",
        """\
gpu-a01:20114:20114 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.11<0>
gpu-a01:20114:20114 [0] NCCL INFO Using network IB
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
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
        "2 nodes over InfiniBand, GPUDirect RDMA off (no nvidia-peermem, no DMA-BUF)",
        "ib",
        """\
gpu-a01:20114:20114 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.1.0.11<0>
gpu-a01:20114:20114 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
gpu-a01:20115:20192 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0
gpu-a02:31877:31950 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0""",
        (
            "https://github.com/NVIDIA/nccl/issues/899 ('GPU Direct RDMA Disabled for HCA 1 "
            "'mlx5_1' (no module)' and '[receive] via NET/IB/0')",
            "https://github.com/NVIDIA/nccl/issues/1412 (a maintainer, on channel lines without "
            "GDRDMA: 'Have you loaded the nvidia-peermem module or used a DMA-BUF enabled GPU "
            "driver + Kernel?')",
            "src/graph/topo.cc at v2.30.7-1: \"NET/%s : GPU Direct RDMA %s for HCA %d '%s'\" "
            "(INFO of the NET subsystem: shown under NCCL_DEBUG_SUBSYS=INIT,NET; older NCCLs "
            "added ' (no module)'); the channel lines without /GDRDMA are the sign that stays",
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
gpu-a01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
gpu-a01:20115:20192 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0
gpu-a02:31877:31950 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/Socket/0""",
        (
            "https://github.com/NVIDIA/nccl/issues/226 ('NET/IB : No device found.' and "
            "'NET/Socket : Using [0]ens3:172.31.12.210<0>')",
            "https://github.com/NVIDIA/nccl/issues/952 ('[send] via NET/Socket/3')",
            NCCL_SOURCE,
        ),
    ),
    "plugin": Excerpt(
        "2 nodes over AWS EFA through a network plugin (aws-ofi-nccl; HPE Slingshot alike)",
        "plugin",
        """\
gpu-p01:20114:20114 [0] NCCL INFO NET/Plugin: Loaded net plugin Libfabric (v12)
gpu-p01:20114:20114 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.21.1
gpu-p01:20114:20114 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)
gpu-p01:20114:20114 [0] NCCL INFO Initialized NET plugin Libfabric
gpu-p01:20114:20114 [0] NCCL INFO Using network Libfabric
gpu-p01:20114:20190 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
gpu-p01:20115:20192 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Libfabric/0/GDRDMA
gpu-p02:31877:31950 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [receive] via NET/Libfabric/0/GDRDMA""",  # noqa: E501
        (
            "https://github.com/aws/aws-ofi-nccl/issues/715 ('[receive] via NET/AWS "
            "Libfabric/1/GDRDMA/Shared': the plugin was named 'AWS Libfabric' up to v1.12; and "
            "'NET/OFI ...' lines)",
            OFI_SOURCE,
            NCCL_SOURCE + "; src/plugin/net/net_v12.cc: 'NET/Plugin: Loaded net plugin %s (v12)'",
        ),
    ),
}
