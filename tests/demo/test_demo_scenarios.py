"""The demo's scenario runs (demo_scenarios, what `make demo` creates): made once however
often the demo starts, and for each one that needs a person the recommended action names
the step the run waits at, with its button, wherever the transition accepts it."""

import io

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.urls import reverse

from console.roles import ensure_roles
from demo.sandbox import faults
from runs.models import Run, RunStatus, Step
from runs.operator.guidance import recommend

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def test_scenarios_are_made_once_and_each_recommends_the_step_it_waits_at(
        sandbox_and_broker, client, operator):
    try:
        call_command("demo_scenarios", stdout=io.StringIO())
        made = Run.objects.count()
        assert made >= 8
        call_command("demo_scenarios", stdout=io.StringIO())
        assert Run.objects.count() == made
    finally:
        faults.clear()
    client.force_login(operator)
    stopped = Run.objects.filter(status__in=(RunStatus.ATTENTION,
                                             RunStatus.COMPENSATION_FAILED))
    reasons = set(stopped.values_list("attention_reason", flat=True))
    assert {"permanent_error", "unknown_outcome", "compensation_paused",
            "compensation_failed"} <= reasons
    for run in stopped:
        steps = list(Step.objects.filter(run=run).order_by("position"))
        advice = recommend(run, steps)
        accepted = advice.action is not None
        assert accepted, f"{run.business_key}: {advice.why}"
        if advice.action.takes_step:
            eligible = [s.name for s in advice.action.eligible_steps(run, steps)]
            assert advice.step in eligible, (run.business_key, advice.step, eligible)
            assert advice.action.refusal(
                run, steps, step=next(s for s in steps if s.name == advice.step)) is None
        body = client.get(reverse("console:run", args=[run.pk])).content.decode()
        button = f'id="recommended-{advice.action.name}"'
        assert button in body, run.business_key
        if advice.step:
            assert f"{advice.action.label}: {advice.step}…" in body
    paused = stopped.get(attention_reason="compensation_paused")
    advice = recommend(paused, list(Step.objects.filter(run=paused)))
    assert advice.step == "notify-approver"
