"""The page of a four-eyes request closed "What the action will do" with the sentence the
confirmation dialog tells the person who asks: "your request goes to a second person for
approval (four eyes) and nothing happens until then". The second person read it on the
page where their approval is what makes it happen. They are told what their approval and
their rejection do instead; the asker's dialog says what it said."""

import html
import re

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.urls import reverse

from approvals import four_eyes
from console.roles import ensure_roles
from runs.models import Step
from runs.operator.actions import ACTIONS
from tests.approvals.bulk_requests import run_with_an_effect

pytestmark = pytest.mark.django_db

ASKERS_SENTENCE = "your request goes to a second person"


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga", email="olga@example.com")
    carl = User.objects.create_user("carl", email="carl@example.com")
    for user in (olga, carl):
        user.groups.add(Group.objects.get(name="operators"))
    return olga, carl


def _text(response) -> str:
    assert response.status_code == 200
    main = response.content.decode().split("<main", 1)[1]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", main)).split())


def test_the_approver_reads_what_approving_and_rejecting_do(people, client):
    olga, carl = people
    run = run_with_an_effect()
    request, _ = four_eyes.request_operator_action(run, action="terminate",
                                                   requested_by=carl, reason="duplicate")
    client.force_login(olga)
    page = _text(client.get(reverse("approvals:detail", kwargs={"pk": request.pk})))
    follows = page.split("What the action will do", 1)[1].split("Your decision", 1)[0]
    assert "Approved: terminate is taken on this run, as carl asked" in follows
    assert "Ends the run now." in follows
    assert "Rejected: nothing is done to the run." in follows
    assert ASKERS_SENTENCE not in follows


def test_the_asker_is_still_told_their_request_goes_to_a_second_person(people):
    run = run_with_an_effect()
    steps = list(Step.objects.filter(run=run).order_by("position"))
    assert any(ASKERS_SENTENCE in line for line in ACTIONS["terminate"].explain(run, steps))
