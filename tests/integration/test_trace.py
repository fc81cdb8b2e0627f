"""Reachability on the logical flows, checked with ovn-trace: an instance
port of one network reaches one of the other only while the peering is
Bound, and a spoofed source is dropped."""

from __future__ import annotations

import subprocess

from netpeer.ovn import names


def add_port(d, net, name, ip):
    mac = names.instance_mac(net["uid"], name)
    d.ovn.nbctl("lsp-add", names.switch(net["uid"]), name, "--", "lsp-set-addresses", name, f"{mac} {ip}")
    return mac


def trace(d, net, inport, mac, src, dst, v6=False, detailed=False):
    d.ovn.nbctl("--wait=sb", "sync")
    rmac = names.router_mac(net["uid"])
    if v6:
        flow = (f'inport == "{inport}" && eth.src == {mac} && eth.dst == {rmac} && ip6.src == {src} '
                f'&& ip6.dst == {dst} && ip.ttl == 64 && icmp6.type == 128')
    else:
        flow = (f'inport == "{inport}" && eth.src == {mac} && eth.dst == {rmac} && ip4.src == {src} '
                f'&& ip4.dst == {dst} && ip.ttl == 64 && icmp4.type == 8')
    out = subprocess.run(["ovn-trace", f"--db={d.ovn.sb_remote}", *([] if detailed else ["--minimal"]), names.switch(net["uid"]), flow],
                         capture_output=True, text=True, env={**d.ovn.env(), "PATH": "/usr/bin:/usr/sbin:/bin"},
                         timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def reaches(output: str, port: str) -> bool:
    return f'output("{port}")' in output


def test_trace_reachability_and_spoofing(netpeerd):
    a, b = netpeerd.tenant("team-a"), netpeerd.tenant("team-b")
    na = a.create_network("team-a", "net-a", ["10.1.0.0/24", "fd00:a::/64"])
    nb = b.create_network("team-b", "net-b", ["10.2.0.0/24", "fd00:b::/64"])
    mac_a = add_port(netpeerd, na, "inst-a", "10.1.0.10 fd00:a::10")
    add_port(netpeerd, nb, "inst-b", "10.2.0.10 fd00:b::10")

    assert not reaches(trace(netpeerd, na, "inst-a", mac_a, "10.1.0.10", "10.2.0.10"), "inst-b")
    a.create_peering("team-a", "net-a", "to-b", "net-b", "team-b")
    assert not reaches(trace(netpeerd, na, "inst-a", mac_a, "10.1.0.10", "10.2.0.10"), "inst-b")

    assert b.create_peering("team-b", "net-b", "to-a", "net-a", "team-a")["phase"] == "Bound"
    assert reaches(trace(netpeerd, na, "inst-a", mac_a, "10.1.0.10", "10.2.0.10"), "inst-b")
    assert reaches(trace(netpeerd, na, "inst-a", mac_a, "fd00:a::10", "fd00:b::10", v6=True), "inst-b")

    # A source outside A's prefixes (B's own range, or anything else) is dropped
    # by A's router policies before it reaches the peer link.
    assert not reaches(trace(netpeerd, na, "inst-a", mac_a, "10.2.0.99", "10.2.0.10"), "inst-b")
    detail = trace(netpeerd, na, "inst-a", mac_a, "10.2.0.99", "10.2.0.10", detailed=True)
    policy = detail[detail.index("lr_in_policy"):]
    assert "ip4.dst == $np_" in policy and "drop;" in policy.split("\n\n")[0], policy
    assert not reaches(trace(netpeerd, na, "inst-a", mac_a, "192.0.2.7", "10.2.0.10"), "inst-b")

    b.delete_peering("team-b", "net-b", "to-a")
    assert not reaches(trace(netpeerd, na, "inst-a", mac_a, "10.1.0.10", "10.2.0.10"), "inst-b")
