"""A request refused as the person's condition (403: PermissionDenied raised by a console
view) is logged by django.request as one warning line saying the refusal, without a
traceback: Django logged it with the exception's traceback, as if the code had failed
(console.request_log.ClientErrorLines). A server error keeps its traceback."""

import logging

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from runs.models import Run


def request_lines(caplog):
    return [record for record in caplog.records if record.name == "django.request"]


@pytest.mark.urls("tests.console.failing_urls")
def test_a_person_refused_a_page_is_one_warning_line_and_a_server_error_keeps_its_traceback(
        client, caplog, db):
    client.force_login(User.objects.create_user("nobody", password="pw"))
    client.raise_request_exception = False
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get("/runs/").status_code == 403
        (refused,) = request_lines(caplog)
        caplog.clear()
        assert client.get("/fail/").status_code == 500
        (failed,) = request_lines(caplog)
    assert refused.levelno == logging.WARNING and refused.status_code == 403
    assert refused.getMessage() == "Forbidden (Permission denied): /runs/: You may not view runs."
    assert refused.exc_info is None and refused.exc_text is None
    assert failed.levelno == logging.ERROR and failed.status_code == 500
    assert failed.exc_info is not None and isinstance(failed.exc_info[1], RuntimeError)


def test_an_action_refused_is_one_warning_line_naming_the_refusal(client_for, auditor,
                                                                  stuck_run, caplog):
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client_for(auditor).post(
            reverse("console:action", args=[stuck_run.pk, "terminate"]),
            {"reason": "x", "seen": str(stuck_run.audit_seq)})
    assert response.status_code == 403
    (refused,) = request_lines(caplog)
    assert refused.levelno == logging.WARNING and refused.exc_info is None
    assert refused.getMessage().endswith(": You may not terminate this run.")
    assert "\n" not in refused.getMessage()
    assert Run.objects.get(pk=stuck_run.pk).status == stuck_run.status


def test_a_request_refused_as_suspicious_is_one_line_without_a_traceback(client, caplog, db):
    # Django refuses it (400) before any view, and logs it under django.security.<class>.
    client.raise_request_exception = False
    with caplog.at_level(logging.WARNING):
        assert client.get("/runs/", HTTP_HOST="evil.example").status_code == 400
    (refused,) = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert "Invalid HTTP_HOST header: 'evil.example'" in refused.getMessage()
    assert refused.exc_info is None and refused.exc_text is None
