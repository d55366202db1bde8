"""A body sent as JSON that cannot be read as JSON is answered 400 `bad_request` saying
what is wrong and where (the position of a syntax error, bytes that are not UTF-8, nesting
too deep to read, an integer too long to read), not only that it could not be parsed, and
nothing is started."""

import pytest

from audit.models import AuditRecord
from runs.models import Run

pytestmark = pytest.mark.django_db

START = '{"workflow": "test-orders", "business_key": "k-1", "input": {"order": '


@pytest.mark.parametrize(("body", "named"), [
    (START.encode() + b'"o-1"', "line 1, column"),
    (START.encode() + b'"o-1\xff"}}', "UTF-8"),
    (START.encode() + b"[" * 100_000 + b"]" * 100_000 + b"}}", "too deeply"),
    (START.encode() + b"9" * 5000 + b"}}", "digits"),
])
def test_a_body_that_cannot_be_read_is_400_naming_why_and_starts_nothing(api_client, body,
                                                                         named):
    before = (Run.objects.count(), AuditRecord.objects.count())
    response = api_client.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 400, response.content
    answer = response.json()
    assert answer["error"] == "bad_request"
    assert named in answer["detail"]
    assert (Run.objects.count(), AuditRecord.objects.count()) == before
