"""Names and addresses the Internet's standards reserve for documentation.

RFC 2606 and RFC 6761 reserve example.com, example.net, example.org and the `.example` top-level domain;
RFC 5737 the IPv4 blocks 192.0.2.0/24, 198.51.100.0/24 and 203.0.113.0/24; RFC 3849 the IPv6 prefix
2001:db8::/32. A manual that writes one shows an example: no real server, mailbox or address has it.
Asked "What is the IP address of our central log server?", the model answered "The central log server's IP
address is central.example.net [2]": rsyslog's TLS tutorial names its scenario's server so (session 64).
"""

from __future__ import annotations

import ipaddress
import re

_HOST = re.compile(
    r"(?<![\w.@-])((?:[\w.+-]+@)?(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*(?:example\.(?:com|net|org)|[a-z0-9-]+\.example))"
    r"(?![\w-]|\.[a-z0-9])",
    re.I,
)
_IPV4 = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d{1,3}){3})(?![\w]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])(2001:0?db8(?::[0-9a-f]{0,4}){1,7})(?![\w:])", re.I)
_NETWORKS = [
    ipaddress.ip_network(net) for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
]


def documentation_values(text: str) -> list[str]:
    """The reserved example names, mail addresses and IP addresses `text` writes, in order, each once."""
    found = [(m.start(), m.group(1)) for m in _HOST.finditer(text)]
    addresses = (m for pattern in (_IPV4, _IPV6) for m in pattern.finditer(text))
    found += [(m.start(), m.group(1)) for m in addresses if _reserved(m.group(1))]
    return list(dict.fromkeys(value for _, value in sorted(found)))


def _reserved(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _NETWORKS if network.version == ip.version)
