"""What one operator action costs from the console's URL to its audit record: the queries
of its POST, the project's files on the way from the view to the audit record, and every
project module it runs through. The action's checks run once, in
approvals.operator_actions.act, in the query that locks the run (permission, stale page and
lock in one statement), and the transition goes on with that row (its steps, the change, the
audit record)."""

import os
import sys
from contextlib import contextmanager

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from audit.models import AuditRecord
from runs import store
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

# Statements of one action's POST: the session and the user (2), the permission check with
# the stale-page guard that also locks the run (1), then the transition's own (steps, the
# steps' and the run's changes, the audit record, the progress event: 4 to 5, by action).
# 14 to 15 before the checks moved into one function (the run read three times, the
# permission twice); 8 to 10 while the check and the lock were two queries and a reconcile
# read the steps twice.
MAX_QUERIES = 8
# A run brought back from its end loses the approval requests its end left pending before
# it can wait again (approvals.operator_actions.act): one statement more, for reopen only.
FROM_AN_END = {"reopen": 1}
# Dated by the time read with the run's lock (runs.store), not by approvals.timeouts' clock;
# whether the run still waits on a step or a call asked of approvals.waits.
WITHDRAWAL = {"approvals/withdrawal.py", "approvals/requests.py", "approvals/waits.py"}
# The htmx variant draws the run's live part again after the action: the action's own (7 to
# 8), then the run, its steps, the last audit record per step, the user's permissions (2),
# step times, approval requests, the timeline and its deliveries (9).
MAX_QUERIES_HTMX = 17
# The project's files from the view to the audit record, on the stack when the record is
# written: the view, act, the action table, the transition (and its skeleton), the kernel's
# save, the statement. 7 while the skeleton lived apart from the transitions.
MAX_PATH_FILES = 6
PATH = ["console/views.py", "approvals/operator_actions.py", "runs/operator/actions.py",
        "runs/machine/transitions/operator.py", "runs/machine/transitions/kernel.py",
        "runs/store/postgres.py"]
# Every project module one action runs through, the leaves included (the request
# middlewares: the API's JSON errors and the storable client headers of the failed-login
# log, which every request passes; the permission rule, the trace span, the database clock,
# redaction, the wake-up hint, the store: the package that chooses it and its PostgreSQL
# module, the effect machine: its rules and the row adapters, the one check of text the
# database cannot store, the keyed seal of the chain's head, the door that has a lost
# COMMIT asked about: its middleware and runs.execution.lost_commit, the path's id read by its
# converter, the action's input rules): the caller's side and the transition's (22 to 26 by
# action, reopen's withdrawal the most; 22 to 25 before the conditions on runs' waits left
# approvals.requests for approvals.waits, 21 to 24 before the input rules left the action
# table for a module of their own, 20 to 23 before the converter, 18 to 21 before the door).
MAX_MODULES = 26
CALLER_SIDE = {"api/middleware.py", "console/client_headers.py", "console/views.py",
               "approvals/operator_actions.py", "runs/permissions.py", "runs/operator/actions.py",
               "runs/machine/tracing.py", "runs/machine/storable.py",
               "console/answered_commits.py", "runs/execution/lost_commit.py",
               # The path's run id, read by its converter.
               "runs/reads/id_in_path.py",
               # The input's rules (a field an action does not take, a call's id).
               "runs/operator/action_input.py"}
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


@contextmanager
def _path_to_audit_record():
    """The project's files on the stack, from the view down, whenever an audit record is
    inserted (the files an action crosses to reach its record)."""
    paths = []

    def wrapper(execute, sql, params, many, context):
        if sql.replace('"', "").startswith("INSERT INTO audit_auditrecord"):
            frames, frame = [], sys._getframe()
            while frame is not None:
                frames.append(frame.f_code.co_filename)
                frame = frame.f_back
            files = []
            for name in reversed(frames):  # outermost first
                if name.startswith(ROOT) and not name.startswith(
                        (f"{ROOT}.venv{os.sep}", f"{ROOT}tests{os.sep}")):
                    relative = name[len(ROOT):]
                    if relative == "console/views.py" or files:
                        if relative not in files:
                            files.append(relative)
            paths.append(files)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield paths


def _warm(client, run):
    """The session and the database clock as they are in use: the page was drawn, and the
    clock's offset measured (once a process every REMEASURE_SECONDS, runs.store.server_clock,
    not once an action: a test that came after a slow neighbour counted that measurement as
    one statement more)."""
    client.get(reverse("console:run", args=[run.pk]))
    store.current().now()


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
    _warm(client, run)
    seen = str(Run.objects.get(pk=run.pk).audit_seq)
    with CaptureQueriesContext(connection) as queries, _path_to_audit_record() as paths:
        response, modules = _modules_during(lambda: client.post(
            reverse("console:action", args=[run.pk, action]),
            {"seen": seen, "reason": "measured", **data}))
    assert response.status_code == 302
    record = AuditRecord.objects.filter(run=run).order_by("-seq").first()
    assert record.actor_label == "olga" and record.reason == "measured", action
    statements = [q["sql"] for q in queries.captured_queries
                  if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(statements) <= MAX_QUERIES + FROM_AN_END.get(action, 0), \
        "\n".join(s[:120] for s in statements)
    assert len(paths) == 1 and len(paths[0]) <= MAX_PATH_FILES, paths
    assert paths[0] == PATH, paths
    assert len(modules) <= MAX_MODULES, sorted(modules)
    transition_side = {"runs/machine/transitions/", "runs/definitions/definition.py",
                       "audit/redaction.py",
                       "runs/store/", "runs/machine/wakeup.py", "audit/chain.py",
                       "audit/head_seals.py",
                       "runs/definitions/registry.py"}
    assert {m for m in modules if not m.startswith(tuple(transition_side))} == CALLER_SIDE | (
        WITHDRAWAL if action in FROM_AN_END else set())


@pytest.mark.parametrize("action", list(CASES))
def test_an_htmx_action_draws_the_run_again_in_few_queries(client_for, operator, action):
    make, data = CASES[action]
    run = make()
    client = client_for(operator)
    _warm(client, run)
    seen = str(Run.objects.get(pk=run.pk).audit_seq)
    with CaptureQueriesContext(connection) as queries:
        response = client.post(reverse("console:action", args=[run.pk, action]),
                               {"seen": seen, "reason": "measured", **data},
                               HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    record = AuditRecord.objects.filter(run=run).order_by("-seq").first()
    assert record.actor_label == "olga" and record.reason == "measured", action
    statements = [q["sql"] for q in queries.captured_queries
                  if not q["sql"].startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]
    assert len(statements) <= MAX_QUERIES_HTMX + FROM_AN_END.get(action, 0), \
        "\n".join(s[:120] for s in statements)
