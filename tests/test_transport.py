"""transport: bus bandwidth as nccl-tests define it, the links an NCCL_DEBUG=INFO log or the
course's gloo lines name, and the constructed NCCL excerpts of lesson 10."""

import re

import pytest

from course_utils.lab import transport
from course_utils.lab.nccl_excerpts import EXCERPTS

# NCCL's INFO line: "<host>:<pid>:<tid> [<cuda device>] NCCL INFO <text>" (src/debug.cc)
NCCL_LINE = re.compile(r"^[\w.-]+:\d+:\d+ \[\d+\] NCCL INFO \S.*$")


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n():
    # nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n for an all-reduce
    assert transport.algorithm_bandwidth(1_000_000_000, 0.5) == pytest.approx(2.0)
    assert transport.bus_bandwidth(1_000_000_000, 0.5, 2) == pytest.approx(2.0)
    assert transport.bus_bandwidth(1_000_000_000, 0.5, 8) == pytest.approx(2.0 * 14 / 8)
    assert transport.bus_bandwidth(1_000_000_000, 0.5, 1) == 0.0
    with pytest.raises(ValueError, match="seconds=0 > 0"):
        transport.bus_bandwidth(10, 0, 2)
    with pytest.raises(ValueError, match="ranks=0 must be at least 1"):
        transport.bus_bandwidth(10, 1, 0)


@pytest.mark.parametrize(
    "line, kind",
    [
        ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read", "p2p"),
        ("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/direct pointer", "p2p"),
        ("h:1:2 [0] NCCL INFO Channel 01/0 : 2[2] -> 3[3] via P2P/CUMEM/read", "p2p"),
        ("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct", "shm"),
        (
            "h:1:2 [3] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA",
            "ib-gdr",
        ),
        ("h:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0(1)/GDRDMA", "ib-gdr"),
        ("h:1:2 [0] NCCL INFO Channel 00 : 0[1a000] -> 1[1a000] [receive] via NET/IB/0", "ib"),
        ("h:1:2 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3", "socket"),
        ("gloo INFO rank 0 -> rank 1 via TCP/lo 127.0.0.1:1 -> 127.0.0.1:2", "socket"),
        ("h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct", "shm"),  # 2.30.7
        ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM", "p2p"),  # 2.30.7
        # aws-ofi-nccl: "Libfabric" since v1.13, "AWS Libfabric" before (aws-ofi-nccl#715)
        (
            "h:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Libfabric/0/GDRDMA",
            "plugin",
        ),
        (
            "h:1:2 [2] NCCL INFO Channel 04/1 : 15[7] -> 2[2] [receive] via NET/AWS "
            "Libfabric/1/GDRDMA/Shared",
            "plugin",
        ),
    ],
)
def test_links_name_the_transport(line, kind):
    (link,) = transport.links(line)
    assert link.kind == kind


def test_lines_that_name_no_link_are_left_out():
    log = (
        "h:1:2 [0] NCCL INFO NET/IB : No device found.\n"
        "h:1:2 [0] NCCL INFO Channel 00/02 :    0   1\n"  # a ring, not a link
    )
    assert transport.links(log) == []
    with pytest.raises(ValueError, match="the log names no transport: run with NCCL_DEBUG=INFO"):
        transport.diagnose(log)


def test_across_nodes_the_slowest_network_link_decides():
    p2p = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
    ib = "h:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0\n"
    gdr = "h:1:2 [0] NCCL INFO Channel 01/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA\n"
    assert transport.diagnose(p2p) == "p2p"
    assert transport.diagnose(p2p + gdr) == "ib-gdr"
    assert transport.diagnose(p2p + gdr + ib) == "ib"  # one HCA without GPUDirect slows all


def test_a_network_plugin_is_named_not_misread():
    """aws-ofi-nccl's links (EFA, Slingshot) are "a network plugin", named; across nodes the
    plugin's link decides over the P2P links within a node."""
    log = EXCERPTS["plugin"].text
    assert transport.diagnose(log) == "plugin" and transport.network_plugin(log) == "Libfabric"
    assert transport.describe(log).startswith("plugin: a network plugin, 'Libfabric' (")
    assert transport.network_plugin(EXCERPTS["ib"].text) is None
    socket = "h:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0\n"
    assert transport.diagnose(log + "\n" + socket) == "socket"  # a known slow link still decides


