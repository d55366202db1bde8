"""The security matrix: every view that can change state x every role x GET / POST without
the CSRF token / POST with it, and what each combination must answer.

ENTRIES maps the URLconf's views (by "namespace:name", or "route:<route>" for a pattern
without a name; a regular expression matched in full) to how the matrix calls them: how to
fill the URL, what to post, who may. A view that can change state and matches no entry
fails test_every_view_that_can_change_state_is_in_the_matrix, which names it: add it here.
Views whose URL takes an item the matrix expands (every operator action of
runs.operator.actions.ACTIONS, every bulk action) get one target per item, so a new action is in
the matrix the moment it exists.
"""

import json
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.apps import apps
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.contrib.messages import get_messages
from django.urls import reverse

from runs.models import Run
from runs.operator.actions import ACTIONS

from .urlconf import View, state_changing_views
from .world import (
    ACTION_FIELDS,
    ACTION_SCENARIOS,
    EVENT_PAYLOAD,
    PASSWORD,
    WAITING_SCENARIOS,
    WEBHOOK_SOURCE,
    World,
)

# anonymous: no session. api_token: no session, an API bearer token for test-orders and the
# event-waiting workflow (world.WAITING_SCENARIOS), made by nobody.
# other_operator: every operator permission, but on another workflow's row only.
# In the order the matrix runs them: those refused most often first.
ROLES = ("anonymous", "api_token", "auditor", "approver", "other_operator", "operator",
         "superuser")
EVERYONE = frozenset(ROLES)
NOBODY: frozenset[str] = frozenset()
STAFF = frozenset({"superuser"})

GET, POST_BARE, POST_CSRF = "GET", "POST without CSRF", "POST with CSRF"
METHODS = (GET, POST_BARE, POST_CSRF)

FORM = "form"
JSON = "application/json"


# --- what a response means --------------------------------------------------------------------

LOGIN_PATHS = (settings.LOGIN_URL, "/admin/login/")


def redirect_path(response) -> str | None:
    if response.status_code not in (301, 302, 303, 307, 308):
        return None
    return urlsplit(response["Location"]).path


def is_refusal(response) -> bool:
    """Refused: sent to sign in, or 400 / 401 / 403 / 404 / 405."""
    return (response.status_code in (400, 401, 403, 404, 405)
            or redirect_path(response) in LOGIN_PATHS)


def is_csrf_refusal(response) -> bool:
    """Refused by CsrfViewMiddleware: 403 with the product's "the form has expired" page."""
    return response.status_code == 403 and any(
        t.name == "403_csrf.html" for t in getattr(response, "templates", None) or [])


def went_through(response) -> bool:
    return response.status_code < 400 and redirect_path(response) not in LOGIN_PATHS


def past_the_admin_guard(response) -> bool:
    """The admin's staff check and CSRF let it through; what the ModelAdmin then allows
    (read-only admins answer 403 to a change) is the admin's business, not the guard's."""
    return (response.status_code < 500 and redirect_path(response) not in LOGIN_PATHS
            and not is_csrf_refusal(response))


def answered(response) -> bool:
    """Logout: done, wherever it sends the browser next (the login page, for the console)."""
    return response.status_code in (200, 302) and not is_csrf_refusal(response)


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def bulk_refused(response) -> bool:
    # The bulk action refuses run by run: back to the list, each run named with the reason.
    return is_refusal(response) or (
        redirect_path(response) == reverse("console:runs")
        and any("no run you may act on" in m for m in _messages(response))
        and not any(" done for runs " in m for m in _messages(response)))


def bulk_went_through(response) -> bool:
    return went_through(response) and not bulk_refused(response)


# --- the table ----------------------------------------------------------------------------------

Body = tuple[dict, str]


def _empty(world: World, role: str, item: str | None) -> Body:
    return {}, FORM


