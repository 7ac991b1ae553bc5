"""crawlstack.fetch.addresses: the allow-list from the IANA special-purpose registries, row by row.

Every answer here comes from the module's own table, never from
``ipaddress.is_global``/``is_private``, so it is the same on Python 3.11-3.13.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from crawlstack.fetch import addresses, http
from crawlstack.fetch.addresses import AddressGuard, AddressRefused, is_public, special_range, why_refused

# One address per table row, decided by that row, and whether it is public.
# The rows that wrap IPv4 (mapped, NAT64, 6to4, Teredo) wrap a public one here; see the embedded tests.
EVERY_ROW = {
    "0.0.0.0/8": ("0.1.2.3", False),
    "0.0.0.0/32": ("0.0.0.0", False),
    "10.0.0.0/8": ("10.1.2.3", False),
    "100.64.0.0/10": ("100.100.100.100", False),  # carrier-grade NAT; Tailscale's resolver
    "127.0.0.0/8": ("127.0.0.1", False),
    "169.254.0.0/16": ("169.254.169.254", False),  # cloud metadata
    "172.16.0.0/12": ("172.31.255.255", False),
    "192.0.0.0/24": ("192.0.0.200", False),
    "192.0.0.0/29": ("192.0.0.1", False),
    "192.0.0.8/32": ("192.0.0.8", False),
    "192.0.0.9/32": ("192.0.0.9", True),
    "192.0.0.10/32": ("192.0.0.10", True),
    "192.0.0.170/32": ("192.0.0.170", False),
    "192.0.0.171/32": ("192.0.0.171", False),
    "192.0.2.0/24": ("192.0.2.1", False),
    "192.31.196.0/24": ("192.31.196.1", True),
    "192.52.193.0/24": ("192.52.193.1", True),
    "192.88.99.0/24": ("192.88.99.1", False),
    "192.168.0.0/16": ("192.168.1.1", False),
    "192.175.48.0/24": ("192.175.48.1", True),
    "198.18.0.0/15": ("198.19.255.1", False),
    "198.51.100.0/24": ("198.51.100.1", False),
    "203.0.113.0/24": ("203.0.113.1", False),
    "240.0.0.0/4": ("240.0.0.1", False),
    "255.255.255.255/32": ("255.255.255.255", False),
    "224.0.0.0/4": ("224.0.0.251", False),
    "::1/128": ("::1", False),
    "::/128": ("::", False),
    "::ffff:0:0/96": ("::ffff:8.8.8.8", True),
    "64:ff9b::/96": ("64:ff9b::8.8.8.8", True),
    "64:ff9b:1::/48": ("64:ff9b:1::8.8.8.8", False),  # local-use NAT64: refused outright
    "100::/64": ("100::1", False),
    "100:0:0:1::/64": ("100:0:0:1::1", False),
    "2001::/23": ("2001:100::1", False),
    "2001::/32": ("2001:0:808:404::f7f7:f7f7", True),  # Teredo: server 8.8.4.4, client 8.8.8.8
    "2001:1::1/128": ("2001:1::1", True),
    "2001:1::2/128": ("2001:1::2", True),
    "2001:1::3/128": ("2001:1::3", True),
    "2001:2::/48": ("2001:2::1", False),
    "2001:3::/32": ("2001:3::1", True),
    "2001:4:112::/48": ("2001:4:112::1", True),
    "2001:10::/28": ("2001:10::1", False),
    "2001:20::/28": ("2001:20::1", True),
    "2001:30::/28": ("2001:30::1", True),
    "2001:db8::/32": ("2001:db8::1", False),
    "2002::/16": ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
    "2620:4f:8000::/48": ("2620:4f:8000::1", True),
    "3fff::/20": ("3fff::1", False),
    "5f00::/16": ("5f00::1", False),
    "fc00::/7": ("fd00::1", False),
    "fe80::/10": ("fe80::1", False),
    "fec0::/10": ("fec0::1", False),
    "ff00::/8": ("ff02::1", False),
}


def test_every_row_of_the_table_has_a_case() -> None:
    # Networks, not their text: Python 3.13 prints ::ffff:0:0/96 as ::ffff:0.0.0.0/96.
    rows = [row.network for row in addresses.SPECIAL_IPV4 + addresses.SPECIAL_IPV6]
    assert len(rows) == len(set(rows))
    assert set(rows) == {ipaddress.ip_network(prefix) for prefix in EVERY_ROW}


@pytest.mark.parametrize("prefix, address, public", [(p, a, g) for p, (a, g) in EVERY_ROW.items()])
def test_each_row_decides_its_addresses(prefix: str, address: str, public: bool) -> None:
    row = special_range(address)
    assert row is not None and row.network == ipaddress.ip_network(prefix)
    assert is_public(address) is public
    reason = why_refused(address)
    assert (reason is None) is public
    if not public:
        assert reason is not None and str(row) in reason


@pytest.mark.parametrize(
    "address, public",
    [
        ("8.8.8.8", True),
        ("1.1.1.1", True),
        ("100.63.255.255", True),  # just below shared address space
        ("100.128.0.0", True),  # just above it
        ("2606:4700:4700::1111", True),
        ("2001:4860:4860::8888", True),  # 2001::/16 but outside 2001::/23
        ("2000::1", True),
        ("3fff:ffff::1", True),  # 2000::/3 beside the 3fff::/20 documentation block
        ("4000::1", False),  # unallocated: refused
        ("::2", False),
        ("::1.2.3.4", False),  # the deprecated IPv4-compatible form: outside 2000::/3
        ("e000::1", False),
    ],
)
def test_an_address_in_no_row_is_public_only_in_global_unicast_space(address: str, public: bool) -> None:
    assert special_range(address) is None
    assert is_public(address) is public


def test_the_longest_prefix_wins() -> None:
    assert is_public("192.0.0.9") and is_public("192.0.0.10")
    assert not is_public("192.0.0.11")
    assert why_refused("192.0.0.11") == "192.0.0.0/24 IETF protocol assignments"
    assert is_public("2001:1::1") and not is_public("2001:1::4")


def test_carrier_grade_nat_is_refused_by_name() -> None:
    assert why_refused("100.100.100.100") == "100.64.0.0/10 shared address space"


@pytest.mark.parametrize(
    "address, public",
    [
        ("::ffff:127.0.0.1", False),
        ("::ffff:169.254.169.254", False),
        ("::ffff:100.100.100.100", False),
        ("2002:a00:1::1", False),  # 6to4 of 10.0.0.1
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("2001:0:808:404::80ff:fffe", False),  # Teredo, client 127.0.0.1 (inverted)
        ("2001:0:a00:1::f7f7:f7f7", False),  # Teredo, server 10.0.0.1
        ("2001:0:808:404::f7f7:f7f7", True),  # Teredo, both public
        ("64:ff9b::10.0.0.1", False),
        ("64:ff9b::127.0.0.1", False),
        ("64:ff9b::8.8.8.8", True),
        ("64:ff9b:1::8.8.8.8", False),  # local-use NAT64 is not unwrapped
    ],
)
def test_embedded_ipv4_is_judged_as_itself(address: str, public: bool) -> None:
    assert is_public(address) is public


def test_a_wrapped_refusal_names_both_rows() -> None:
    assert why_refused("2002:a00:1::1") == "2002::/16 6to4 wrapping 10.0.0.1, 10.0.0.0/8 private-use"


def test_embedded_ipv4_unwraps_each_form() -> None:
    assert [str(a) for a in addresses.embedded_ipv4("::ffff:10.0.0.1")] == ["10.0.0.1"]
    assert [str(a) for a in addresses.embedded_ipv4("64:ff9b::c000:201")] == ["192.0.2.1"]
    assert [str(a) for a in addresses.embedded_ipv4("2002:c000:201::")] == ["192.0.2.1"]
    assert [str(a) for a in addresses.embedded_ipv4("2001:0:808:404::80ff:fffe")] == ["127.0.0.1", "8.8.4.4"]
    assert addresses.embedded_ipv4("2606:4700::1") == () and addresses.embedded_ipv4("10.0.0.1") == ()


@pytest.mark.parametrize("address", ["224.0.0.1", "239.255.255.250", "ff02::1", "ff0e::1", "::ffff:224.0.0.1"])
def test_multicast_is_refused(address: str) -> None:
    assert not is_public(address)


def test_a_scoped_ipv6_address_is_judged_without_its_zone() -> None:
    assert why_refused("fe80::1%eth0") == "fe80::/10 link-local unicast"
    assert AddressGuard(["fe80::/10"]).refusal("fe80::1%eth0") is None
    assert AddressGuard().refusal("fe80::1%eth0") == (
        "address fe80::1 is not public (use --allow-private to allow it): fe80::/10 link-local unicast"
    )


def test_http_keeps_the_guard_under_its_old_names() -> None:
    assert http.AddressGuard is AddressGuard and http.AddressRefused is AddressRefused


def test_the_refusal_message_keeps_its_shape() -> None:
    message = AddressGuard().refusal("10.0.0.1")
    assert message == "address 10.0.0.1 is not public (use --allow-private to allow it): 10.0.0.0/8 private-use"
    assert AddressGuard().refusal("8.8.8.8") is None


@pytest.mark.parametrize(
    "address, allowed",
    [("::ffff:127.0.0.1", "127.0.0.0/8"), ("::ffff:169.254.169.254", "169.254.0.0/16"), ("::ffff:a00:1", "10.0.0.0/8")],
)
def test_an_allowed_cidr_allows_the_ipv4_mapped_form_too(address: str, allowed: str) -> None:
    # Refused as the IPv4 address it maps to, so allowed as that address is; other CIDRs still refuse it.
    assert AddressGuard([allowed]).refusal(address) is None
    assert AddressGuard(["192.168.0.0/16"]).refusal(address) is not None


@pytest.mark.parametrize(
    "allowed, address, reachable",
    [
        ("127.0.0.0/8", "127.0.0.1", True),
        ("127.0.0.0/8", "10.0.0.1", False),
        ("100.64.0.0/10", "100.100.100.100", True),
        ("10.0.0.0/8", "2002:a00:1::1", True),  # 6to4 of an allowed address
        ("10.0.0.0/8", "64:ff9b::10.0.0.1", True),
        ("127.0.0.0/8", "2001:0:808:404::80ff:fffe", True),  # Teredo client allowed, server public
        ("127.0.0.0/8", "2001:0:a00:1::80ff:fffe", False),  # ... but the server 10.0.0.1 is not
        ("64:ff9b:1::/48", "64:ff9b:1::10.0.0.1", True),  # the user named the IPv6 block itself
        ("fc00::/7", "fd12:3456::1", True),
        ("fc00::/7", "fe80::1", False),
        ("  10.0.0.0/8 ", "10.9.9.9", True),
    ],
)
def test_allow_private_opens_exactly_what_it_names(allowed: str, address: str, reachable: bool) -> None:
    assert (AddressGuard([allowed]).refusal(address) is None) is reachable


def test_equal_allow_lists_share_a_key() -> None:
    assert AddressGuard(["10.0.0.0/8", "127.0.0.1/8"]).key == AddressGuard(["127.0.0.0/8", "10.0.0.0/8", " "]).key


def _resolving_to(monkeypatch: pytest.MonkeyPatch, answers: list[str]) -> None:
    def getaddrinfo(host: str, port: Any, *args: Any, **kw: Any) -> list[Any]:
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def test_resolve_refuses_a_name_if_any_address_is_not_public(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolving_to(monkeypatch, ["8.8.8.8", "100.100.100.100"])
    with pytest.raises(AddressRefused, match=r"^address 100\.100\.100\.100 is not public"):
        AddressGuard().resolve("mixed.example", 80)


def test_resolve_keeps_the_zone_of_an_allowed_scoped_address(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolving_to(monkeypatch, ["fe80::1%eth0", "8.8.8.8"])
    guard = AddressGuard(["fe80::/10"])
    assert guard.resolve("link.example", 80) == ["fe80::1%eth0", "8.8.8.8"]
    assert guard.check("link.example", 80) == "fe80::1%eth0"  # the zone is needed to connect


def test_a_failed_lookup_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_answer(*args: Any, **kw: Any) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_answer)
    with pytest.raises(AddressRefused, match="DNS lookup failed"):
        AddressGuard().check("nowhere.example", 80)
