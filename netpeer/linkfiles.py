"""What netpeerd reads from files for its links to other sites: each link's
pair secret, and with mTLS this site's certificate and key and the CAs it
trusts. Read and checked together, at start and on every reload, so that a
mistake is one line naming the setting and the file, and a reload with one
changes nothing."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from netpeer import certs
from netpeer.config import Config
from netpeer.errors import InvalidArgument

__all__ = ["LinkFiles", "read", "read_secret"]


@dataclasses.dataclass(frozen=True)
class LinkFiles:
    """The contents of a configuration's link files."""

    endpoints: dict[str, str]              # site -> its [sites.NAME] endpoint
    secrets: dict[str, str]                # site -> the pair's secret
    cert: bytes | None = None              # [interconnect] cert and key: this site's
    key: bytes | None = None
    ca: bytes | None = None                # [interconnect] ca: who may call this site
    cas: dict[str, bytes | None] = dataclasses.field(default_factory=dict)   # site -> the CA its endpoint is checked
    #                                        against ([sites.NAME] ca_cert, else [interconnect] ca)


def read(config: Config) -> LinkFiles:
    """Reads and checks every link file ``config`` names; InvalidArgument
    (one line: the setting and the file) on the first that is wrong."""
    secrets = {link.name: read_secret(f"sites.{link.name}.secret_file", link.secret_file) for link in config.sites}
    cert = key = None
    if config.site_cert is not None:
        cert, key = certs.check_pair("interconnect.cert", config.site_cert, "interconnect.key", config.site_key)
    ca = certs.check_ca("interconnect.ca", config.site_ca) if config.site_ca else None
    cas = {link.name: certs.check_ca(f"sites.{link.name}.ca_cert", link.ca_cert) if link.ca_cert else ca
           for link in config.sites}
    return LinkFiles({link.name: link.endpoint for link in config.sites}, secrets, cert, key, ca, cas)


def read_secret(field: str, path: Path) -> str:
    """A secret (a site link's, the metrics endpoint's token or password):
    a private file with one line."""
    try:
        mode = os.stat(path).st_mode
        secret = Path(path).read_text().strip()
    except OSError as exc:
        raise InvalidArgument.for_field(field, str(path), f"cannot be read ({exc.strerror})") from None
    if mode & 0o077:
        raise InvalidArgument.for_field(field, str(path), f"is readable by others (mode {mode & 0o777:o}): "
                                        "chmod 600 it")
    if len(secret) < 16:
        raise InvalidArgument.for_field(field, str(path), "holds no secret of at least 16 characters")
    return secret