def _no_kwargs(world: World, view: View, item: str | None) -> dict:
    return {}


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Entry:
    """How the matrix calls a view and who may use it."""

    why: str
    # Roles whose POST goes through (with the CSRF token where the view checks it).
    may: frozenset[str]
    # Roles whose GET goes through, for a view that also answers GET.
    readers: frozenset[str] = NOBODY
    kwargs: Callable[[World, View, str | None], dict] = _no_kwargs
    url: Callable[[World, View, str | None], str] | None = None  # for unnamed patterns
    body: Callable[[World, str, str | None], Body] = _empty
    expand: Callable[[], Iterable[str]] | None = None
    # True: the first POST that goes through changes a run, its steps, its audit records
    # or approval requests (proof that the refusals were refusals of a live action). False:
    # no request at all may change them.
    changes: bool = False
    # The CSRF token is checked. False only where no cookie opens the view.
    csrf: bool = True
    # Open to everyone by design, outside the product: any answer but a 5xx, and no
    # request may change the product's state.
    open: bool = False
    passed: Callable = went_through
    refused: Callable = is_refusal
    # Whether the URLconf serves it in these settings (the sandbox may be off).
    present: Callable[[], bool] = _always


def scenario_for(action: str) -> str:
    if action not in ACTION_SCENARIOS:
        raise AssertionError(
            f"The operator action {action!r} has no run state in the security matrix: add "
            "it to ACTION_SCENARIOS in tests/security/world.py (a state where it can "
            "succeed, so that its refusals are tested against a live action).")
    return ACTION_SCENARIOS[action]


def _action_kwargs(world: World, view: View, action: str | None) -> dict:
    return {"run_id": world.run(scenario_for(action)).pk, "action": action}


def _action_body(world: World, role: str, action: str | None) -> Body:
    scenario = scenario_for(action)
    run = world.fresh(scenario)
    spec = ACTIONS[action]
    # Only what the action reads: an option it would not read is refused, whoever asks.
    given = {"reason": "security matrix", "mode": "found", "remote_ref": "REF-MATRIX",
             "evidence": "seen in the remote system"}
    data = {"seen": str(run.audit_seq),
            **{name: value for name, value in given.items() if name in spec.reads("found")}}
    if spec.takes_step:
        eligible = spec.eligible_steps(run, world.steps(scenario))
        data["step"] = eligible[0].name if eligible else ""
    if spec.takes_call:
        data["call"] = "1.0"  # the agent scenarios' one tool call (world._agent_run)
    data.update(ACTION_FIELDS.get(action, {}))
    return data, FORM


def _bulk_body(world: World, role: str, action: str | None) -> Body:
    # As the runs list's form posts it: a reconcile in bulk asks by key.
    run = world.run("failed_write")
    return {"action": action, "run": [run.pk], "reason": "security matrix",
            f"seen-{run.pk}": str(Run.objects.get(pk=run.pk).audit_seq)}, FORM


def _bulk_actions() -> Iterable[str]:
    from console.views import BULK_ACTIONS

    return BULK_ACTIONS


def _bulk_filter_body(world: World, role: str, item: str | None) -> Body:
    return {"action": "resume", "status": "attention", "reason": "security matrix"}, FORM


def _bulk_job_kwargs(world: World, view: View, item: str | None) -> dict:
    from approvals.bulk import start_bulk_job
    from runs.reads.selectors import RunFilters

    job, _ = start_bulk_job("resume", RunFilters(status="attention"),
                            user=world.users["operator"], reason="security matrix")
    return {"job_id": job.pk}


def _token_just_used() -> None:
    # A token's last use is stamped at most once a minute, refused requests included: here
    # it is stamped before the entry's requests, so that they are judged on what they write.
    from django.utils import timezone

    from api.models import ApiToken

    ApiToken.objects.update(last_used_at=timezone.now())


def _api_action_kwargs(world: World, view: View, item: str | None) -> dict:
    _token_just_used()
    return {"run_id": world.run("failed_write").pk, "action": "resume"}


def _api_bulk_kwargs(world: World, view: View, item: str | None) -> dict:
    _token_just_used()
    if view.key != "api:cancel_bulk_job":
        return {}
    from approvals.bulk import start_bulk_job
    from runs.reads.selectors import RunFilters

    job, _ = start_bulk_job("resume", RunFilters(status="attention"),
                            user=world.users["operator"], reason="security matrix")
    return {"job_id": job.pk}


