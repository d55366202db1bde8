"""An audit record may keep a sealed value ("enc:<key>:<token>") on purpose: the late result
of a tool call whose tool declares a field of its result sensitive is kept in the run's log,
sealed as the call's row would hold it. A record is evidence, hash-chained and never
rewritten, so it stays so. Where a person reads records (the run page's timeline, the API's
history of a run and the CLI's, Django admin's page of a record, the console's audit page)
the sealed value is shown as the mask (audit.redaction.REDACTED), never as its ciphertext,
as a tool call's arguments and result are. The audit CSV is an evidence copy whose every
row re-hashes without the database (audit.csv_export): it carries the record as written."""

import csv
import html
import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.template import Context, Template

from api.tokens import token_create
from audit.chain import Actor
from audit.csv_export import audit_csv_lines, cell_value
from audit.models import AuditRecord
from audit.redaction import REDACTED
from demo.agent_workflow import triage
from runs.machine import sensitive, transitions
from runs.models import ToolCall
from tests.agent_runs import advance, start_triage
from tests.audit.test_an_exported_record_can_be_rehashed import rehashes

pytestmark = pytest.mark.django_db(transaction=True)

OPERATOR = Actor.system("operator")
SECOND = Actor.system("second")


@pytest.fixture
def late_lookup(live_sandbox, monkeypatch):
    """A triage terminated while its lookup-vendor call was in flight: the vendor's record
    the lookup returned arrives late, and is kept in the run's log with its IBAN (which the
    tool declares sensitive in its result) sealed."""
    tool = triage.tools["lookup-vendor"]
    look_up = tool.fn

    def terminate_then_look_up(ctx, args):
        transitions.terminate(ctx.run_id, actor=OPERATOR, reason="stop this triage",
                              approved_by=SECOND)
        return look_up(ctx, args)

    monkeypatch.setattr(tool, "fn", terminate_then_look_up)
    run = advance(start_triage())
    call = ToolCall.objects.get(step__run=run, tool="lookup-vendor")
    late = AuditRecord.objects.get(run=run, action__in=["late_result", "late_result_recorded"],
                                   data__tool_call=call.ref)
    sealed = late.data["value"]["iban"]
    assert sensitive.is_sealed(sealed)
    return run, late, sealed


def unmasked(text: str, sealed: str) -> bool:
    return sensitive.PREFIX in text or sealed in text or sealed[len(sensitive.PREFIX):] in text


def test_the_run_pages_timeline_shows_the_sealed_value_as_the_mask(late_lookup, client):
    run, late, sealed = late_lookup
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert not unmasked(page, sealed)
    assert html.escape(f'"iban": "{REDACTED}"') in page
    # What is not sealed of the late result is still shown.
    assert html.escape(f'"name": "{late.data["value"]["name"]}"') in page


def test_the_apis_history_and_the_clis_show_the_sealed_value_as_the_mask(late_lookup, client,
                                                                          capsys):
    run, late, sealed = late_lookup
    _, plaintext = token_create(name="reader", workflows=["invoice-triage"], rate_limit=None)
    response = client.get(f"/api/runs/{run.pk}/history?limit=200",
                          HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    assert not unmasked(response.content.decode(), sealed)
    (entry,) = [e for e in response.json()["entries"] if e["seq"] == late.seq]
    assert entry["data"]["value"] == {**late.data["value"], "iban": REDACTED}

    call_command("run_history", str(run.pk), "--limit", "200", "--json")
    assert not unmasked(capsys.readouterr().out, sealed)


def test_django_admins_page_of_the_record_shows_the_sealed_value_as_the_mask(late_lookup,
                                                                             client):
    _, late, sealed = late_lookup
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/audit/auditrecord/{late.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert not unmasked(text, sealed)
    assert html.escape(f'"iban": "{REDACTED}"') in text
    # The evidence that binds it into its chain is shown as it is.
    assert late.hash in text


def test_the_console_audit_pages_before_and_after_show_a_sealed_value_as_the_mask(
        late_lookup, client):
    run, _, sealed = late_lookup
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/audit/?run={run.pk}")
    assert page.status_code == 200 and not unmasked(page.content.decode(), sealed)
    # No record written today keeps one in its before or after; the page's filter masks it
    # when one does, at any depth, as a string alone too.
    shown = Template("{% load as_json %}{{ before|as_json }} {{ alone|as_json }}").render(
        Context({"before": {"status": "running", "vendor": {"iban": sealed}},
                 "alone": sealed}))
    assert not unmasked(shown, sealed)
    assert html.escape(json.dumps({"status": "running", "vendor": {"iban": REDACTED}},
                                  sort_keys=True)) in shown


def test_the_record_is_kept_as_written_and_its_chain_still_verifies(late_lookup, client,
                                                                    capsys):
    run, late, sealed = late_lookup
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    client.get(f"/runs/{run.pk}/")
    client.get(f"/admin/audit/auditrecord/{late.pk}/change/")

    stored = AuditRecord.objects.get(pk=late.pk)
    assert stored.data == late.data and stored.data["value"]["iban"] == sealed
    assert sensitive.opened(sealed) == sensitive.opened(
        ToolCall.objects.get(step__run=run, tool="lookup-vendor").result["iban"])
    call_command("verify_audit")
    assert "all chains intact" in capsys.readouterr().out


def test_the_audit_csv_carries_the_record_as_written_so_that_it_rehashes(late_lookup):
    run, late, sealed = late_lookup
    records = AuditRecord.objects.filter(run=run).order_by("seq")
    rows = [{name: cell_value(cell) for name, cell in row.items()}
            for row in csv.DictReader(io.StringIO("".join(audit_csv_lines(records))))]
    (row,) = [r for r in rows if int(r["seq"]) == late.seq]
    assert json.loads(row["data"])["value"]["iban"] == sealed
    assert all(rehashes(r) for r in rows)
