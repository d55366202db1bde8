"""An approval link's token decides a request: Django logs the path of every 4xx answer
(django.request) and the development server every request (django.server), so their records
carry the path with the token masked, whatever the answer."""

import logging

import pytest
from axes.models import AccessAttempt, AccessFailureLog

pytestmark = pytest.mark.django_db

TOKEN = "Zm9yZ2VkLXRva2VuLXRoYXQtbWF5LWJlLWxpdmU"


def test_a_refused_link_is_logged_without_its_token(client, caplog):
    with caplog.at_level(logging.INFO):
        response = client.get(f"/approvals/999999/link/{TOKEN}/")
    assert response.status_code in (400, 404, 410, 429)
    logged = [r for r in caplog.records if r.name == "django.request"]
    assert logged, "django.request logged the refused link"
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    assert "/approvals/999999/link/[redacted]/" in logged[0].getMessage()
    # Nor at rest: the failed attempt the link throttle counts (django-axes) names the path
    # with the token masked.
    assert AccessAttempt.objects.filter(username="(approval link)").exists()
    stored = str(list(AccessAttempt.objects.values())) + str(
        list(AccessFailureLog.objects.values()))
    assert TOKEN not in stored and "/link/[redacted]/" in stored


def test_the_development_servers_request_line_is_logged_without_the_token(caplog):
    with caplog.at_level(logging.INFO):
        logging.getLogger("django.server").info('"%s" %s %s',
                                                f"GET /approvals/7/link/{TOKEN}/ HTTP/1.1",
                                                302, 0)
    (record,) = [r for r in caplog.records if r.name == "django.server"]
    assert TOKEN not in record.getMessage()
    assert record.getMessage() == '"GET /approvals/7/link/[redacted]/ HTTP/1.1" 302 0'


def test_other_paths_are_logged_as_they_are(client, caplog):
    with caplog.at_level(logging.INFO):
        client.get("/runs/no-such-page/")
    assert any("/runs/no-such-page/" in r.getMessage() for r in caplog.records
               if r.name == "django.request")
