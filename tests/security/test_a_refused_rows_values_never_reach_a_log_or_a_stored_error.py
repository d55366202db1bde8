"""PostgreSQL's error for a row a constraint refuses quotes every value of the row ("Failing
row contains (...)"), a webhook subscriber's signing secret among them. Such an error's text
reaches logs and stored errors through the one redaction filter, which keeps its words and
masks the row."""

import json
import logging
import sys

import pytest
from django.db import IntegrityError, transaction

from api.models import WebhookSubscriber
from audit.redaction import REDACTED, redact_text
from observability.logs import JsonFormatter

pytestmark = pytest.mark.django_db

SECRET = "whsec-the-subscribers-signing-secret"


def refused_row() -> IntegrityError:
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        WebhookSubscriber.objects.create(name=None, url="https://crm.example/hooks",
                                         secret=SECRET)
    assert SECRET in str(refused.value)  # what PostgreSQL says, as it says it
    return refused.value


def test_the_refused_rows_values_are_masked_and_the_error_still_says_what_failed():
    text = redact_text(str(refused_row()))
    assert SECRET not in text
    assert f"Failing row contains {REDACTED}" in text
    assert 'null value in column "name"' in text


def test_a_logged_traceback_of_it_keeps_the_secret_out():
    error = refused_row()
    try:
        raise error
    except IntegrityError:
        record = logging.LogRecord("api.webhooks", logging.ERROR, __file__, 1,
                                   "publish failed", (), sys.exc_info())
    line = JsonFormatter().format(record)
    assert SECRET not in line
    assert "IntegrityError" in json.loads(line)["exception"]
