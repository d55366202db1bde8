"""An invalid filter of the audit log, or of the access log, is refused as the runs list's is,
never read as no filter: the page lists no record, keeps the form and says which field is
wrong and why; its CSV export is refused (400) and exports nothing. Only the valid filter of
the same fields narrows the records."""

import html

import pytest
from django.urls import reverse

from api.tokens import token_create
from audit.access import access_records
from audit.models import AuditRecord

pytestmark = pytest.mark.django_db

INVALID = [
    ({"actor": "nobody", "run": "abc"}, "run (Run): Enter a run id"),
    ({"actor": "nobody", "since": "garbage"}, "since (Since): Enter a valid date/time."),
    ({"actor": "nobody", "run": "0"}, "run (Run): Enter a run id"),
    # int() reads "٣" as 3: the run filter is read as every other id in a link is.
    ({"run": "٣"}, "run (Run): Enter a run id"),
    ({"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"},
     "until (Until): The time range is empty: Since must be before Until."),
]
INVALID_ACCESS = [
    ({"actor": "nobody", "since": "garbage"}, "since (Since): Enter a valid date/time."),
    ({"until": "never"}, "until (Until): Enter a valid date/time."),
    # The access log's records are of no run: a run filter would filter nothing.
    ({"run": "5"}, "run: the access log's records are of no run"),
]


def _body(response) -> str:
    return html.unescape(response.content.decode())


@pytest.fixture
def access_changes(auditor, operator):
    """Access records to be shown or not: API tokens created for a person."""
    for name in ("erp", "crm"):
        token_create(name=name, workflows=["test-orders"], acting_user=operator)
    assert access_records().count() >= 2
    return list(access_records())


@pytest.mark.parametrize("params, named", INVALID)
def test_an_invalid_audit_filter_lists_no_record_and_names_the_field(client_for, operator,
                                                                      stuck_run, params,
                                                                      named):
    assert AuditRecord.objects.filter(run=stuck_run).exists()
    response = client_for(operator).get(reverse("console:audit"), params)
    body = _body(response)
    assert response.status_code == 200
    assert "No records are shown and none exported: the filter is not valid." in body
    assert f"Invalid filter field {named}" in body
    assert f"/runs/{stuck_run.pk}/" not in body and "No records match." not in body
    assert not response.context.get("records")
    # The form stays to be corrected; nothing offers to export what it would not filter.
    assert 'aria-label="Filter audit records"' in body
    assert "format=csv" not in body


@pytest.mark.parametrize("params, named", INVALID)
def test_an_invalid_audit_filter_exports_nothing(client_for, operator, stuck_run, params,
                                                 named):
    response = client_for(operator).get(reverse("console:audit"), {**params, "format": "csv"})
    assert response.status_code == 400
    assert not response.get("Content-Type", "").startswith("text/csv")
    assert "Content-Disposition" not in response
    body = _body(response)
    assert f"Invalid filter field {named}" in body
    assert f"/runs/{stuck_run.pk}/" not in body


def test_a_valid_audit_filter_narrows_the_records_and_exports_them(client_for, operator,
                                                                   stuck_run):
    client = client_for(operator)
    nobody = _body(client.get(reverse("console:audit"), {"actor": "nobody"}))
    assert "No records match." in nobody and "Invalid filter field" not in nobody
    of_run = client.get(reverse("console:audit"), {"run": str(stuck_run.pk)})
    assert f"/runs/{stuck_run.pk}/" in _body(of_run)
    export = client.get(reverse("console:audit"), {"run": str(stuck_run.pk), "format": "csv"})
    assert export.status_code == 200 and export["Content-Type"].startswith("text/csv")
    lines = b"".join(export.streaming_content).decode().strip().splitlines()
    assert len(lines) == 1 + stuck_run.audit_records.count()


@pytest.mark.parametrize("params, named", INVALID_ACCESS)
def test_an_invalid_access_filter_lists_no_record_and_exports_nothing(client_for, auditor,
                                                                       access_changes,
                                                                       params, named):
    client = client_for(auditor)
    page = client.get(reverse("console:audit"), {"log": "access", **params})
    body = _body(page)
    assert page.status_code == 200
    assert f"Invalid filter field {named}" in body
    assert not page.context.get("access")
    for record in access_changes:
        assert f"<td>{record.seq}</td>" not in page.content.decode()
    export = client.get(reverse("console:audit"), {"log": "access", "format": "csv", **params})
    assert export.status_code == 400 and "Content-Disposition" not in export
    assert f"Invalid filter field {named}" in _body(export)


def test_a_valid_access_filter_still_lists_its_records(client_for, auditor, access_changes):
    client = client_for(auditor)
    page = client.get(reverse("console:audit"), {"log": "access"})
    raw = page.content.decode()
    assert "Invalid filter field" not in raw
    assert all(f"<td>{record.seq}</td>" in raw for record in access_changes)
    # No run field on the access log's form: its records are of no run.
    assert 'name="run"' not in raw
    nobody = client.get(reverse("console:audit"), {"log": "access", "actor": "nobody"})
    assert "No records match." in nobody.content.decode()
