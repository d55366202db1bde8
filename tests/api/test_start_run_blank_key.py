"""POST /api/runs with a business key of spaces is refused 422 naming the field, as an empty
one is: the rule is start_run's, so the API gets it without a rule of its own."""

import pytest

from runs.models import Run
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def test_a_business_key_of_spaces_is_422_naming_the_field_and_writes_nothing(api_client):
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "   ",
                                     "input": {"order": "o-1", "amount": 5}})
    assert response.status_code == 422, response.content
    assert [e["loc"][-1] for e in response.json()["errors"]] == ["business_key"]
    assert not Run.objects.exists()
