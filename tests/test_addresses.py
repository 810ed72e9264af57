"""service.addresses: every per-client count names its client one way."""

from __future__ import annotations

import pytest

from service.addresses import client_of, network_of, unmapped


@pytest.mark.parametrize(("address", "client", "network"), [
    ("192.0.2.7", "192.0.2.7", "192.0.2.0/24"),
    ("::ffff:192.0.2.7", "192.0.2.7", "192.0.2.0/24"),  # a dual-stack socket's IPv4
    ("::FFFF:c000:0207", "192.0.2.7", "192.0.2.0/24"),  # the same, spelt otherwise
    ("2001:db8:1:2::1", "2001:db8:1:2::/64", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64", "2001:db8:1:2::/64"),
    ("fe80::1%eth0", "fe80::/64", "fe80::/64"),  # a zone names no other host
    ("-", "-", "-"),
    ("", "-", "-"),
    (None, "-", "-"),
    ("not an address", "not an address", "not an address"),
])
def test_one_client_is_one_name_however_its_address_is_spelt(address, client, network):
    assert client_of(address) == client
    assert network_of(address) == network


def test_two_hosts_of_one_ipv6_subscriber_are_one_client_and_ipv4_hosts_are_two():
    assert client_of("2001:db8::1") == client_of("2001:db8::ffff:1")
    assert client_of("192.0.2.1") != client_of("192.0.2.2")
    assert network_of("192.0.2.1") == network_of("192.0.2.254")
    assert network_of("192.0.2.1") != network_of("192.0.3.1")


def test_unmapped_writes_a_mapped_ipv4_as_ipv4_and_leaves_the_rest():
    assert unmapped("::ffff:10.1.2.3") == "10.1.2.3"
    assert unmapped("2001:db8::1") == "2001:db8::1"
    assert unmapped("10.1.2.3") == "10.1.2.3"
    assert unmapped(None) == "-"
