"""``netpeer site cert ...``: the certificates of the links between sites
(``netpeer.certs``): a region CA, a site's certificate and key, and what a
certificate says. Runs where the files are; talks to no netpeerd."""

from __future__ import annotations

import argparse

from netpeer import certs
from netpeer.cli import output
from netpeer.cli.commands import Command


def add_parser(sub, g: argparse.ArgumentParser, parser_class) -> None:
    site = sub.add_parser("site", help="what an operator runs for the links between sites").add_subparsers(
        dest="action", required=True, parser_class=parser_class)
    cert = site.add_parser("cert", help="the links' mTLS certificates: region CA, site certificates").add_subparsers(
        dest="cert_action", required=True, parser_class=parser_class)
    ca = cert.add_parser("ca", parents=[g], help=f"make a region CA: {certs.CA_CERT} and {certs.CA_KEY} in DIR "
                                                 "(keep the key off the sites)")
    ca.add_argument("--out", required=True, metavar="DIR", help="where to write them (made 0700 if missing)")
    ca.add_argument("--days", type=int, default=certs.MAX_DAYS, help=f"valid this long (default {certs.MAX_DAYS})")
    issue = cert.add_parser("issue", parents=[g], help="issue SITE's certificate and key, signed by the region CA "
                                                       "(again later: a rotation; then reload netpeerd)")
    issue.add_argument("site", metavar="SITE")
    issue.add_argument("--ca", required=True, metavar="DIR", help=f"the directory with {certs.CA_CERT} and "
                                                                  f"{certs.CA_KEY}")
    issue.add_argument("--out", required=True, metavar="DIR",
                       help="where to write site-SITE.crt, site-SITE.key and region-ca.crt (0600; replaced)")
    issue.add_argument("--dns", action="append", default=[], metavar="NAME",
                       help="a DNS name the other sites reach SITE by (repeatable)")
    issue.add_argument("--ip", action="append", default=[], metavar="ADDRESS",
                       help="an address the other sites reach SITE at, its [interconnect] listen (repeatable)")
    issue.add_argument("--days", type=int, default=365, help="valid this long (default 365)")
    show = cert.add_parser("show", parents=[g], help="what a certificate is and when it expires")
    show.add_argument("file", metavar="FILE")


def run(ctx, args) -> int:
    if args.cert_action == "ca":
        path, key = certs.make_ca(args.out, args.days)
        _emit(ctx, certs.read(path), f"key:         {key} (0600: keep it where the certificates are issued, "
                                     "not on the sites)")
    elif args.cert_action == "issue":
        path, key = certs.issue(args.site, args.ca, args.out, tuple(args.dns), tuple(args.ip), args.days)
        _emit(ctx, certs.read(path), f"key:         {key} (0600)\n"
                                     f"next:        install {path.name}, {key.name} and {certs.CA_CERT} in "
                                     f"{args.site}'s /etc/netpeer, then `systemctl reload netpeerd` there")
    else:
        _emit(ctx, certs.read(args.file), "")
    return 0


def _emit(ctx, info: certs.CertInfo, extra: str) -> None:
    data = info.to_json()

    def render(d: dict) -> str:
        left = d["expires_in_days"]
        expiry = "EXPIRED" if d["expired"] else f"in {left} day{'s' if left != 1 else ''}"
        lines = [f"file:        {d['file']}", f"subject:     {d['subject']}", f"issuer:      {d['issuer']}",
                 f"ca:          {'yes' if d['ca'] else 'no'}", f"dns:         {', '.join(d['dns'])}",
                 f"ip:          {', '.join(d['ips'])}", f"serial:      {d['serial']}",
                 f"not before:  {d['not_before']}", f"not after:   {d['not_after']} ({expiry})",
                 f"sha256:      {d['sha256']}"]
        return "\n".join(lines + ([extra] if extra else []))

    output.emit(data, ctx.output, render)


COMMAND = Command("site", add_parser, run)
