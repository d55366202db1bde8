"""The security matrix, generated from the URLconf: every view that can change state x
every role x GET / POST without the CSRF token / POST with it.

A view that accepts more than GET cannot be added without appearing here: it either
matches an entry of matrix.ENTRIES and becomes a target, or fails the first test below,
which names it. Every operator action of runs.operator.actions.ACTIONS and every bulk action is a
target of its own. For each target, every refusal must be a refusal (sent to sign in, 400,
401, 403, 404, 405; the CSRF check's own page where the token is missing) and leave the
runs, their steps, the audit records and the approval requests as they were, and indeed
every table unwritten; what each role may do must go through, and the first such request
must change the product, which proves that the refusals were refusals of a live action."""

import json
import re
import time

import pytest
from django.urls import reverse

from console.views import BULK_ACTIONS
from runs.operator.actions import ACTIONS, offered
from runs.waiting import events

from .matrix import (
    ENTRIES,
    GET,
    METHODS,
    ROLES,
    entry_for,
    event_body,
    is_csrf_refusal,
    send,
    targets,
)
from .state import snapshot
from .urlconf import state_changing_views
from .world import ACTION_SCENARIOS, EVENT_SOURCES, WEBHOOK_SOURCE

TARGETS = targets()


def test_every_view_that_can_change_state_is_in_the_matrix():
    missing = [f"{v.key} ({v.route}, accepts {', '.join(sorted(v.methods))})"
               for v in state_changing_views() if entry_for(v) is None]
    assert not missing, (
        "These views accept more than GET but are not in the security matrix. Add each to "
        "ENTRIES in tests/security/matrix.py (how to fill its URL, what to post, who may), "
        "or make it GET-only with require_GET:\n  " + "\n  ".join(missing))


def test_every_entry_of_the_matrix_matches_a_view():
    keys = [v.key for v in state_changing_views()]
    stale = [pattern for pattern, entry in ENTRIES
             if entry.present() and not any(re.fullmatch(pattern, key) for key in keys)]
    assert not stale, f"ENTRIES in tests/security/matrix.py that match no view: {stale}"


def test_only_views_that_no_cookie_opens_skip_the_csrf_check():
    wrong = [f"{v.key} is {'CSRF-exempt' if v.csrf_exempt else 'CSRF-checked'}; the matrix "
             f"expects it {'checked' if entry_for(v).csrf else 'exempt'}"
             for v in state_changing_views()
             if entry_for(v) is not None and v.csrf_exempt == entry_for(v).csrf]
    assert not wrong, "\n".join(wrong)


def test_every_operator_action_and_bulk_action_is_a_target():
    assert {t.item for t in TARGETS if t.view.key == "console:action"} == set(ACTIONS)
    assert {t.item for t in TARGETS if t.view.key == "console:bulk"} == set(BULK_ACTIONS)
    assert len(ROLES) * len(METHODS) == 21


def test_every_operator_action_is_tried_on_a_run_where_it_can_succeed(world):
    missing = sorted(set(ACTIONS) - set(ACTION_SCENARIOS))
    assert not missing, (f"add a run state for {missing} to ACTION_SCENARIOS in "
                         "tests/security/world.py")
    for name, scenario in ACTION_SCENARIOS.items():
        can = {a.name for a in offered(world.fresh(scenario), world.steps(scenario))}
        assert name in can, (f"{name} cannot succeed on the {scenario!r} run (it offers "
                             f"{sorted(can)}): fix SCENARIOS or ACTION_SCENARIOS in "
                             "tests/security/world.py")


def test_the_webhook_refuses_the_matrix_for_want_of_a_signature_only(world):
    """The matrix sends the webhook no signature and every role is refused; the same body,
    signed with the source's secret, is delivered: the refusals are the signature's."""
    data, content_type = event_body(world, "anonymous", None)
    body = json.dumps(data).encode()
    now = str(int(time.time()))
    response = world.clients["anonymous"].post(
        reverse("api:event_webhook", kwargs={"source": WEBHOOK_SOURCE}), body,
        content_type=content_type, HTTP_X_EVENT_TIMESTAMP=now,
        HTTP_X_EVENT_SIGNATURE=events.signature(EVENT_SOURCES[WEBHOOK_SOURCE]["secret"], now,
                                                body))
    assert response.status_code == 202, response.content
    assert response.json() == {"status": "delivered", "run_id": world.run("waiting_event").pk}


def _location(response) -> str:
    return f"{response.status_code} {response.get('Location', '')}".strip()


def _judge(target, method: str, expected: str, response, before, after,
           first_pass: bool) -> str | None:
    """What is wrong with this answer, or None."""
    entry = target.entry
    changed = before.product_changes(after)
    if response.status_code >= 500:
        return f"answered {response.status_code}"
    if expected == "open":
        return f"changed the product: {changed}" if changed else None
    if expected == "csrf" and not is_csrf_refusal(response):
        return f"not refused by the CSRF check: {_location(response)}"
    if expected == "refused" and not entry.refused(response):
        return f"not refused: {_location(response)}"
    if expected in ("csrf", "refused"):
        if changed:
            return f"refused ({_location(response)}) but changed {changed}"
        written = before.tables_written(after)
        if written:
            return f"refused ({_location(response)}) but wrote rows: {written}"
        return None
    if not entry.passed(response):
        return f"did not go through: {_location(response)}"
    if first_pass and not changed:
        return "went through but changed nothing: the target's run state is not live"
    if changed and (method == GET or not entry.changes):
        return f"changed the product: {changed}"
    return None


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.id)
def test_refusals_change_nothing_and_allowed_requests_go_through(world, target):
    path = target.path(world)
    failures = []
    passed_before = False
    before = snapshot()
    for role, method in target.cases():
        expected = target.expected(role, method)
        response = send(world, target, path, role, method)
        after = snapshot()
        first_pass = (expected == "passes" and method != GET and target.entry.changes
                      and not passed_before)
        passed_before = passed_before or first_pass
        problem = _judge(target, method, expected, response, before, after, first_pass)
        if problem:
            failures.append(f"{role:>14} {method:<17} expected {expected}: {problem}")
        before = after
    assert not failures, f"{target.id} ({target.entry.why}):\n" + "\n".join(failures)
