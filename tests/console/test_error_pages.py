"""Console errors are the product's own pages (base.html, no traceback): 400, 403, 404,
413 for a body over the upload limit, and 500."""

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from runs.models import Run

FIVE_MB = 5 * 1024 * 1024


def _assert_product_page(response, status: int, title: str) -> str:
    assert response.status_code == status
    body = response.content.decode()
    assert 'class="topbar"' in body, "not the product's base.html"
    assert f"<title>{title} · Durable workflows</title>" in body
    assert "Traceback" not in body
    return body


def test_a_5mb_post_to_a_console_action_is_the_413_page_naming_the_limit(client_for, operator,
                                                                         stuck_run):
    client = client_for(operator)
    response = client.post(reverse("console:action", args=[stuck_run.pk, "terminate"]),
                           {"reason": "x" * FIVE_MB, "seen": str(stuck_run.audit_seq)})
    body = _assert_product_page(response, 413, "Request too large")
    assert str(django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE) in body
    assert Run.objects.get(pk=stuck_run.pk).status == stuck_run.status


def test_an_unknown_page_is_the_404_page(client_for, operator):
    _assert_product_page(client_for(operator).get("/no-such-page/"), 404, "Not found")


def test_a_refusal_is_the_403_page_with_its_reason(client_for, auditor, stuck_run):
    response = client_for(auditor).post(
        reverse("console:action", args=[stuck_run.pk, "terminate"]),
        {"reason": "x", "seen": str(stuck_run.audit_seq)})
    body = _assert_product_page(response, 403, "Not allowed")
    assert "You may not terminate this run." in body


def test_a_bad_request_is_the_400_page(client_for, operator):
    # A Host header outside ALLOWED_HOSTS is a SuspiciousOperation: Django calls handler400.
    response = client_for(operator).get("/runs/", HTTP_HOST="evil.example")
    _assert_product_page(response, 400, "Bad request")


@pytest.mark.urls("tests.console.failing_urls")
def test_an_unhandled_error_is_the_500_page_without_its_message(client, db):
    client.raise_request_exception = False
    body = _assert_product_page(client.get("/fail/"), 500, "Server error")
    assert "secret internals" not in body
