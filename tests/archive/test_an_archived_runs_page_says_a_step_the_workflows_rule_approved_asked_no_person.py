"""An archived run's page says of an approval step the workflow's rule approved what the
live run page says: approved by the workflow's rule, no person was asked (read from the
step's result as the archive file holds it). Its reference only names who approved."""

import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

import tests.approvals.workflows  # noqa: F401  (registers test-approval-by-rule)
from archive.archiving import archive_runs

pytestmark = pytest.mark.django_db

SAID = "approved by the workflow&#x27;s rule; no person was asked"


def test_the_archived_page_says_the_rule_approved_the_step_and_no_person_was_asked(
        finished_run, script, client):
    script.reset()
    run = finished_run(workflow="test-approval-by-rule", amount=20)
    assert archive_runs(actor="test").runs_removed == 1
    client.force_login(User.objects.create_superuser("root"))

    page = client.get(reverse("console:archived_run", args=[run.pk])).content.decode()

    steps = page.split('id="steps-title"', 1)[1].split("</table>", 1)[0]
    rows = {cells[1]: cells for cells in (
        re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        for row in re.findall(r"<tr>(.*?)</tr>", steps, re.S)[1:])}
    assert set(rows) == {"<strong>prepare</strong>", "<strong>approve</strong>",
                         "<strong>pay</strong>"}
    approve = rows.pop("<strong>approve</strong>")
    assert SAID in approve[3] and "succeeded" in approve[3]
    assert approve[6].strip() == "approved by the workflow&#x27;s rule"
    assert not any(SAID in cell for cells in rows.values() for cell in cells)
