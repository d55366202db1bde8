"""A webhook subscriber saved from its admin page writes what the person changed on that
page, and keeps what another admin changed since the page was shown. Django's form judged
a field changed by comparing what was posted with the row as it is when the page is posted:
a field another admin changed after this page was shown counted as changed by this person,
and api.subscribers.subscriber_save wrote it back with the value the page showed, undoing
the other admin's change without a word. The page now posts what it showed beside each
field, and the form compares with that.

The page is loaded and posted as a browser does: every field of its form, as rendered, with
the one the person changes."""

import json
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission, User
from guardian.shortcuts import assign_perm

from api.models import WebhookSubscriber
from api.subscribers import subscriber_create, subscriber_save
from audit.access import verify_access_chain
from audit.models import AccessRecord
from runs.models import Workflow

pytestmark = pytest.mark.django_db

SECRET = "whsec-4711-typed-by-an-admin"
URL, OTHER_URL, MY_URL = ("https://erp.example.com/hook", "https://erp.example.com/hook-v2",
                          "https://erp.example.com/hook-v3")


class _ChangeForm(HTMLParser):
    """What the change page's form posts: each input and textarea as rendered, a checkbox
    only when ticked."""

    def __init__(self):
        super().__init__()
        self.fields: dict[str, str] = {}
        self._inside = False
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("id") == "webhooksubscriber_form":
            self._inside = True
        elif not self._inside or "name" not in attrs:
            return
        elif tag == "input" and attrs.get("type") not in ("submit", "checkbox"):
            self.fields[attrs["name"]] = attrs.get("value") or ""
        elif tag == "input" and "checked" in attrs:
            self.fields[attrs["name"]] = attrs.get("value") or "on"
        elif tag == "textarea":
            self._textarea = attrs["name"]
            self.fields[attrs["name"]] = ""

    def handle_data(self, data):
        if self._textarea is not None:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._textarea = None
        elif tag == "form":
            self._inside = False


def page(client, subscriber) -> dict:
    """The change page's form, as a browser would post it unchanged."""
    response = client.get(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/")
    assert response.status_code == 200
    form = _ChangeForm()
    form.feed(response.text)
    # The textarea's first line break is the markup's, not the value's.
    form.fields["workflows"] = form.fields["workflows"].removeprefix("\n")
    assert {"url", "workflows", "csrfmiddlewaretoken"} <= form.fields.keys()
    return form.fields


def post(client, subscriber, fields: dict):
    return client.post(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/", fields)


def another_admins_save(subscriber, field: str, value) -> None:
    """What another admin's save of their own page commits: `field` changed, through the
    function every door saves with."""
    other = User.objects.get_or_create(username="other", is_superuser=True,
                                       is_staff=True)[0]
    copy = WebhookSubscriber.objects.get(pk=subscriber.pk)
    setattr(copy, field, value)
    subscriber_save(copy, by=other, changed=[field])


def ticked(fields: dict, name: str, on: bool) -> dict:
    fields = dict(fields)
    fields.pop(name, None)
    return {**fields, name: "on"} if on else fields


@pytest.fixture
def root(client):
    user = User.objects.create_superuser("root", "root@example.com", "x")
    client.force_login(user)
    return user


@pytest.fixture
def erp(root):
    subscriber = WebhookSubscriber(name="erp", url=URL, secret=SECRET,
                                   workflows=["test-orders"])
    subscriber_create(subscriber, by=root)
    return subscriber


# (the field another admin changes behind the page, its value; what this page's person
# changes, as posted; the value it is saved as). The workflows were compared with what the
# page showed already (Django does so for a field with a callable default); the URL and
# the active state were not.
CASES = {
    "url behind, workflows here": (("url", OTHER_URL),
                                   ("workflows", '["test-orders", "test-saga"]'),
                                   ["test-orders", "test-saga"]),
    "workflows behind, url here": (("workflows", ["test-saga"]), ("url", MY_URL), MY_URL),
    "active behind, url here": (("active", False), ("url", MY_URL), MY_URL),
    "url behind, active here": (("url", OTHER_URL), ("active", False), False),
    "workflows behind, active here": (("workflows", []), ("active", False), False),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_field_changed_behind_the_page_keeps_the_other_admins_value(client, erp, case):
    (behind, theirs), (mine, posted), saved = case
    fields = page(client, erp)
    another_admins_save(erp, behind, theirs)

    fields = ticked(fields, "active", posted) if mine == "active" else {**fields, mine: posted}
    response = post(client, erp, fields)

    assert response.status_code == 302, response.text
    stored = WebhookSubscriber.objects.get(pk=erp.pk)
    assert getattr(stored, behind) == theirs  # the other admin's change stands
    assert getattr(stored, mine) == saved  # and this person's is written
    # The access chain says who changed what: this person, their field alone.
    latest = AccessRecord.objects.order_by("-seq").first()
    assert latest.actor_label == "root" and latest.after.keys() == {mine}
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


def test_a_page_shown_again_with_an_error_still_posts_what_it_first_showed(client, erp):
    fields = page(client, erp)
    another_admins_save(erp, "url", OTHER_URL)

    # A secret too short is refused, and the page shown again with the error...
    refused = post(client, erp, {**fields, "active": "", "secret": "short"})
    assert refused.status_code == 200 and "errornote" in refused.text
    again = _ChangeForm()
    again.feed(refused.text)
    again.fields["workflows"] = again.fields["workflows"].removeprefix("\n")
    # ...holds what the first showed: the URL the other admin replaced is still not this
    # person's change once the page is posted right.
    response = post(client, erp, ticked({**again.fields, "secret": ""}, "active", False))

    assert response.status_code == 302, response.text
    stored = WebhookSubscriber.objects.get(pk=erp.pk)
    assert (stored.url, stored.active) == (OTHER_URL, False)


def test_a_page_posted_unchanged_writes_and_records_nothing(client, erp):
    fields = page(client, erp)
    another_admins_save(erp, "url", OTHER_URL)
    recorded = AccessRecord.objects.count()

    assert post(client, erp, fields).status_code == 302

    assert WebhookSubscriber.objects.get(pk=erp.pk).url == OTHER_URL
    assert AccessRecord.objects.count() == recorded


def test_staff_who_may_change_it_have_their_workflows_judged_where_it_is_sent_now(client):
    """A person who may view only some workflows keeps, at the URL another admin moved the
    subscriber to, what it took there, as the save judges it: their form judged the URL the
    page showed, a new receiver to it, and refused to keep what it took."""
    root = User.objects.create_superuser("root", "root@example.com", "x")
    keeper = User.objects.create_user("keeper", password="x", is_staff=True)
    keeper.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="api", codename__in=[
            "view_webhooksubscriber", "change_webhooksubscriber"]))
    for name in ("test-orders", "test-saga"):
        Workflow.objects.get_or_create(name=name)
    assign_perm("runs.view_runs", keeper, Workflow.objects.get(name="test-orders"))
    client.force_login(keeper)
    erp = WebhookSubscriber(name="erp", url=URL, secret=SECRET, workflows=["test-saga"])
    subscriber_create(erp, by=root)
    fields = page(client, erp)
    another_admins_save(erp, "url", OTHER_URL)

    response = post(client, erp, {**fields,
                                  "workflows": json.dumps(["test-saga", "test-orders"])})

    assert response.status_code == 302, response.text
    stored = WebhookSubscriber.objects.get(pk=erp.pk)
    assert (stored.url, stored.workflows) == (OTHER_URL, ["test-orders", "test-saga"])