def _api_bulk_body(world: World, role: str, item: str | None) -> Body:
    return {"action": "resume", "reason": "security matrix"}, JSON


def _api_decision_kwargs(world: World, view: View, item: str | None) -> dict:
    _token_just_used()
    return {"request_id": world.approval.pk}


def _api_action_body(world: World, role: str, item: str | None) -> Body:
    return {"reason": "security matrix"}, JSON


def _api_decision_body(world: World, role: str, item: str | None) -> Body:
    return {"approve": True, "decision_id": str(uuid.uuid4())}, JSON


def _decide_body(world: World, role: str, item: str | None) -> Body:
    return {"decision": "approve", "comment": "security matrix",
            "decision_id": str(uuid.uuid4())}, FORM


def _login_body(world: World, role: str, item: str | None) -> Body:
    user = world.users.get(role)
    return {"username": user.username if user else "nobody", "password": PASSWORD}, FORM


def _start_run_body(world: World, role: str, item: str | None) -> Body:
    key = world.unique("matrix")
    return {"workflow": "test-orders", "business_key": key, "input": {"order": key}}, JSON


def _fault_body(world: World, role: str, item: str | None) -> Body:
    return {"endpoint": "tracker.create", "kind": "unavailable", "times": "1"}, FORM


def _json_body(world: World, role: str, item: str | None) -> Body:
    return {}, JSON


def _save_view_body(world: World, role: str, item: str | None) -> Body:
    return {"name": "security matrix", "query": "status=attention"}, FORM


def _saved_view_kwargs(world: World, view: View, item: str | None) -> dict:
    from console.saved_views import save_view

    # Shared, so that everyone who may see runs sees it; still only its owner deletes it.
    saved = save_view(user=world.users["operator"], name="matrix shared",
                      query="status=attention", shared=True)
    return {"view_id": saved.pk}


def _schedule_kwargs(world: World, view: View, item: str | None) -> dict:
    return {"workflow": "test-scheduled", "name": "every-minute"}  # tests.workflows


def _pause_body(world: World, role: str, item: str | None) -> Body:
    return {"paused": "1", "reason": "security matrix"}, FORM


def _api_dispatch_kwargs(world: World, view: View, item: str | None) -> dict:
    _token_just_used()
    return {"workflow": "test-orders"}


def _api_subscriber_kwargs(world: World, view: View, item: str | None) -> dict:
    _token_just_used()
    if "subscriber_id" not in view.route:
        return {}
    from api.models import WebhookSubscriber
    from api.subscribers import subscriber_create

    subscriber = WebhookSubscriber.objects.filter(name="matrix").first()
    if subscriber is None:
        subscriber = WebhookSubscriber(name="matrix", url="https://matrix.example.com/in",
                                       secret="matrix-secret", workflows=["test-orders"])
        subscriber_create(subscriber, by=world.users["superuser"])
    return {"subscriber_id": subscriber.pk}


def _api_subscriber_body(world: World, role: str, item: str | None) -> Body:
    return {"name": world.unique("matrix"), "url": "https://matrix.example.com/in",
            "secret": "matrix-secret-4711", "workflows": ["test-orders"]}, JSON


def event_body(world: World, role: str, item: str | None) -> Body:
    # The same event id each time: the first delivery goes through, later ones are
    # redeliveries that change nothing.
    return {"workflow": WAITING_SCENARIOS["waiting_event"], "event": "payment.settled",
            "event_id": "evt-matrix", "correlation_key": world.run("waiting_event").business_key,
            "payload": EVENT_PAYLOAD}, JSON


def _api_event_kwargs(world: World, view: View, item: str | None) -> dict:
    _token_just_used()
    return {}


def _sandbox_enabled() -> bool:
    return settings.SANDBOX_ENABLED


# The admin: every URL of every ModelAdmin (and of guardian's object permissions) behind the
# admin's staff check; the URL's object is the first row of its model (or one that does
# not exist, which the admin answers too).

