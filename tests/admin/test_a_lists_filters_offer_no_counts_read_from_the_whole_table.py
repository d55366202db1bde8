"""The lists of tables that grow offer no counts beside their filters' choices. Django's
facets (its "Show counts" link, `?_facets=True`) count each filter's every choice over the
whole filtered table: a COUNT with no LIMIT per filter, which read every run four times over
for the runs list's workflow filter and every audit record for the action filter."""

import pytest
from django.contrib import admin
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.admin import FastListAdmin

from .test_admin_lists import admin_client, grow  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

FILTERED = sorted(((model, model_admin) for model, model_admin in admin.site._registry.items()
                   if isinstance(model_admin, FastListAdmin) and model_admin.list_filter),
                  key=lambda pair: pair[0]._meta.label)


def test_the_lists_of_runs_audit_records_approvals_and_deliveries_are_among_them():
    labels = {model._meta.label for model, _ in FILTERED}
    assert {"runs.Run", "audit.AuditRecord", "approvals.ApprovalRequest",
            "approvals.Notification", "api.WebhookDelivery"} <= labels


@pytest.mark.parametrize(("model", "model_admin"), FILTERED,
                         ids=[model._meta.label for model, _ in FILTERED])
def test_a_list_asked_for_its_filters_counts_counts_no_table_in_full(admin_client, model,  # noqa: F811
                                                                      model_admin):
    grow(2)
    url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    table = f'FROM "{model._meta.db_table}"'
    # Not offered: no "Show counts" link.
    assert "_facets" not in admin_client.get(url).text
    with CaptureQueriesContext(connection) as ctx:
        page = admin_client.get(url, {"_facets": "True"})
    assert page.status_code == 200
    assert page.context["cl"].filter_specs
    unbounded = [q["sql"] for q in ctx.captured_queries
                 if table in q["sql"] and "COUNT(" in q["sql"].upper()
                 and "LIMIT" not in q["sql"].upper()]
    assert unbounded == []
    assert not page.context["cl"].add_facets
