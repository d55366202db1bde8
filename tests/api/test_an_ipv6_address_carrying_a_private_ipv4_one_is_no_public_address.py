"""A webhook subscriber reaches public addresses only (api.public_network), and an IPv6
address that carries an IPv4 one is judged by that one too: through a NAT64 gateway
64:ff9b::7f00:1 is 127.0.0.1, through 6to4 2002:a9fe:a9fe:: is the cloud's metadata address
169.254.169.254. Each of these was let through as a public address. One carrying a public
IPv4 address is still reached."""

import pytest

from api.public_network import address_refusal

REFUSED = [
    ("64:ff9b::7f00:1", "loopback address (127.0.0.1)"),           # NAT64, well-known
    ("64:ff9b::a9fe:a9fe", "link-local address (169.254.169.254)"),
    ("64:ff9b:1::a00:1", "private address (10.0.0.1)"),            # NAT64, local use
    ("2002:7f00:1::1", "loopback address (127.0.0.1)"),            # 6to4
    ("2002:a9fe:a9fe::", "link-local address (169.254.169.254)"),
    ("::7f00:1", "loopback address (127.0.0.1)"),                  # IPv4-compatible
    ("::ffff:0:7f00:1", "loopback address (127.0.0.1)"),           # IPv4-translated
    ("::ffff:127.0.0.1", "loopback address"),                      # IPv4-mapped
]


@pytest.mark.parametrize(("address", "named"), REFUSED)
def test_an_ipv6_address_carrying_a_private_ipv4_one_is_refused_naming_it(address, named):
    refusal = address_refusal(address)
    assert refusal is not None and refusal.startswith(address) and named in refusal


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1", "8.8.8.8",
                                     "2606:4700:4700::1111"])
def test_an_address_reaching_a_public_ipv4_or_ipv6_host_is_reached(address):
    assert address_refusal(address) is None
