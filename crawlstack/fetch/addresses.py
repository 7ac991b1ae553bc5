"""Which IP addresses the crawler may connect to: an allow-list from the IANA registries.

The crawler runs next to cloud metadata services, VPC peers and whatever a
user's own network holds, so every address a host resolves to is judged
before a connection is made (``AddressGuard`` below, used by
``crawlstack.fetch.http``).  The judgement is an *allow-list*:

* The IANA special-purpose address registries (iana-ipv4-special-registry and
  iana-ipv6-special-registry), plus the multicast, site-local and reserved
  blocks they leave to other registries, are kept in this module as a table.
  Each row says whether the registry calls the block "globally reachable";
  ``N/A`` (``None`` here) counts as not.  The longest matching prefix decides,
  so 192.0.0.9/32 (global) wins over 192.0.0.0/24 (not global).
* An address in no row is public only if it lies in allocated global unicast
  space: for IPv4 anything left, for IPv6 2000::/3 only (4000::/3 and the
  other unallocated blocks are refused).
* An IPv6 address that carries an IPv4 address is judged by that IPv4
  address (every one it carries), because that is where the packets end up:
  IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96 (the last 32 bits), 6to4
  2002::/16 (the 32 bits after the prefix) and Teredo 2001::/32 (the client,
  the last 32 bits inverted, and the server, bits 32-63).  So 6to4 or NAT64
  wrapping 10.0.0.1 is refused and wrapping 8.8.8.8 is allowed.
* The local-use NAT64 prefix 64:ff9b:1::/48 is refused outright, not
  unwrapped: the registry calls it not global, it only reaches a network's
  own translator, and where the IPv4 address sits inside it depends on a
  prefix length the operator chose.

``ipaddress.is_global`` / ``is_private`` are not used: their answers changed
between Python 3.11, 3.12 and 3.13.  ``ipaddress`` only tests containment.

Setting: per crawl, ``allow_private`` CIDRs (``--allow-private CIDR``) open
exactly the addresses they hold, and an IPv6 address wrapping an IPv4 address
such a CIDR holds (a CIDR allowing 127.0.0.1 allows ::ffff:127.0.0.1 too).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import NamedTuple, TypeAlias

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSAL = "is not public (use --allow-private to allow it)"


class AddressRefused(Exception):
    """The host resolves to an address the crawl may not reach."""


class SpecialRange(NamedTuple):
    """One registry row: a block, what it is for, and whether it is globally reachable."""

    network: IPNetwork
    purpose: str
    # The registry's "Globally Reachable" column; None where it says N/A.
    globally_reachable: bool | None
    # As the registry writes it: Python 3.13 prints ::ffff:0:0/96 as ::ffff:0.0.0.0/96.
    prefix: str

    def __str__(self) -> str:
        return f"{self.prefix} {self.purpose}"


def _table(*rows: tuple[str, str, bool | None]) -> tuple[SpecialRange, ...]:
    return tuple(
        SpecialRange(ipaddress.ip_network(prefix), purpose, reachable, prefix) for prefix, purpose, reachable in rows
    )


# iana-ipv4-special-registry, in its order, then 224.0.0.0/4 from the multicast registry.
SPECIAL_IPV4 = _table(
    ("0.0.0.0/8", "this network", False),
    ("0.0.0.0/32", "this host on this network", False),
    ("10.0.0.0/8", "private-use", False),
    ("100.64.0.0/10", "shared address space", False),
    ("127.0.0.0/8", "loopback", False),
    ("169.254.0.0/16", "link-local", False),
    ("172.16.0.0/12", "private-use", False),
    ("192.0.0.0/24", "IETF protocol assignments", False),
    ("192.0.0.0/29", "IPv4 service continuity prefix", False),
    ("192.0.0.8/32", "IPv4 dummy address", False),
    ("192.0.0.9/32", "port control protocol anycast", True),
    ("192.0.0.10/32", "TURN anycast", True),
    ("192.0.0.170/32", "NAT64/DNS64 discovery", False),
    ("192.0.0.171/32", "NAT64/DNS64 discovery", False),
    ("192.0.2.0/24", "documentation (TEST-NET-1)", False),
    ("192.31.196.0/24", "AS112-v4", True),
    ("192.52.193.0/24", "AMT", True),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast", None),
    ("192.168.0.0/16", "private-use", False),
    ("192.175.48.0/24", "direct delegation AS112 service", True),
    ("198.18.0.0/15", "benchmarking", False),
    ("198.51.100.0/24", "documentation (TEST-NET-2)", False),
    ("203.0.113.0/24", "documentation (TEST-NET-3)", False),
    ("240.0.0.0/4", "reserved", False),
    ("255.255.255.255/32", "limited broadcast", False),
    ("224.0.0.0/4", "multicast", False),
)

# iana-ipv6-special-registry, in its order, then site-local (RFC 3879) and multicast.
SPECIAL_IPV6 = _table(
    ("::1/128", "loopback", False),
    ("::/128", "unspecified", False),
    ("::ffff:0:0/96", "IPv4-mapped", False),
    ("64:ff9b::/96", "IPv4/IPv6 translation (NAT64)", True),
    ("64:ff9b:1::/48", "local-use IPv4/IPv6 translation", False),
    ("100::/64", "discard-only", False),
    ("100:0:0:1::/64", "dummy IPv6 prefix", False),
    ("2001::/23", "IETF protocol assignments", False),
    ("2001::/32", "Teredo", None),
    ("2001:1::1/128", "port control protocol anycast", True),
    ("2001:1::2/128", "TURN anycast", True),
    ("2001:1::3/128", "DNS-SD service registration protocol anycast", True),
    ("2001:2::/48", "benchmarking", False),
    ("2001:3::/32", "AMT", True),
    ("2001:4:112::/48", "AS112-v6", True),
    ("2001:10::/28", "deprecated ORCHID", None),
    ("2001:20::/28", "ORCHIDv2", True),
    ("2001:30::/28", "drone remote ID entity tags", True),
    ("2001:db8::/32", "documentation", False),
    ("2002::/16", "6to4", None),
    ("2620:4f:8000::/48", "direct delegation AS112 service", True),
    ("3fff::/20", "documentation", False),
    ("5f00::/16", "segment routing SIDs", False),
    ("fc00::/7", "unique-local", False),
    ("fe80::/10", "link-local unicast", False),
    ("fec0::/10", "deprecated site-local", False),
    ("ff00::/8", "multicast", False),
)

# Longest prefix first, so the first row that holds an address is the one that decides.
_BY_PREFIX_LENGTH = sorted(SPECIAL_IPV4 + SPECIAL_IPV6, key=lambda row: row.network.prefixlen, reverse=True)

IPV6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_6TO4 = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_LOW_32_BITS = 0xFFFFFFFF


def as_address(address: str | IPAddress) -> IPAddress:
    """``address`` as an ``ipaddress`` object, any IPv6 zone (``fe80::1%eth0``) dropped.

    Raises ValueError for text that is not an IP address.
    """
    return ipaddress.ip_address(str(address).split("%", 1)[0])


def special_range(address: str | IPAddress) -> SpecialRange | None:
    """The registry row that decides ``address`` (the longest prefix holding it), or None."""
    ip = as_address(address)
    return next((row for row in _BY_PREFIX_LENGTH if ip in row.network), None)


def embedded_ipv4(address: str | IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address stands for: IPv4-mapped, NAT64, 6to4, Teredo; else ().

    For Teredo, the client first, then the server.  The local-use NAT64 prefix
    64:ff9b:1::/48 is not unwrapped (see the module docstring).
    """
    ip = as_address(address)
    if ip.version == 4:
        return ()
    bits = int(ip)
    if ip in _IPV4_MAPPED or ip in _NAT64:
        return (ipaddress.IPv4Address(bits & _LOW_32_BITS),)
    if ip in _6TO4:
        return (ipaddress.IPv4Address((bits >> 80) & _LOW_32_BITS),)
    if ip in _TEREDO:
        client = (bits & _LOW_32_BITS) ^ _LOW_32_BITS
        server = (bits >> 64) & _LOW_32_BITS
        return (ipaddress.IPv4Address(client), ipaddress.IPv4Address(server))
    return ()


