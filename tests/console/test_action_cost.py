"""What one operator action costs from the console's URL to its audit record: the queries
of its POST and the project's modules it runs through. The action's checks run once, in
approvals.operator_actions.act (permission and stale page in one query), before the
transition's own work (lock, steps, the change, the audit record)."""

import os
import sys

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

# Statements of one action's POST: the session and the user (2), the permission check with
# the stale-page guard (1), then the transition's own (lock, steps, the steps' and the
# run's changes, the audit record, the progress event: 5 to 7, by action). 14 to 15 before
# the checks moved into one function (the run read three times, the permission twice).
MAX_QUERIES = 10
# The project's modules one action runs through (the request middleware included): the
# caller's side is the view, act, the permission rule, the action table and the action's
# trace span; the rest is the transition's, with the store (runs.store: the database
# clock; 14 to 16 by action).
MAX_MODULES = 16
CALLER_SIDE = {"api/middleware.py", "console/views.py", "approvals/operator_actions.py",
               "runs/permissions.py", "runs/actions.py", "runs/tracing.py"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _modules_during(call):
    seen = set()

    def profile(frame, event, arg):
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(ROOT) and not name.startswith(
                (f"{ROOT}.venv{os.sep}", f"{ROOT}tests{os.sep}")):
            seen.add(name[len(ROOT):])

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    return result, seen


def _placed(status, **steps):
    return place(new_run(), status=status, step_statuses=steps)


CASES = {
    "resume": (lambda: _placed(RunStatus.ATTENTION, **{"create-task": StepStatus.FAILED}), {}),
    "retry_step": (lambda: _placed(RunStatus.ATTENTION, **{"create-task": StepStatus.FAILED}),
                   {"step": "create-task"}),
    "reconcile": (lambda: _placed(RunStatus.ATTENTION, **{"create-task": StepStatus.UNKNOWN}),
                  {"step": "create-task", "mode": "found", "remote_ref": "T-1",
                   "evidence": "seen in the tracker"}),
    "cancel": (lambda: _placed(RunStatus.ATTENTION, **{"create-task": StepStatus.FAILED}), {}),
    "terminate": (lambda: _placed(RunStatus.ATTENTION, **{"create-task": StepStatus.FAILED}),
                  {}),
    "compensate": (lambda: _placed(RunStatus.ATTENTION, **{"fetch": StepStatus.SUCCEEDED,
                                                            "create-task": StepStatus.SUCCEEDED}),
                   {}),
    "reopen": (lambda: _placed(RunStatus.TERMINATED), {}),
}


@pytest.mark.parametrize("action", list(CASES))
def test_an_action_reaches_its_audit_record_in_few_queries_and_modules(
        client_for, operator, action):
    make, data = CASES[action]
    run = make()
    client = client_for(operator)
    client.get(reverse("console:run", args=[run.pk]))  # the session is warm, as in use
    seen = str(Run.objects.get(pk=run.pk).audit_seq)
    with CaptureQueriesContext(connection) as queries:
        response, modules = _modules_during(lambda: client.post(
            reverse("console:action", args=[run.pk, action]),
            {"seen": seen, "reason": "measured", **data}))
    assert response.status_code == 302
    record = AuditRecord.objects.filter(run=run).order_by("-seq").first()
    assert record.actor_label == "olga" and record.reason == "measured", action
    statements = [q["sql"] for q in queries.captured_queries
                  if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(statements) <= MAX_QUERIES, "\n".join(s[:120] for s in statements)
    assert len(modules) <= MAX_MODULES, sorted(modules)
    transition_side = {"runs/transitions/", "runs/definition.py", "runs/redaction.py",
                       "runs/checkpoint_sql.py", "runs/wakeup.py", "audit/chain.py",
                       "runs/store.py", "runs/registry.py"}
    assert {m for m in modules if not m.startswith(tuple(transition_side))} == CALLER_SIDE