def _admin_model(view: View):
    parts = view.route.split("/")
    return apps.get_model(parts[1], parts[2])


def _first_pk(model) -> str:
    pk = model.objects.order_by("pk").values_list("pk", flat=True).first()
    return str(pk if pk is not None else 0)


def _admin_kwargs(world: World, view: View, item: str | None) -> dict:
    names = set(re.findall(r"<(?:\w+:)?(\w+)>", view.route))
    kwargs = {}
    if "content_type_id" in names:  # admin/r/<content_type_id>/<object_id>/: view on site
        return {"content_type_id": str(ContentType.objects.get_for_model(
            apps.get_model("runs", "run")).pk), "object_id": str(world.run().pk)}
    if names & {"object_id", "object_pk", "id"}:
        name = (names & {"object_id", "object_pk", "id"}).pop()
        kwargs[name] = _first_pk(_admin_model(view))
    if "user_id" in names:
        kwargs["user_id"] = str(world.users["operator"].pk)
    if "group_id" in names:
        kwargs["group_id"] = _first_pk(apps.get_model("auth", "group"))
    if "app_label" in names:
        kwargs["app_label"] = "runs"
    return kwargs


def _admin_object_url(world: World, view: View, item: str | None) -> str:
    # admin/<app>/<model>/<path:object_id>/ redirects to the change page.
    return "/" + view.route.replace("<path:object_id>", _first_pk(_admin_model(view)))


def _admin_catch_all_url(world: World, view: View, item: str | None) -> str:
    return "/admin/no-such-page/"


ADMIN_STAFF_ONLY = Entry(
    "Django admin: staff only (here the superuser); everyone else is sent to its login.",
    may=STAFF, readers=STAFF, kwargs=_admin_kwargs, passed=past_the_admin_guard)

