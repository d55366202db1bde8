"""Which address a request comes from, as the deployment states it (TRUSTED_PROXY_COUNT).

Throttles (failed logins, invalid approval links) count per address. Behind a proxy,
REMOTE_ADDR is the proxy's own: every client would share one address and one client's
failures would lock everybody out. With N proxies in front, each appending the address it
received the request from to X-Forwarded-For, the client is the Nth address from the right;
anything further left came from the client and is not believed."""

import ipaddress

from django.conf import settings


def client_ip(request) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    proxies = settings.TRUSTED_PROXY_COUNT
    if not proxies:
        return remote
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
                 if a.strip()]
    if len(forwarded) < proxies:
        # Not the chain the deployment described: keep the proxy's address (shared, but
        # never one the client chose).
        return remote
    candidate = forwarded[-proxies]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
