"""Per-token rate limits: 429 with Retry-After once a token's window is spent; other tokens
are not affected. Counted in the locmem cache (the demo) and in Redis (production)."""

import os
import time
import uuid
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from api import ratelimit
from runs import store
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db

REDIS_URL = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")


def _redis_caches():
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "api": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                # A prefix of its own: the counters expire after a window, and clear() would
                # flush the whole Redis database, the tests' broker included.
                "LOCATION": REDIS_URL, "KEY_PREFIX": f"dwf-test-{uuid.uuid4().hex}"},
    }


def _clear_of_a_window_edge(margin=5.0):
    """The limit counts in fixed windows: requests on both sides of a window's edge are
    counted in two windows. Start where the whole exchange fits in one."""
    from django.conf import settings

    window = settings.API_RATE_LIMIT_WINDOW_SECONDS
    left = window - store.current().now().timestamp() % window
    if left < margin:
        time.sleep(left + 0.1)


def _exhaust(client, make_token):
    _clear_of_a_window_edge()
    _, limited = make_token("limited", rate_limit=3)
    _, other = make_token("other")
    statuses = [client.get("/api/runs/1", HTTP_AUTHORIZATION=f"Bearer {limited}").status_code
                for _ in range(4)]
    assert statuses == [404, 404, 404, 429]
    response = post_run(client, {"workflow": "test-orders", "business_key": "k",
                                 "input": {"order": "o"}},
                        HTTP_AUTHORIZATION=f"Bearer {limited}")
    assert response.status_code == 429
    assert response.json()["error"] == "rate_limited"
    assert 1 <= int(response["Retry-After"]) <= 60
    # Another token has its own window.
    assert client.get("/api/runs/1", HTTP_AUTHORIZATION=f"Bearer {other}").status_code == 404


def test_a_token_past_its_limit_gets_429_with_retry_after(client, make_token):
    _exhaust(client, make_token)


def test_the_limit_is_counted_in_redis_when_configured(client, make_token):
    with override_settings(CACHES=_redis_caches()):
        from django.core.cache import caches

        assert type(caches["api"]).__name__ == "RedisCache"
        _exhaust(client, make_token)


def test_the_window_resets(make_token):
    from api import ratelimit

    verdicts = [ratelimit.hit("t", limit=2, window=60, now=120.0 + i) for i in range(3)]
    assert [v.allowed for v in verdicts] == [True, True, False]
    assert verdicts[-1].retry_after == 58
    assert ratelimit.hit("t", limit=2, window=60, now=180.5).allowed


def _unreachable_caches():
    # A port where nothing listens: every count fails at once.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    caches = _redis_caches()
    caches["api"]["LOCATION"] = f"redis://127.0.0.1:{port}/0"
    return caches


def test_a_store_out_of_reach_lets_requests_through_and_says_so_once_then_once_again_when_back(
        client, make_token, caplog):
    import logging

    from runs.execution.outages import outages

    outages.failed.clear()
    _, token = make_token("while-down", rate_limit=2)
    with caplog.at_level(logging.WARNING, logger="api.ratelimit"):
        with override_settings(CACHES=_unreachable_caches()):
            statuses = [client.get("/api/runs/1", HTTP_AUTHORIZATION=f"Bearer {token}")
                        .status_code for _ in range(5)]
        # Let through, uncounted: the limit of 2 is not applied while the store is away.
        assert statuses == [404] * 5
        client.get("/api/runs/1", HTTP_AUTHORIZATION=f"Bearer {token}")  # the store is back
    said = [r for r in caplog.records if r.name == "api.ratelimit"]
    assert [r.getMessage().split(" (")[0].split(",")[0] for r in said] == [
        "rate limit store unavailable", "rate limit store answers again"]
    assert said[1].getMessage().endswith("after 5 request(s) let through uncounted")
    assert not any(r.exc_info for r in said)


def test_web_hosts_whose_clocks_are_a_window_apart_count_a_token_in_one_window(monkeypatch):
    """Windows are cut by the database's clock: a host a whole window ahead counts the same
    token in the same window, not in one of its own (which doubled what the token may do)."""
    _clear_of_a_window_edge()
    assert [ratelimit.hit("t", limit=2).allowed for _ in range(2)] == [True, True]
    from django.conf import settings

    ahead = settings.API_RATE_LIMIT_WINDOW_SECONDS
    real_time, real_now = time.time, timezone.now
    monkeypatch.setattr(time, "time", lambda: real_time() + ahead)
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=ahead))
    verdict = ratelimit.hit("t", limit=2)
    assert not verdict.allowed and verdict.count == 3
