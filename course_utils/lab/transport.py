"""Which transport a job's ranks really use, and its bus bandwidth as nccl-tests define it.
Taught in lesson 10.

With `NCCL_DEBUG=INFO`, NCCL prints one line per channel and peer naming the transport:
    host:pid:tid [dev] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
    host:pid:tid [dev] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA
(formats of NCCL 2.30.7's src/transport/p2p.cc, net.cc and src/debug.cc: nccl_excerpts says
more). A network plugin names itself in place of IB or Socket: aws-ofi-nccl (AWS EFA, HPE
Slingshot) writes "via NET/Libfabric/0/GDRDMA" ("via NET/AWS Libfabric/1(2)/GDRDMA/Shared" up to
its v1.12: a name with a space); its own lines start "NET/OFI", which names no link. `diagnose`
answers "plugin" for such a link, and `network_plugin` names it. gloo prints nothing of the
kind, so the course's programs print, per peer, the TCP connection gloo opened, as the operating
system sees it (`gloo_lines`, in the format of `GLOO_LINE`).

Bus bandwidth (nccl-tests, doc/PERFORMANCE.md, and src/all_reduce.cu's AllReduceGetBw): an
all-reduce of S bytes on n ranks moves each byte 2(n-1)/n times over each rank's link, so
    algbw = S / t   (1e9 bytes/s),   busbw = algbw * 2(n-1)/n,
which is comparable with the link's peak whatever the number of ranks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What each kind of link means, slowest last within a node and across nodes.
KINDS = {
    "p2p": "GPU to GPU directly (P2P: over NVLink where the GPUs have it, else PCIe)",
    "shm": "through host memory (SHM), within a node",
    "ib-gdr": "InfiniBand with GPUDirect RDMA: the network card reads and writes GPU memory",
    "ib": "InfiniBand without GPUDirect RDMA: every transfer goes through host memory",
    "socket": "TCP sockets: NCCL's fallback when it finds no InfiniBand, and what gloo uses",
    "plugin": "a network plugin of NCCL's (aws-ofi-nccl's Libfabric on EFA or Slingshot, ...): "
    "its own log lines say which fabric, and /GDRDMA whether GPUDirect RDMA is on",
}
TAUGHT = ("p2p", "shm", "ib-gdr", "ib", "socket", "plugin")  # what exercise 10.3 names
# slowest first: across nodes the slowest known kind decides; a plugin's speed is its fabric's
NETWORK_ORDER = ("socket", "ib", "ib-gdr", "plugin")
NODE_ORDER = ("shm", "p2p")

GLOO_LINE = "gloo INFO rank {rank} -> rank {peer} via TCP/{interface} {local} -> {remote}"
ALLREDUCE_LINE = "all_reduce: {nbytes} bytes, {ranks} ranks, {ms:.4f} ms (median of {iters})"

_CHANNEL = re.compile(
    r"NCCL INFO Channel \d+(?:/\d+)? ?: (?P<src>\d+)\[\w+\] -> (?P<dst>\d+)\[\w+\]"
    r"(?: \[(?:send|receive)\])? via (?P<via>.+?)\s*$"
)
_NET = re.compile(r"^NET/(?P<net>[^/]+?)/\d+(?:\(\d+\))?(?P<gdr>/GDRDMA)?")
_GLOO = re.compile(r"gloo INFO rank (?P<src>\d+) -> rank (?P<dst>\d+) via TCP/(?P<via>\S+)")
_ALLREDUCE = re.compile(
    r"all_reduce: (?P<nbytes>\d+) bytes, (?P<ranks>\d+) ranks, (?P<ms>[\d.]+) ms"
)


@dataclass(frozen=True)
class Link:
    """One connection a log names: from rank, to rank, kind (a key of KINDS), as written."""

    src: int
    dst: int
    kind: str
    via: str


def _kind(via: str) -> str | None:
    if via.startswith("P2P/"):
        return "p2p"
    if via.startswith("SHM/"):
        return "shm"
    net = _NET.match(via)
    if net is None:
        return None
    if net["net"].startswith("IB"):  # "IB", and plugins such as HPC-X's "IBext"
        return "ib-gdr" if net["gdr"] else "ib"
    if net["net"] == "Socket":
        return "socket"
    return "plugin"  # another network plugin (aws-ofi-nccl's "Libfabric", ...)


def links(log: str) -> list[Link]:
    """Every link an NCCL_DEBUG=INFO log, or the course's gloo lines, name."""
    found = []
    for line in log.splitlines():
        m = _CHANNEL.search(line)
        if m and _kind(m["via"]):
            found.append(Link(int(m["src"]), int(m["dst"]), _kind(m["via"]), m["via"]))
            continue
        g = _GLOO.search(line)
        if g:
            found.append(Link(int(g["src"]), int(g["dst"]), "socket", f"TCP/{g['via']}"))
    return found


