"""The Prometheus scrape endpoint, open to this machine or to the bearer of METRICS_TOKEN;
the readiness answer a load balancer or an orchestrator asks, open to all."""

import hmac
import ipaddress

from celery import current_app
from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import choose_encoder

from .metrics import registry

# A request relayed by a proxy on this machine also comes from 127.0.0.1: one that carries
# a forwarding header is therefore never taken for a local one.
_FORWARDING_HEADERS = ("X-Forwarded-For", "Forwarded", "X-Real-Ip")


def _local(request) -> bool:
    """Whether the request comes from this machine itself, not through a proxy on it."""
    # Behind proxies (TRUSTED_PROXY_COUNT), every request reaches us from a proxy, and
    # REMOTE_ADDR is the proxy's: one on this machine relays the whole internet from
    # 127.0.0.1, and one that adds no forwarding header (nginx's proxy_pass does not by
    # default) would pass the header test below. Only a token tells a scraper apart there.
    if settings.TRUSTED_PROXY_COUNT:
        return False
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


def database_answer() -> str:
    """"ok", or why the database cannot serve a request now (the error's kind only: its
    text may name hosts and users)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure is "not ready", said by its kind
        return f"unavailable ({type(exc).__name__})"
    return "ok"


def broker_answer() -> str:
    """"ok", or why the broker cannot take a wake-up hint now. A Redis that accepts
    connections and never answers is asked a PING, within the broker's socket timeout."""
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0,
                                   timeout=settings.BROKER_SOCKET_TIMEOUT)
            client = getattr(conn.default_channel, "client", None)
            if client is not None:
                client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure is "not ready", said by its kind
        return f"unavailable ({type(exc).__name__})"
    return "ok"


@never_cache
@require_GET
def ready(request):
    """200 when this process can serve: its database answers (without it nothing can be
    done) and its broker takes hints (without it, work waits for the sweeper's re-send: the
    process still serves, said as "degraded"). 503 with Retry-After otherwise."""
    database, broker = database_answer(), broker_answer()
    ready_now = database == "ok"
    response = JsonResponse({"ready": ready_now, "database": database, "broker": broker,
                             "degraded": ready_now and broker != "ok"},
                            status=200 if ready_now else 503)
    if not ready_now:
        response["Retry-After"] = "30"
    return response
