"""The callback address guard: every IPv6 form that embeds or routes to an IPv4
address, site-local, and anything whose embedded IPv4 is not public is refused, by one
function (``is_public_address``) at registration and again at connection time; public
IPv4 and IPv6 addresses pass."""

from __future__ import annotations

import contextlib
import socket
import threading
from ipaddress import ip_address

import pytest

from service.arena.webhooks.calls import Guard, is_public_address, make_pool, parse_networks, post

REFUSED = [
    # IPv4-compatible ::/96 (``::7f00:1`` is ``::127.0.0.1``), a public IPv4 inside too
    ("::7f00:1", "IPv4-compatible loopback"),
    ("::127.0.0.1", "IPv4-compatible, dotted"),
    ("::808:808", "IPv4-compatible, public IPv4 inside"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    # IPv4-mapped ::ffff:0:0/96 in every spelling, and IPv4-translated ::ffff:0:0:0/96
    ("::ffff:127.0.0.1", "mapped, dotted"),
    ("::ffff:7f00:1", "mapped, hex"),
    ("0:0:0:0:0:ffff:7f00:1", "mapped, in full"),
    ("0000:0000:0000:0000:0000:FFFF:7F00:0001", "mapped, padded upper case"),
    ("::ffff:10.0.0.1", "mapped private"),
    ("::ffff:8.8.8.8", "mapped, public IPv4 inside"),
    ("::ffff:0:7f00:1", "IPv4-translated loopback"),
    ("::ffff:0:808:808", "IPv4-translated, public inside"),
    # NAT64
    ("64:ff9b::7f00:1", "NAT64 well-known, loopback inside"),
    ("64:ff9b::808:808", "NAT64 well-known, public inside"),
    ("64:ff9b:1::a00:1", "NAT64 local-use"),
    ("64:ff9b:1:ffff::1", "NAT64 local-use, end of the /48"),
    # 6to4 and Teredo
    ("2002:7f00:1::1", "6to4, loopback inside"),
    ("2002:808:808::1", "6to4, public inside"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    ("2001:0:ffff:ffff::1", "Teredo, end of the /32"),
    # site-local, and the rest of the usual
    ("fec0::1", "site-local"),
    ("feff::1", "site-local, end of the /10"),
    ("fe80::1", "link-local"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    # ISATAP interface id with a private IPv4 inside a global prefix
    ("2600::5efe:a00:1", "ISATAP, private inside"),
    ("2600::200:5efe:7f00:1", "ISATAP (u bit), loopback inside"),
    # IPv4
    ("127.0.0.1", "loopback"), ("10.1.2.3", "private"), ("172.16.0.1", "private"),
    ("192.168.1.1", "private"), ("169.254.169.254", "link-local (cloud metadata)"),
    ("100.64.0.1", "shared (CGNAT)"), ("0.0.0.0", "unspecified"), ("224.0.0.1", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "broadcast"),
    ("192.0.2.1", "documentation"),
]
PUBLIC = [
    ("93.184.216.34", "public IPv4"), ("8.8.8.8", "public IPv4"), ("1.1.1.1", "public IPv4"),
    ("2606:4700::1111", "public IPv6"), ("2001:4860:4860::8888", "public IPv6 in 2001::/16"),
    ("2a00:1450:4001:81b::200e", "public IPv6"),
    ("2600::5efe:808:808", "ISATAP id with a public IPv4 inside"),
]


@pytest.mark.parametrize(("ip", "form"), REFUSED)
def test_a_refused_form_is_not_public(ip, form):
    assert not is_public_address(ip_address(ip)), form
    assert not Guard().allows(ip_address(ip)), form
    host = f"[{ip}]" if ":" in ip else ip
    assert Guard().literal_refused(host), form


@pytest.mark.parametrize(("ip", "form"), PUBLIC)
def test_a_public_address_passes(ip, form):
    assert is_public_address(ip_address(ip)), form
    assert Guard().allows(ip_address(ip)), form
    host = f"[{ip}]" if ":" in ip else ip
    assert not Guard().literal_refused(host), form


def test_an_allowed_network_admits_the_ipv6_forms_of_its_ipv4_addresses():
    """What the tests' own loopback servers rely on (``ARENA_CALLBACK_NETWORKS``)."""
    opened = Guard(parse_networks("127.0.0.0/8, fd00::/8"))
    for ip in ("127.0.0.5", "::ffff:127.0.0.1", "fd12::1"):
        assert opened.allows(ip_address(ip)), ip
    for ip in ("10.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "fec0::1"):
        assert not opened.allows(ip_address(ip)), ip


@pytest.mark.parametrize("ip", ["::ffff:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1",
                                "2002:7f00:1::1", "fec0::1"])
def test_every_form_is_refused_at_registration(client, ip):
    token = client.post("/bots", json={"name": "hook"}).json["token"]
    r = client.put("/bots/me/callback", json={"url": f"http://[{ip}]:8080/hook"},
                   headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 422 and r.json["type"] == "/problems/validation", r.json
    assert "url" in r.json["errors"]
    assert client.get("/bots/me/callback",
                      headers={"Authorization": f"Bearer {token}"}).status_code == 404


def test_the_connection_is_checked_again_on_the_address_it_resolves_to():
    """At connection time the resolved address decides: ``[::ffff:127.0.0.1]`` resolves to
    itself, an IPv6 socket address that a dual-stack host would carry to 127.0.0.1. The
    closed guard makes no connection; a listener on 127.0.0.1 hears nothing."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            accepted.append(listener.accept())

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        pool = make_pool(Guard())
        for host in ("[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "127.0.0.1"):
            result = post(pool, f"http://{host}:{port}/hook", b"{}", {}, 2.0, 100)
            assert result.error == "refused-address", (host, result.error, result.detail)
        thread.join(2)
        assert accepted == []
    finally:
        listener.close()