# What NCCL 2.30.7 prints (checked at its tag v2.30.7-1): the formats each excerpt line follows.
V2_30_7 = [
    r"Bootstrap: Using \w+:[\d.]+<0>",  # src/bootstrap.cc (no space before ':' since 2.24)
    r"Channel \d\d/\d : \d+\[\d+\] -> \d+\[\d+\] via P2P/(CUMEM|MNNVL)(/read)?(/CE)?",  # p2p.cc
    r"Channel \d\d : \d+\[\d+\] -> \d+\[\d+\] via SHM/direct",  # shm.cc
    r"Channel \d\d/\d : \d+\[\d+\] -> \d+\[\d+\] \[(send|receive)\] via NET/[^/]+/\d+(/GDRDMA)?",
    r"NET/IB : Using( \[\d\]\w+:\d/(IB|RoCE))+ (\[RO\])?; OOB \w+:[\d.]+<0>",  # net_ib/init.cc
    r"NET/IB : No device found\.",
    r"NET/IB : GPU Direct RDMA (Enabled|Disabled) for HCA \d+ '\w+'",  # src/graph/topo.cc
    r"NET/Socket : Using( \[\d\]\w+:[\d.]+<0>)+",  # net_socket.cc
    r"Using network \w+",  # src/init.cc
    r"NET/Plugin: Loaded net plugin \w+ \(v12\)",  # src/plugin/net/net_v12.cc
    r"Initialized NET plugin \w+",  # src/plugin/net.cc
    r"NET/OFI .+",  # aws-ofi-nccl's own lines (include/nccl_ofi_log.h)
]


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_every_excerpt_line_is_one_nccl_2_30_7_prints(name):
    for line in EXCERPTS[name].text.splitlines():
        text = line.split(" NCCL INFO ", 1)[1]
        assert any(re.fullmatch(f, text) for f in V2_30_7), line
    assert "P2P/IPC" not in EXCERPTS[name].text  # the legacy path: NCCL_CUMEM_ENABLE=0 only


@pytest.mark.parametrize("name", sorted(EXCERPTS))
def test_each_constructed_excerpt_is_in_nccls_format_and_names_its_transport(name):
    excerpt = EXCERPTS[name]
    assert all(NCCL_LINE.match(line) for line in excerpt.text.splitlines()), excerpt.text
    assert transport.diagnose(excerpt.text) == excerpt.kind
    assert excerpt.labelled().startswith("# CONSTRUCTED, not recorded: ")
    cited = [s for s in excerpt.sources if s.startswith("https://github.com/")]
    assert len(cited) >= 2, "each excerpt names NCCL's source and a public thread"


def test_allreduce_lines_are_read_back():
    line = transport.ALLREDUCE_LINE.format(nbytes=4194304, ranks=4, ms=20.0, iters=5)
    assert line == "all_reduce: 4194304 bytes, 4 ranks, 20.0000 ms (median of 5)"
    (result,) = transport.allreduce_results("noise\n" + line + "\n")
    assert (result.nbytes, result.ranks, result.seconds) == (4194304, 4, 0.02)
    assert result.busbw == pytest.approx(4194304 / 1e9 / 0.02 * 1.5)


def test_gloo_lines_name_each_peer_and_leave_the_store_out():
    connections = [
        (("127.0.0.1", 40001), ("127.0.0.1", 50001)),  # to rank 1
        (("::ffff:127.0.0.1", 40002), ("::ffff:127.0.0.1", 29500)),  # to the store
        (("10.0.0.5", 40003), ("10.0.0.6", 60001)),  # to rank 2, over eth0
    ]
    peers = {("127.0.0.1", 50001): 1, ("10.0.0.6", 60001): 2, ("127.0.0.1", 29500): 0}
    lines = transport.gloo_lines(
        0, connections, peers, {"127.0.0.1": "lo", "10.0.0.5": "eth0"}, store_port=29500
    )
    assert lines == [
        "gloo INFO rank 0 -> rank 1 via TCP/lo 127.0.0.1:40001 -> 127.0.0.1:50001",
        "gloo INFO rank 0 -> rank 2 via TCP/eth0 10.0.0.5:40003 -> 10.0.0.6:60001",
    ]