ENTRIES: list[tuple[str, Entry]] = [
    # The console.
    ("console:action", Entry(
        "An operator action on a run: its permission on the run's workflow, POST, CSRF.",
        may=frozenset({"operator", "superuser"}), kwargs=_action_kwargs, body=_action_body,
        expand=lambda: ACTIONS, changes=True)),
    ("console:bulk", Entry(
        "An operator action on many runs: each run checked against the permission.",
        may=frozenset({"operator", "superuser"}), body=_bulk_body, expand=_bulk_actions,
        changes=True, passed=bulk_went_through, refused=bulk_refused)),
    ("console:bulk_start", Entry(
        "A bulk job by filter: the action's permission on some workflow (each run is checked "
        "again as the job reaches it), POST, CSRF.",
        may=frozenset({"operator", "other_operator", "superuser"}), body=_bulk_filter_body)),
    ("console:bulk_cancel", Entry(
        "Cancel a bulk job: the person who started it (and the superuser), POST, CSRF.",
        may=frozenset({"operator", "superuser"}), kwargs=_bulk_job_kwargs)),
    ("approvals:decide", Entry(
        "Approve or reject: approvers of the request (and the superuser), POST, CSRF.",
        may=frozenset({"approver", "superuser"}),
        kwargs=lambda world, view, item: {"pk": world.approval.pk}, body=_decide_body,
        changes=True)),
    ("console:save_view", Entry(
        "Save a view of the runs list: whoever may see runs (on some workflow), POST, CSRF.",
        may=frozenset({"auditor", "approver", "other_operator", "operator", "superuser"}),
        body=_save_view_body)),
    ("console:delete_view", Entry(
        "Delete a saved view: its owner only (a shared view too; not even the superuser), "
        "POST, CSRF.",
        may=frozenset({"operator"}), kwargs=_saved_view_kwargs)),
    ("console:schedule_pause", Entry(
        "Pause or resume a schedule: runs.pause_dispatch on its workflow (approvals."
        "operator_actions.act_on_workflow), POST, CSRF.",
        may=frozenset({"operator", "superuser"}), kwargs=_schedule_kwargs, body=_pause_body)),
    ("console:dispatch_pause", Entry(
        "Pause or resume a workflow's dispatch: runs.pause_dispatch on the workflow "
        "(approvals.operator_actions.act_on_workflow), POST, CSRF.",
        may=frozenset({"operator", "superuser"}),
        kwargs=lambda world, view, item: {"workflow": "test-orders"}, body=_pause_body)),
    ("login", Entry("The console's login: open to everyone, CSRF-checked.",
                    may=EVERYONE, readers=EVERYONE, body=_login_body)),
    ("logout", Entry("The console's logout: POST only, CSRF-checked.", may=EVERYONE,
                     passed=answered)),
    # The integration API: a bearer token, never a cookie, so no CSRF token either.
    ("api:run_action", Entry(
        "An operator action over the API: only a token that acts for a person with the "
        "permission (the matrix's token acts for nobody: 403).",
        may=NOBODY, kwargs=_api_action_kwargs, body=_api_action_body, csrf=False)),
    ("api:(start_bulk_job|cancel_bulk_job)", Entry(
        "A bulk job over the API: only a token that acts for a person (the matrix's token "
        "acts for nobody: 403).",
        may=NOBODY, kwargs=_api_bulk_kwargs, body=_api_bulk_body, csrf=False)),
    ("api:decide_approval", Entry(
        "An approval decision over the API: only a token whose person may decide (the "
        "matrix's token acts for nobody: 403).",
        may=NOBODY, kwargs=_api_decision_kwargs, body=_api_decision_body, csrf=False)),
    ("api:(start_run|list_runs)", Entry(
        "Start a run (POST) or list runs (GET): a token for the workflow; a console "
        "session is not a token.",
        may=frozenset({"api_token"}), readers=frozenset({"api_token"}), body=_start_run_body,
        changes=True, csrf=False)),
    ("api:(pause_dispatch|resume_dispatch)", Entry(
        "Pause or resume a workflow's dispatch over the API: only a token that acts for a "
        "person who may pause it (the matrix's token acts for nobody: 403); a console "
        "session is not a token.",
        may=NOBODY, kwargs=_api_dispatch_kwargs, body=_api_action_body, csrf=False)),
    ("api:(list_subscribers|create_subscriber|get_subscriber|change_subscriber"
     "|delete_subscriber)", Entry(
        "Webhook subscribers over the API: only a token that acts for a person with the "
        "model permission admin asks (the matrix's token acts for nobody: 403); a console "
        "session is not a token. A subscriber's own path takes no POST (405); its PATCH and "
        "DELETE are refused alike (tests/api/test_a_webhook_subscriber_refused_over_the_api_"
        "is_neither_written_nor_recorded.py).",
        may=NOBODY, kwargs=_api_subscriber_kwargs, body=_api_subscriber_body, csrf=False)),
    ("api:receive_event", Entry(
        "Send an external event: a token that may use the event's workflow; it is "
        "delivered to the run that waits for it. A console session is not a token.",
        may=frozenset({"api_token"}), kwargs=_api_event_kwargs, body=event_body,
        changes=True, csrf=False)),
    ("api:event_webhook", Entry(
        "Send an external event, signed: only a delivery with a valid HMAC signature of a "
        "configured source (401 otherwise); neither a session nor a bearer token counts, "
        "and the matrix never signs, so nobody gets through.",
        may=NOBODY, kwargs=lambda world, view, item: {"source": WEBHOOK_SOURCE},
        body=event_body, csrf=False)),
    ("api:(openapi-json|openapi-view)", Entry(
        "The API's description and its docs page: read-only, for any method.",
        may=EVERYONE, readers=EVERYONE)),
    ("api:api-root", Entry("The API's root: not found, for any method.", may=NOBODY)),
    # Django admin.
    ("admin:login", Entry(
        "The admin's login: open to everyone, CSRF-checked.",
        may=EVERYONE, readers=EVERYONE, body=_login_body, passed=past_the_admin_guard)),
    ("admin:logout", Entry(
        "The admin's logout: a POST, CSRF-checked, from anyone; LogoutView refuses GET "
        "(405), but the admin sends whoever is not staff to its index before that.",
        may=EVERYONE, readers=EVERYONE - STAFF, passed=answered)),
    ("admin:(index|app_list|password_change|password_change_done|autocomplete|jsi18n"
     "|view_on_site)", ADMIN_STAFF_ONLY),
    (r"admin:\w+_(changelist|add|history|delete|change|password_change|permissions"
     r"|permissions_manage_user|permissions_manage_group|access|role)", ADMIN_STAFF_ONLY),
    (r"route:admin/\w+/\w+/<path:object_id>/",
     Entry(ADMIN_STAFF_ONLY.why, may=STAFF, readers=STAFF, url=_admin_object_url,
           passed=past_the_admin_guard)),
    (r"route:admin/\(\?P<url>\.\*\)\$", Entry(
        "The admin's catch-all: sign in first, then not found.", may=STAFF, readers=STAFF,
        url=_admin_catch_all_url, passed=past_the_admin_guard)),
    # The sandbox (served where settings.SANDBOX_ENABLED, never in production).
    ("sandbox:faults", Entry(
        "Queue a sandbox fault: holders of sandbox.queue_fault (the superuser), CSRF.",
        may=STAFF, readers=STAFF, body=_fault_body, present=_sandbox_enabled)),
    ("sandbox:(tracker-tasks|tracker-cancel|messenger-messages|ledger-entries|customers"
     "|payment-status|model-chat)", Entry(
        "A simulated third-party API: open to anyone by design, CSRF-exempt, and it never "
        "touches the product's runs, steps, audit records or approvals.",
        may=EVERYONE, readers=EVERYONE, body=_json_body, csrf=False, open=True,
        kwargs=lambda world, view, item: {"task_id": "TASK-0"} if "task_id" in view.route
        else {}, present=_sandbox_enabled)),
]


