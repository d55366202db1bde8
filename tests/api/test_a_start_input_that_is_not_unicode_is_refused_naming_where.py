"""A start whose input holds text that is not Unicode (a lone surrogate, as "\\ud800" is in
JSON) is refused with 422 naming where it is, in a value or in a key, and not as
"Invalid JSON" about the whole input; nothing is started."""

import pytest

from audit.models import AuditRecord
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("input_text", "loc"), [
    ('{"order": "o-1\\ud800"}', ["input", "order"]),
    ('{"order": "o-1", "lines": [{"sku": "\\udc00"}]}', ["input", "lines", 0, "sku"]),
    ('{"order": "o-1", "n\\ud800te": 1}', ["input", "n\ud800te"]),
])
def test_a_lone_surrogate_in_the_input_is_422_naming_where_and_starts_nothing(api_client,
                                                                               input_text,
                                                                               loc):
    before = (Run.objects.count(), AuditRecord.objects.count())
    body = '{"workflow": "test-orders", "business_key": "k-1", "input": ' + input_text + "}"
    response = api_client.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_input"
    assert [(e["loc"], e["type"]) for e in answer["errors"]] == [(loc, "string_unicode")]
    assert "Invalid JSON" not in answer["detail"]
    assert (Run.objects.count(), AuditRecord.objects.count()) == before