def why_refused(address: str | IPAddress) -> str | None:
    """Why ``address`` is not public, naming the registry row (``"100.64.0.0/10 shared
    address space"``), or None if it is public."""
    ip = as_address(address)
    row = special_range(ip)
    wrapped = embedded_ipv4(ip)
    if wrapped:
        for ipv4 in wrapped:
            reason = why_refused(ipv4)
            if reason is not None:
                return f"{row} wrapping {ipv4}, {reason}"
        return None
    if row is not None:
        return None if row.globally_reachable else str(row)
    if ip.version == 6 and ip not in IPV6_GLOBAL_UNICAST:
        return f"outside the IPv6 global unicast space {IPV6_GLOBAL_UNICAST}"
    return None


def is_public(address: str | IPAddress) -> bool:
    """Whether the crawler may reach ``address`` without an ``allow_private`` CIDR."""
    return why_refused(address) is None


class AddressGuard:
    """Refuses every address that is not public (see the module docstring).

    Unless a CIDR in ``allow_private`` holds the address, or holds every IPv4
    address the (IPv6) address wraps that is not public itself.
    """

    def __init__(self, allow_private: Iterable[str] = ()) -> None:
        self.allowed = [ipaddress.ip_network(c.strip(), strict=False) for c in allow_private if c.strip()]
        # Guards with equal keys allow the same addresses, so they may share connection pools.
        self.key = tuple(sorted(str(net) for net in self.allowed))

    def resolve(self, host: str, port: int) -> list[str]:
        """Every address ``host`` resolves to, all of them checked; raises AddressRefused."""
        try:
            infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise AddressRefused(f"DNS lookup failed: {exc}") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            refusal = self.refusal(address)
            if refusal is not None:
                raise AddressRefused(refusal)
        return addresses

    def check(self, host: str, port: int) -> str:
        """Resolve ``host`` and return the first address, or raise AddressRefused."""
        return self.resolve(host, port)[0]

    def refusal(self, address: str | IPAddress) -> str | None:
        """The message refusing ``address``, or None if this guard lets the crawl reach it."""
        ip = as_address(address)
        if self._holds(ip):
            return None
        reason = why_refused(ip)
        if reason is None:
            return None
        wrapped = embedded_ipv4(ip)
        if wrapped and all(self._holds(ipv4) or is_public(ipv4) for ipv4 in wrapped):
            return None
        return f"address {ip} {REFUSAL}: {reason}"

    def _holds(self, ip: IPAddress) -> bool:
        return any(ip in net for net in self.allowed)
