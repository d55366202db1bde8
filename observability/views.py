"""The Prometheus scrape endpoint, open to this machine or to the bearer of METRICS_TOKEN."""

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import choose_encoder

from .metrics import registry

# A request relayed by a proxy on this machine also comes from 127.0.0.1: one that carries
# a forwarding header is therefore never taken for a local one.
_FORWARDING_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-Ip")


def _local(request) -> bool:
    if any(h in request.headers for h in _FORWARDING_HEADERS):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def _bearer_ok(request) -> bool:
    expected = settings.METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), expected.encode())


@never_cache
@require_GET
def metrics(request):
    if not (_bearer_ok(request) or (settings.METRICS_ALLOW_LOCALHOST and _local(request))):
        if settings.METRICS_TOKEN:
            response = HttpResponse("metrics: a valid bearer token is required\n", status=401,
                                    content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        return HttpResponse("metrics: only served to this machine (set METRICS_TOKEN to "
                            "scrape from elsewhere)\n", status=403, content_type="text/plain")
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry), content_type=content_type)
