"""django-axes' logs (failed sign-ins and forged approval links: anyone can add rows) list
without reading the whole table for their filters: no filter whose choices are every
distinct path, which Django admin would compute at each load."""

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", ["accessattempt", "accesslog", "accessfailurelog"])
def test_a_sign_in_log_lists_without_a_query_over_every_path(client, model):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    AccessAttempt.objects.bulk_create(
        AccessAttempt(username=f"u{i}", ip_address="10.0.0.1", user_agent="ua",
                      path_info=f"/approvals/1/forged-{i}/", get_data="", post_data="",
                      http_accept="*/*", failures_since_start=1, attempt_time=timezone.now())
        for i in range(20))
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/admin/axes/{model}/")
    assert page.status_code == 200
    assert not [q["sql"] for q in queries.captured_queries
                if "DISTINCT" in q["sql"] and "path_info" in q["sql"]]
    assert "By path" not in page.content.decode()
