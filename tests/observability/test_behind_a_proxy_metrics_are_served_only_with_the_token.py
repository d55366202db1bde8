"""Behind proxies (TRUSTED_PROXY_COUNT >= 1) every request reaches the web process from a
proxy, so its address says nothing about the client: a proxy on this machine relays the
whole internet from 127.0.0.1, and one that adds no forwarding header (nginx's proxy_pass by
default) looks exactly like a local scraper. There /metrics is served to the bearer of
METRICS_TOKEN only; with clients connecting directly (0) this machine keeps its exception."""

import pytest

pytestmark = pytest.mark.django_db

LOCAL_WITHOUT_HEADERS = {"REMOTE_ADDR": "127.0.0.1"}


def test_a_request_from_a_local_proxy_without_forwarding_headers_is_refused(client, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    assert settings.METRICS_ALLOW_LOCALHOST
    response = client.get("/metrics", **LOCAL_WITHOUT_HEADERS)
    assert response.status_code == 403
    assert b"durable_runs" not in response.content


def test_behind_a_proxy_the_token_still_opens_the_metrics(client, settings):
    settings.TRUSTED_PROXY_COUNT = 2
    settings.METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics", **LOCAL_WITHOUT_HEADERS).status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret",
                          HTTP_X_FORWARDED_FOR="203.0.113.9, 10.0.0.2", **LOCAL_WITHOUT_HEADERS)
    assert response.status_code == 200 and b"durable_metrics_up 1.0" in response.content


def test_with_clients_connecting_directly_this_machine_needs_no_token(client, settings):
    settings.TRUSTED_PROXY_COUNT = 0
    assert client.get("/metrics", **LOCAL_WITHOUT_HEADERS).status_code == 200
