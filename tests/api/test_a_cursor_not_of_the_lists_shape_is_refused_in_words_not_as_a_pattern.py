"""An `after` that is not a cursor the list gave is refused 422 in words, as the command
line says it ("not a cursor this command printed"), not as the regular expression the
document publishes: an integrator was told "String should match pattern '^$|^[0-9]{1,17}...'"
by the runs list, the subscribers list and the approvals inbox."""

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/api/runs", "/api/subscribers", "/api/approvals"])
def test_an_after_of_another_shape_is_refused_saying_it_is_no_cursor_of_the_list(client, path):
    person = User.objects.create_superuser("ada")
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=person)
    answer = client.get(path, {"after": "page-2"}, HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert answer.status_code == 422, answer.content
    [error] = answer.json()["errors"]
    assert error["loc"] == ["query", "after"]
    assert "pattern" not in error["msg"] and "[0-9]" not in error["msg"]
    assert "next_cursor" in error["msg"]
