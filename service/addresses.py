"""Who a client is, for counting it: one address, or one network.

Every per-client count of the service — request budgets, failed guesses, open streams and
long-polls, creation quotas, new owners — names its client by one of the two functions
here, so that one client is one counter however its socket spells its address:

- ``client_of``: an IPv4 address as it is; an IPv4-mapped IPv6 address (``::ffff:a.b.c.d``,
  a dual-stack listener's view of an IPv4 client) as the IPv4 it maps; any other IPv6
  address as its /64 (one subscriber's network, in which a host may pick any address);
- ``network_of``: the wider net that a larger cap counts — IPv4 /24, IPv6 /64.

A zone index (``fe80::1%eth0``) names no other host and is dropped. Anything that is not
an address (``-`` when there is none) counts as itself. Imports nothing of the service.
"""

from __future__ import annotations

import functools
import ipaddress

IPV4_NETWORK = 24  # prefix length of an IPv4 client's network
IPV6_CLIENT = 64  # prefix length of one IPv6 client (and of its network)
# Answers kept per function: every request names its client several times (its budget, its
# slots, its network's share), and parsing an address with ``ipaddress`` costs more than
# the rest of that accounting; the answers are pure, so a bounded memo of the addresses
# seen lately serves the repeats. A flood of new addresses only turns the memo over.
_MEMO = 4096


def _parse(address: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not address:
        return None
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


@functools.lru_cache(maxsize=_MEMO)
def unmapped(address: str | None) -> str:
    """``address`` with an IPv4-mapped IPv6 form written as its IPv4 (else as given)."""
    ip = _parse(address)
    return str(ip) if ip is not None and ip.version == 4 else (address or "-")


@functools.lru_cache(maxsize=_MEMO)
def client_of(address: str | None) -> str:
    """The client ``address`` counts as (see the module docstring)."""
    ip = _parse(address)
    if ip is None:
        return address or "-"
    if ip.version == 6:
        return str(ipaddress.IPv6Network((ip, IPV6_CLIENT), strict=False))
    return str(ip)


@functools.lru_cache(maxsize=_MEMO)
def network_of(address: str | None) -> str:
    """The network ``address`` counts in: its IPv4 /24 or IPv6 /64."""
    ip = _parse(address)
    if ip is None:
        return address or "-"
    prefix = IPV4_NETWORK if ip.version == 4 else IPV6_CLIENT
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))
