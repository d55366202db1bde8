"""A webhook subscriber's workflows (a list typed in one box), changed on its admin page and
by another admin since the page was shown, are saved as a set is: the workflows it has now,
with those this person added and without those they removed. The save was refused as a
field changed on both sides, and the person had to reload and type their change again,
though it touched other workflows than the other admin's.

An empty list is every workflow, not a set with no member: a change from it or to it on
either side, or one whose merge would leave no workflow (every one), is still refused, with
nothing saved.

The page is loaded and posted as a browser does; the other admin saves through their own
page."""

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from api.models import WebhookSubscriber
from api.subscribers import subscriber_create
from audit.access import verify_access_chain
from audit.models import AccessRecord
from audit.page_edits import CHANGED_BEHIND_THE_PAGE

from .change_pages import shown_form

pytestmark = pytest.mark.django_db

FORM = "webhooksubscriber_form"
ORDERS, SAGA, APPROVAL = "test-orders", "test-saga", "test-approval"


def signed_in(username: str) -> Client:
    user = User.objects.create_superuser(username, f"{username}@example.com", "x")
    client = Client()
    client.force_login(user)
    return client


def page_url(subscriber) -> str:
    return f"/admin/api/webhooksubscriber/{subscriber.pk}/change/"


def with_workflows(fields: dict, workflows: list[str]) -> dict:
    return {**fields, "workflows": [json.dumps(workflows)]}


@pytest.fixture
def admins():
    return signed_in("root"), signed_in("other")


def subscriber_taking(workflows: list[str]) -> WebhookSubscriber:
    subscriber = WebhookSubscriber(name="erp", url="https://erp.example.com/hook",
                                   secret="whsec-4711-typed-by-an-admin", workflows=workflows)
    subscriber_create(subscriber, by=User.objects.get(username="root"))
    return subscriber


def workflows_of(subscriber) -> list[str]:
    return WebhookSubscriber.objects.get(pk=subscriber.pk).workflows


# (what it takes when both pages are shown; what the other admin saves; what this person
# posts; what it takes once this person's page is saved).
MERGED = {
    "one added behind, another here": ([ORDERS], [ORDERS, SAGA], [ORDERS, APPROVAL],
                                       [APPROVAL, ORDERS, SAGA]),
    "one removed behind, one added here": ([ORDERS, SAGA], [SAGA], [ORDERS, SAGA, APPROVAL],
                                           [APPROVAL, SAGA]),
    "one added behind, one removed here": ([ORDERS, SAGA], [ORDERS, SAGA, APPROVAL], [SAGA],
                                           [APPROVAL, SAGA]),
}


@pytest.mark.parametrize("case", MERGED.values(), ids=MERGED.keys())
def test_the_workflows_are_saved_with_both_admins_changes(admins, case):
    mine, other = admins
    shown, theirs, posted, saved = case
    erp = subscriber_taking(shown)
    fields = shown_form(mine, page_url(erp), FORM)
    response = other.post(page_url(erp),
                          with_workflows(shown_form(other, page_url(erp), FORM), theirs))
    assert response.status_code == 302
    recorded = AccessRecord.objects.count()

    response = mine.post(page_url(erp), with_workflows(fields, posted))

    assert response.status_code == 302, response.context["adminform"].form.errors
    assert workflows_of(erp) == saved
    (record,) = AccessRecord.objects.order_by("seq")[recorded:]
    assert (record.actor_label, record.before, record.after) == (
        "root", {"workflows": sorted(theirs)}, {"workflows": saved})
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


# As MERGED, each refused: every workflow ([]) on one side, or left by the merge.
REFUSED = {
    "every workflow behind, one added here": ([ORDERS], [], [ORDERS, SAGA]),
    "one added behind, every workflow here": ([ORDERS], [ORDERS, SAGA], []),
    "every workflow shown, one named on each side": ([], [ORDERS], [SAGA]),
    "the last one removed on each side": ([ORDERS, SAGA], [ORDERS], [SAGA]),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_a_change_from_or_to_every_workflow_on_both_sides_is_refused(admins, case):
    mine, other = admins
    shown, theirs, posted = case
    erp = subscriber_taking(shown)
    fields = shown_form(mine, page_url(erp), FORM)
    response = other.post(page_url(erp),
                          with_workflows(shown_form(other, page_url(erp), FORM), theirs))
    assert response.status_code == 302
    recorded = AccessRecord.objects.count()

    response = mine.post(page_url(erp), with_workflows(fields, posted))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["workflows"] == [CHANGED_BEHIND_THE_PAGE]
    assert workflows_of(erp) == sorted(theirs)
    assert AccessRecord.objects.count() == recorded
