"""Draws docs/img/cross_site_topology.png: two sites of the dev stack
(``netpeer dev up --sites east,west --ha-gateways``) and what joins them.

    python docs/img/cross_site_topology.py [OUT.png]

Needs matplotlib (the ``bench`` extra). The picture is drawn from the boxes
below, nothing else: change them when the topology changes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

SITE = "#eef4fb"
CONTROL = "#fde8c8"
OVN = "#d6e9d0"
GATEWAY = "#c8dcf0"
WG = "#f4c7c3"
TENANT = "#ffffff"


def box(ax, x, y, w, h, text, color, size=8, weight="normal", dashed=False):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc=color, ec="#333333",
                                lw=1, ls="--" if dashed else "-"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight, wrap=True)


def arrow(ax, a, b, text="", color="#333333", style="<->", ls="-", offset=(0, 0.12)):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=10, color=color, lw=1.3, ls=ls))
    if text:
        ax.text((a[0] + b[0]) / 2 + offset[0], (a[1] + b[1]) / 2 + offset[1], text, ha="center", va="bottom",
                fontsize=7, color=color)


def site(ax, x0, name, tenant, net, vm):
    box(ax, x0, 0.6, 5.2, 7.6, "", SITE)
    ax.text(x0 + 2.6, 7.95, f"site {name}  (an OVN availability zone)", ha="center", fontsize=10, weight="bold")
    box(ax, x0 + 0.2, 6.2, 4.8, 1.3, f"netpeerd ({name})\nown store: {name}'s halves + mirror of the other's\n"
        "tenant API  |  SiteService ([interconnect] listen)", CONTROL, size=7)
    box(ax, x0 + 0.2, 4.6, 4.8, 1.2, f"OVN NB / SB / ovn-northd / ovn-ic\nNB_Global name = {name}, BFD 100 ms x 3\n"
        f"HA_Chassis_Group np-gw-{name}", OVN, size=7)
    box(ax, x0 + 0.2, 2.9, 1.5, 1.3, "gw1\ngateway\nprio 20\n(active)", GATEWAY, size=7)
    box(ax, x0 + 1.85, 2.9, 1.5, 1.3, "gw2\ngateway\nprio 10\n(standby)", GATEWAY, size=7)
    box(ax, x0 + 3.5, 2.9, 1.5, 1.3, f"hv\ninstances\n{vm} on\n{tenant}/{net}", GATEWAY, size=6.5)
    box(ax, x0 + 0.2, 0.9, 4.8, 1.5, "site router (a namespace)\nwireguard-go, key 0600\n"
        "underlay of the site's chassis", WG, size=7)
    arrow(ax, (x0 + 2.6, 6.2), (x0 + 2.6, 5.8), style="->")
    for cx in (0.95, 2.6, 4.25):
        arrow(ax, (x0 + 2.6, 4.6), (x0 + cx, 4.2), style="->")
        arrow(ax, (x0 + cx, 2.9), (x0 + 2.6, 2.4), color="#666666", style="-")


def draw(out: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 6.4))
    ax.set_xlim(0, 14)
    ax.set_ylim(0, 9.6)
    ax.axis("off")
    site(ax, 0.2, "east", "team-a", "net-a", "vm-a")
    site(ax, 8.6, "west", "team-b", "net-b", "vm-b")
    box(ax, 5.75, 7.2, 2.5, 1.4, "IC NB + IC SB\ntransit switch\nnp-ts-east-west", OVN, size=7)
    arrow(ax, (5.2, 5.2), (5.75, 7.5), color="#2e7d32", style="->")
    arrow(ax, (8.8, 5.2), (8.25, 7.5), color="#2e7d32", style="->")
    box(ax, 5.75, 1.05, 2.5, 1.2, "simulated WAN\n(only WireGuard\nUDP 51820 on it)", "#eeeeee", size=7, dashed=True)
    arrow(ax, (5.2, 1.65), (5.75, 1.65), color="#b71c1c")
    arrow(ax, (8.25, 1.65), (8.8, 1.65), color="#b71c1c")
    arrow(ax, (5.2, 6.85), (8.8, 6.85), "SiteService.Exchange\n(gRPC: pair secret,\noptional mTLS)\n"
          "inside WireGuard", color="#e65100", ls="--", offset=(0, -1.15))
    arrow(ax, (5.2, 3.55), (8.8, 3.55), "GENEVE between gateways,\ninside WireGuard", color="#1565c0",
          ls="--", offset=(0, 0.1))
    ax.text(7.0, 0.15, "a peering half in east names west:team-b/net-b; the one in west names east:team-a/net-a; "
            "Bound when both are ready and the link answers", ha="center", fontsize=8, style="italic")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    draw(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("cross_site_topology.png"))