def entry_for(view: View) -> Entry | None:
    for pattern, entry in ENTRIES:
        if re.fullmatch(pattern, view.key):
            return entry
    return None


# --- the case list --------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """One state-changing view (with its item, for the expanded ones) under test."""

    view: View
    entry: Entry
    item: str | None = None

    @property
    def id(self) -> str:
        return self.view.key + (f"[{self.item}]" if self.item is not None else "")

    def path(self, world: World) -> str:
        if self.entry.url is not None:
            return self.entry.url(world, self.view, self.item)
        return reverse(self.view.key, kwargs=self.entry.kwargs(world, self.view, self.item))

    def expected(self, role: str, method: str) -> str:
        """'passes', 'refused', 'csrf' (refused by the CSRF check) or 'open'."""
        if self.entry.open:
            return "open"
        if method == GET:
            if "GET" not in self.view.methods:
                return "refused"
            return "passes" if role in self.entry.readers else "refused"
        if method == POST_BARE and self.entry.csrf:
            return "csrf"
        return "passes" if role in self.entry.may else "refused"

    def cases(self) -> list[tuple[str, str]]:
        """Every role x method, the refusals first: they are tried while the action can
        still succeed, before any request that goes through has changed the run."""
        every = [(role, method) for role in ROLES for method in METHODS]
        return sorted(every, key=lambda case: self.expected(*case) == "passes")

    def body(self, world: World, role: str) -> Body:
        return self.entry.body(world, role, self.item)


def targets() -> list[Target]:
    found = []
    for view in state_changing_views():
        entry = entry_for(view)
        if entry is None:
            continue  # test_every_view_that_can_change_state_is_in_the_matrix names it
        items = list(entry.expand()) if entry.expand is not None else [None]
        found.extend(Target(view, entry, item) for item in items)
    return found


def send(world: World, target: Target, path: str, role: str, method: str):
    client = world.clients[role]
    if method == GET:
        return client.get(path)
    data, content_type = target.body(world, role)
    headers = {}
    if method == POST_CSRF:
        headers["HTTP_X_CSRFTOKEN"] = world.csrf[role]
        if content_type == FORM:
            data = {**data, "csrfmiddlewaretoken": world.csrf[role]}
    if content_type == FORM:
        return client.post(path, data, **headers)
    return client.post(path, json.dumps(data), content_type=content_type, **headers)
