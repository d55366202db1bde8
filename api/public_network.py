"""Connections to addresses an admin typed: webhook subscribers reach public addresses only.

A subscriber's URL is an admin's to set, and the publisher POSTs to it and keeps the answer's
status code where admins read it: pointed at 169.254.169.254, at the metrics endpoint on
localhost or at a database's HTTP port on the private network, it would make the runtime probe
what only it can reach. The check is made on the addresses the name resolves to when the
connection is opened, and the connection goes to the address checked: a name that resolves to
a public address when saved and to a private one later (DNS rebinding) is refused then.
TLS still names the URL's host (httpcore sends the origin's name for SNI and checks the
certificate against it), so an https subscriber connects as before.

WEBHOOK_PRIVATE_ADDRESSES (console.env) lets them through: on in development and tests (the
demo's and the tests' receivers listen on localhost), off in console.production. Behind an
egress proxy (HTTPS_PROXY in the environment), the proxy opens the connection and decides.
"""

import ipaddress
import socket

import anyio
import httpcore
import httpx
from django.conf import settings

# IPv6 prefixes whose last 32 bits are an IPv4 address that a translator, or a host's own
# stack, connects to: NAT64's well-known and local-use prefixes (RFC 6052, 8215),
# IPv4-translated addresses (RFC 2765) and the deprecated IPv4-compatible ones (RFC 4291).
_CARRYING_IPV4 = [ipaddress.ip_network(prefix) for prefix in (
    "64:ff9b::/96", "64:ff9b:1::/48", "::ffff:0:0:0/96", "::/96")]


def _carried_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches through, if it carries one: mapped
    (::ffff:a.b.c.d), 6to4 (2002:AABB:CCDD::), Teredo (its client), or a prefix above."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in prefix for prefix in _CARRYING_IPV4) and int(ip) > 1:  # not :: or ::1
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _refusal_of(ip) -> str | None:
    if ip.is_global and not ip.is_multicast:
        return None
    return ("loopback" if ip.is_loopback else "link-local" if ip.is_link_local
            else "private" if ip.is_private else "non-public")


def address_refusal(address: str) -> str | None:
    """Why a connection to `address` (an IP address as text) is refused, or None. An IPv6
    address that carries an IPv4 one is judged by both: 64:ff9b::7f00:1 reaches 127.0.0.1
    through a NAT64 gateway, 2002:a9fe:a9fe:: reaches 169.254.169.254 through 6to4."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone names no other host
    carried = _carried_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    if carried is not None and ip.ipv4_mapped is not None:
        ip, carried = carried, None  # ::ffff:127.0.0.1 is 127.0.0.1
    kind = _refusal_of(ip)
    if kind is None and carried is not None:
        kind = _refusal_of(carried)
        if kind is not None:
            return f"{address} is a {kind} address ({carried}) behind an IPv6 one"
    return None if kind is None else f"{address} is a {kind} address"


class PublicOnlyBackend(httpcore.AnyIOBackend):
    """Opens TCP connections to a host's public addresses only, to the address it checked."""

    async def connect_tcp(self, host, port, timeout=None, local_address=None,
                          socket_options=None):
        try:
            with anyio.fail_after(timeout):
                found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"{host} was not resolved in time") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} cannot be resolved: {exc}") from None
        refusals = []
        for *_, sockaddr in found:
            address = str(sockaddr[0])
            refusal = address_refusal(address)
            if refusal is None:
                return await super().connect_tcp(address, port, timeout=timeout,
                                                 local_address=local_address,
                                                 socket_options=socket_options)
            refusals.append(refusal)
        raise httpcore.ConnectError(
            f"not sent: {host} resolves to no public address ({'; '.join(refusals)}); "
            "WEBHOOK_PRIVATE_ADDRESSES allows private ones")


class PublicOnlyTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, its connection pool opening connections by PublicOnlyBackend.

    httpx takes no network backend, so the pool it built is replaced by one like it with
    the backend (httpx is pinned in pyproject.toml: its pool is `_pool`)."""

    def __init__(self):
        super().__init__()
        self._pool = httpcore.AsyncConnectionPool(ssl_context=httpx.create_ssl_context(),
                                                  network_backend=PublicOnlyBackend())


def subscriber_transport() -> httpx.AsyncBaseTransport | None:
    """The transport webhook deliveries use: None (httpx's own) when private addresses are
    allowed."""
    return None if settings.WEBHOOK_PRIVATE_ADDRESSES else PublicOnlyTransport()