def diagnose(log: str) -> str:
    """The transport that limits the job: across nodes the slowest network link named, else
    the slowest link within a node. ValueError when the log names none."""
    kinds = {link.kind for link in links(log)}
    for kind in (*NETWORK_ORDER, *NODE_ORDER):
        if kind in kinds:
            return kind
    raise ValueError(
        "the log names no transport: run with NCCL_DEBUG=INFO (NCCL prints 'Channel ... via "
        "...' lines at start-up) or use the course's program, which prints gloo's connections"
    )


def network_plugin(log: str) -> str | None:
    """The name of the network plugin the log's links go through ("Libfabric"), or None."""
    for link in links(log):
        if link.kind == "plugin":
            return _NET.match(link.via)["net"]
    return None


def describe(log: str) -> str:
    """`diagnose`'s answer in words, naming the plugin where there is one."""
    kind = diagnose(log)
    if kind == "plugin":
        return f"plugin: a network plugin, {network_plugin(log)!r} ({KINDS[kind]})"
    return f"{kind}: {KINDS[kind]}"


def algorithm_bandwidth(nbytes: int, seconds: float) -> float:
    """GB/s (1e9 bytes per second) of moving `nbytes` in `seconds`: nccl-tests' algbw."""
    if nbytes < 0 or seconds <= 0:
        raise ValueError(f"nbytes={nbytes} must be >= 0 and seconds={seconds} > 0")
    return nbytes / 1e9 / seconds


def bus_bandwidth(nbytes: int, seconds: float, ranks: int) -> float:
    """nccl-tests' busbw of an all-reduce: algbw x 2(n-1)/n (0 for a single rank)."""
    if ranks < 1:
        raise ValueError(f"ranks={ranks} must be at least 1")
    return algorithm_bandwidth(nbytes, seconds) * 2 * (ranks - 1) / ranks


@dataclass(frozen=True)
class AllReduce:
    """One all-reduce measurement line of the course's programs."""

    nbytes: int
    ranks: int
    seconds: float

    @property
    def busbw(self) -> float:
        return bus_bandwidth(self.nbytes, self.seconds, self.ranks)

    @property
    def algbw(self) -> float:
        return algorithm_bandwidth(self.nbytes, self.seconds)


def allreduce_results(log: str) -> list[AllReduce]:
    """The `ALLREDUCE_LINE`s of a log, in order."""
    return [
        AllReduce(int(m["nbytes"]), int(m["ranks"]), float(m["ms"]) / 1e3)
        for m in _ALLREDUCE.finditer(log)
    ]


def gloo_lines(
    rank: int, connections, peers: dict, interfaces: dict, store_port: int | None = None
) -> list[str]:
    """`GLOO_LINE`s for this rank's gloo connections.

    connections: (local (ip, port), remote (ip, port)) of this process's TCP connections;
    peers: {(ip, port): rank} of every rank's local endpoints (gathered across ranks), which
    names the rank at the other end; interfaces: {ip: interface name}. Connections to the
    rendezvous store (`store_port`, MASTER_PORT) and to no rank are left out."""
    lines = []
    for local, remote in connections:
        peer = peers.get(tuple(remote))
        if peer is None or peer == rank or store_port in (local[1], remote[1]):
            continue
        interface = interfaces.get(_plain_ip(local[0]), "?")
        lines.append(
            GLOO_LINE.format(
                rank=rank,
                peer=peer,
                interface=interface,
                local=_address(local),
                remote=_address(remote),
            )
        )
    return sorted(lines)


def _plain_ip(ip: str) -> str:
    return ip.removeprefix("::ffff:")  # an IPv4 address seen through an IPv6 socket


def _address(endpoint) -> str:
    return f"{_plain_ip(endpoint[0])}:{endpoint[1]}"
