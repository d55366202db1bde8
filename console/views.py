"""The operator console's pages. Thin: parse, check the permission, call a selector or an
action, render a page or the partial htmx swaps."""

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import wraps
from urllib.parse import urlencode, urlsplit

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET
from django_htmx.http import HttpResponseClientRedirect

from approvals.bulk import bulk_offered, refuse_forbidden_in_bulk
from approvals.bulk_selected import act_on_selected
from approvals.operator_actions import (
    ActionForbidden,
    ActionInputError,
    NoSuchAction,
    NoSuchRun,
    StalePage,
    act,
    refuse_who_may_not_act,
)
from approvals.permissions import can_view, permissions_read_once
from approvals.problem_shown import may_see_addresses, problem_shown_to
from approvals.selectors import requests_for_run
from approvals.sign_in import to_sign_in
from archive import selectors as archived
from archive.models import ArchivedRun
from archive.reading import ArchiveUnreadable, read_archived_run
from audit.access import access_records
from audit.csv_export import access_csv_lines, audit_csv_lines
from audit.selectors import audit_listing, audit_page
from runs import store
from runs.definitions import definition
from runs.definitions.contracts import (
    contract_table,
    effect_verdict,
    step_contract,
    workflow_verdict,
)
from runs.machine import transitions
from runs.machine.endings import ended_waits
from runs.machine.errors import TransitionNotAllowed
from runs.machine.intentions import step_lines
from runs.machine.storable import whole_number
from runs.models import Run, Workflow
from runs.operator.actions import ACTIONS, ActionInput, offered
from runs.operator.guidance import recommend
from runs.operator.investigation import investigate, lookups_refusal, to_markdown
from runs.reads import selectors
from runs.reads.cursors import decode_keyset, encode_keyset, parse_stamp
from runs.reads.generations import generations
from runs.reads.step_rows import next_try_at

from . import run_list, saved_views
from .forms import AccessFilterForm, AuditFilterForm, RunFilterForm, selected_run_ids
from .live_versions import live_version
from .permissions import VIEW, grant_for, grants_of
from .run_rows import run_rows
from .runbooks import runbook_html, runbook_section
from .step_pages import step_page
from .step_times import step_times
from .timeline import PAGE as TIMELINE_PAGE
from .timeline import timeline_page

logger = logging.getLogger(__name__)


def login_required(view):
    """Django's login_required, with an answer htmx can use for a person whose session
    ended while a page was open (it expired, or they signed out in another tab).

    Django's decorator answers 302 to the sign-in page; the browser follows it inside the
    request htmx sent, and htmx swapped the whole sign-in page into the part it polls or
    posts to: every live part of the open page became a sign-in page inside the page, and
    an action sent from a dialog vanished with the run's page, unsaid. For htmx, a poll
    (GET) sends the browser to sign in, then back to the page it was on; a change (POST) is
    refused with a 401 whose page says nothing was changed (console.js shows it in the
    dialog, where the typed reason stays to be sent again). A form sent without htmx is
    answered with the sign-in page, saying nothing was changed, and then the page it was
    sent from. Each is sent as approvals.sign_in.to_sign_in sends the approver's pages: a
    link too long to carry whole leads back without its query."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        reading = request.method in ("GET", "HEAD")
        if not request.htmx:
            if reading:
                return to_sign_in(request.get_full_path())
            # Back to the page the form was on: the address it was sent to takes only POST,
            # and signing in led to a bare 405 there.
            messages.error(request, "You were signed out, so nothing was changed: send the "
                                    "form again.")
            return to_sign_in(_page_sent_from(request))
        # Back to the page the person was on, not to the part htmx asked for (a fragment,
        # or an address that takes only POST); only a page of this site.
        sign_in = to_sign_in(_page_on_screen(request)).url
        if reading:
            return HttpResponseClientRedirect(sign_in)
        return render(request, "console/signed_out.html", {"sign_in": sign_in}, status=401)

    return wrapper


def require_POST(view):  # noqa: N802 (named as Django's, which it stands in for)
    """Django's require_POST, whose 405 is a blank page, with a page saying that nothing was
    changed and where the form is: a person reaches these addresses by GET from history, a
    bookmark or a link kept from a sign-in."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method == "POST":
            return view(request, *args, **kwargs)
        run_id = kwargs.get("run_id")
        response = render(request, "console/post_only.html", {
            "run_url": reverse("console:run", args=[run_id]) if run_id else ""}, status=405)
        response["Allow"] = "POST"
        return response

    return wrapper


def _page_on_screen(request) -> str:
    """The page of this site htmx says it sent the request from (HX-Current-URL), "/" when
    it names none: another site's, or text that is no URL, which the header's reading
    refuses with a ValueError (an unclosed IPv6 host), a 500 when left to rise."""
    try:
        return request.htmx.current_url_abs_path or "/"
    except ValueError:
        return "/"


def _page_sent_from(request) -> str:
    """The page of this site a form was sent from (its Referer), "/" when none is."""
    referer = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(referer, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        return "/"
    parts = urlsplit(referer)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path or "/"


def _visible_ids(user):
    grant = grant_for(user, VIEW)
    if not grant.everywhere and not grant.workflow_ids:
        raise PermissionDenied("You may not view runs.")
    return None if grant.everywhere else grant.workflow_ids


# The actions the runs list offers for the runs a person ticks.
BULK_ACTIONS = ("resume", "reconcile", "terminate")


def _ticked_actions(grants) -> list:
    """Of BULK_ACTIONS, those the person of `grants` may take on some run
    (approvals.bulk.bulk_offered): with none, the list has no box to tick, nor its form."""
    return bulk_offered([ACTIONS[name] for name in BULK_ACTIONS], grants)


@require_GET
@login_required
def runs_list(request):
    workflow_ids = _visible_ids(request.user)
    if request.htmx and request.GET.get("rows"):
        # Live refresh of the rows on screen (htmx polling), not a new query of the list.
        ids = run_list.whole_numbers(request.GET["rows"].split(","))[:200]
        runs = selectors.runs_by_ids(ids, workflow_ids=workflow_ids)
        return render(request, "console/_run_rows.html", {
            "rows": run_rows(runs), "ids": ids, "live": _live(runs),
            "selected_actions": _ticked_actions(grants_of(request.user))})
    # By the clock that stamps runs' changes: by this host's, one running ahead would leave
    # out of the "N new" count every run that changed in the minutes it is ahead.
    drawn_at = store.current().now()
    form = RunFilterForm(request.GET or None)
    filters = form.list_filters()  # None: an invalid filter, refused rather than ignored
    if filters is not None and (
            problem := run_list.workflow_problem(filters.workflow, workflow_ids)):
        # The Workflow field's error, as the form's own are: marked invalid, said beside it.
        form.add_error("workflow", problem)
        filters = None
    problems = form.problems() if filters is None else []
    query = request.GET.copy()
    for name in ("after", "new_since", "shown"):
        query.pop(name, None)
    since = parse_stamp(request.GET.get("new_since", ""))
    if request.htmx and since is not None and filters is None:
        # Nothing to count: the bar comes back empty and without its trigger, so the poll
        # stops (200: htmx swaps no 4xx answer, and would go on polling).
        return render(request, "console/_new_runs.html", {"stopped": True})
    if request.htmx and since is not None:
        # The "N new" bar's poll: one count along the page's own index.
        shown = run_list.shown_ids(request.GET.get("shown", ""))
        count = selectors.new_runs_count(filters, workflow_ids=workflow_ids, since=since,
                                         shown=shown)
        return render(request, "console/_new_runs.html", {
            "new_count": count, "new_cap": selectors.NEW_CAP, "drawn_at": since.isoformat(),
            "poll_url": reverse("console:runs"), "query": query.urlencode(), "ids": shown})
    page = {"form": form, "query": query.urlencode(),
            "counts": selectors.status_counts(workflow_ids=workflow_ids),
            "count_cap": selectors.COUNT_CAP,
            "saved_views": saved_views.visible_to(request.user)}
    if filters is None:
        # No rows, archived rows, "N new" bar or next page: only the form and what is wrong.
        # 200, as for a filter that matches nothing: the page is what the GET asked for (a
        # failed "save view" also comes back to it).
        return render(request, "console/runs.html", {**page, "problems": problems})
    after = run_list.decode_cursor(request.GET.get("after", ""), filters.sort)
    rows, next_cursor = selectors.runs_page(filters, workflow_ids=workflow_ids, after=after)
    # A search also finds runs moved to the archive (by business key or run id): read only.
    archived_rows = (archived.archived_matching(filters.q, workflow_ids=workflow_ids)
                     if filters.q and after is None else [])
    grants = grants_of(request.user)
    return render(request, "console/runs.html", {
        **page, "archived": archived_rows,
        "rows": run_rows(rows), "ids": [r.pk for r in rows], "live": _live(rows),
        "next_cursor": run_list.encode_cursor(next_cursor), "first_page": after is None,
        # Only what the server could accept from this person somewhere (bulk_offered).
        "selected_actions": _ticked_actions(grants),
        "bulk_actions": bulk_offered(run_list.BULK_BY_FILTER, grants),
        "drawn_at": drawn_at.isoformat(), "poll_url": reverse("console:runs"),
        "sort_links": run_list.sort_links(query, filters.sort),
    })


def _live(rows) -> bool:
    # Keep polling while something on screen can still change by itself.
    return any(not selectors.is_final(r) for r in rows)


@require_GET
@login_required
def attention(request):
    workflow_ids = _visible_ids(request.user)
    since = parse_stamp(request.GET.get("new_since", ""))
    # The poll counts, and its "show" link opens, the list the page shows.
    drills = request.GET.get("drills") == "1"
    query = "drills=1" if drills else ""
    if request.htmx and since is not None:
        # The "N new" bar's poll: one count along the attention list's index.
        shown = run_list.shown_ids(request.GET.get("shown", ""))
        return render(request, "console/_new_runs.html", {
            "new_count": selectors.attention_new_count(workflow_ids=workflow_ids, since=since,
                                                       shown=shown, drills=drills),
            "new_cap": selectors.NEW_CAP, "drawn_at": since.isoformat(),
            "poll_url": reverse("console:attention"), "query": query, "ids": shown})
    drawn_at = store.current().now()
    # A hand-edited or stale link starts over at the first page.
    after = decode_keyset(request.GET.get("after", ""))
    page = selectors.attention_page(workflow_ids=workflow_ids, after=after,
                                    limit=selectors.ATTENTION_PAGE_SIZE, drills=drills)
    # Several actions share a permission: ask for each one once.
    grants = grants_of(request.user)
    steps = selectors.steps_of(page.runs)
    for run in page.runs:
        run.available_actions = [a for a in offered(run, steps.get(run.pk, []))
                                 if grants(a.permission).covers(run.workflow_id)]
    return render(request, "console/attention.html", {
        "runs": page.runs, "total": page.total, "more_than_cap": page.more_than_cap,
        "next_cursor": encode_keyset(page.next_cursor) or "",
        "first_page": after is None, "drills": drills,
        "drawn_at": drawn_at.isoformat(), "poll_url": reverse("console:attention"),
        "now": drawn_at,
        "query": query, "ids": [run.pk for run in page.runs],
    })


def _visible_run(request, run_id: int) -> Run:
    try:
        run = selectors.run_row(run_id)
    except Run.DoesNotExist:
        raise Http404(f"No run {run_id}.") from None
    if not grant_for(request.user, VIEW).covers(run.workflow_id):
        raise PermissionDenied("You may not view this run.")
    return run


def _load_visible_run(request, run_id: int):
    return selectors.run_detail(_visible_run(request, run_id))


def _beside_steps(request, run: Run, *, before: int | None = None) -> dict:
    """What the live part shows beside the steps, read without them: all its poll needs to
    tell whether anything changed (console.live_versions)."""
    approvals = requests_for_run(run)
    # Only its approvers and its requester open a request (approvals.permissions.can_view):
    # the others see its row without a link that would answer them 403.
    with permissions_read_once(request.user, approvals):
        for approval in approvals:
            approval.openable = can_view(request.user, approval)
            approval.problem_shown = problem_shown_to(request.user, approval.problem)
    # Figures that move with the clock (a step in flight, the last heartbeat's age) are told
    # by the database's, which stamped what they count from.
    return {"run": run, "approvals": approvals, "grants": grants_of(request.user),
            "timeline": timeline_page(run, before=before, approval_requests=approvals,
                                      addresses=may_see_addresses(request.user)),
            "timeline_page": TIMELINE_PAGE, "now": store.current().now(),
            "workflow": definition.registry.get(run.workflow_name, run.workflow_version),
            "live": not selectors.is_final(run)}


def _detail_context(request, detail, beside: dict, *, steps_asked: int | None = None) -> dict:
    run, workflow, grants, now = detail.run, beside["workflow"], beside["grants"], beside["now"]
    lines = step_lines(run, detail.steps)
    for step in detail.steps:
        step.will_do = lines[step.name]
    actions = [{"action": action, "steps": action.eligible_steps(run, detail.steps),
                "explanation": action.explain(run, detail.steps)}
               for action in offered(run, detail.steps)
               if grants(action.permission).covers(run.workflow_id)]
    recommendation = recommend(run, detail.steps)
    recommended = None
    if recommendation is not None and recommendation.action is not None:
        if recommendation.call_slug:
            # Aimed at one tool call: its own dialog sits with the call on the page.
            action = recommendation.action
            recommended = action if grants(action.permission).covers(run.workflow_id) \
                else None
        else:
            recommended = next((item["action"] for item in actions
                                if item["action"].name == recommendation.action.name), None)
    # A wait the run's end ended reads `waiting` still (kernel.end_waits): the row says so,
    # and the page does not name it as wanting a person.
    ended = ended_waits(run, detail.steps)
    # The table draws one page of the steps; the rules above read them all.
    page = step_page(detail.steps, asked=steps_asked, current=run.current_step,
                     focus=recommendation.step if recommendation is not None else "",
                     ended=frozenset(ended))
    times = step_times(run, detail.steps, now=now)
    for step in page.steps:
        step.wait_ended = ended.get(step.name, "")
        step.decided_unasked = transitions.rule_approval_words(step)
        spec = definition.step_of(workflow, step.name) if workflow is not None else None
        step.contract = step_contract(spec) if spec is not None else None
        # The stop verdict: the step waits for a person before each attempt.
        step.verdict = effect_verdict(workflow.step(step.name)) if spec is not None else None
        # Execution time, and apart from it the time the step waited (backoff, attention).
        step.took = times.get(step.name)
        step.next_try = next_try_at(run, step)
    return {**beside, "steps": detail.steps, "step_page": page, "actions": actions,
            "generations": generations(run),
            "recommendation": recommendation, "recommended": recommended}


@require_GET
@login_required
def run_detail(request, run_id: int):
    try:
        run = _visible_run(request, run_id)
    except Http404:
        # A link kept from before the run was archived (a ticket, a notification). A poll
        # of a page drawn before it was archived keeps what it shows.
        if not request.htmx and (archived_page := _archived_page(request, run_id)):
            return archived_page
        raise
    # ?before=SEQ: the timeline's page before that audit record (older entries).
    before = request.GET.get("before", "")
    before = whole_number(before, digits=9)
    if request.htmx and request.GET.get("part") == "timeline":
        return render(request, "console/_timeline_rows.html", {
            "run": run, "timeline": timeline_page(
                run, before=before, addresses=may_see_addresses(request.user)),
            "timeline_page": TIMELINE_PAGE})
    # The page's own choices (a page of the steps, an older page of the timeline, of an
    # agent's turns) stay in its poll, or the poll would put the first ones back.
    # ?steps=N: the page of the steps holding step N (a number not written in digits, or
    # past the last step, opens the page a person is there for, as no number does).
    poll = {"part": "live", "steps": whole_number(request.GET.get("steps", ""), digits=9),
            "before": before,
            "turns_from": whole_number(request.GET.get("turns_from", ""), digits=6)}
    poll = {k: v for k, v in poll.items() if v is not None}
    beside = _beside_steps(request, run, before=before)
    if request.htmx and request.GET.get("part") == "live" \
            and request.GET.get("shown") == _version(beside, poll):
        # Nothing it shows has changed, told without reading a step: htmx swaps no 204, so
        # what the person opened in the part (a recovery contract, a record's data, older
        # timeline entries) stays.
        return HttpResponse(status=204)
    detail = selectors.run_detail(run)
    context = _detail_context(request, detail, beside, steps_asked=poll.get("steps"))
    live = _live_part(request, context, poll=poll)
    if request.htmx and request.GET.get("part") == "live":
        return HttpResponse(live.html)
    card = investigate(detail.run, reader=request.user, steps=detail.steps,
                       records=detail.audit)
    # The card here lists the steps of the table's page; its own page lists them all.
    shown = {step.name for step in context["step_page"].steps}
    return render(request, "console/run_detail.html", {
        **context, "card": card, "live_part": live.html,
        "card_rows": [row for row in card.steps if row.step in shown]})


def _version(beside: dict, poll: dict) -> str:
    return live_version(run=beside["run"], approvals=beside["approvals"],
                        timeline=beside["timeline"], grants=beside["grants"],
                        now=beside["now"], registered=beside["workflow"] is not None,
                        poll=poll)


@dataclass(frozen=True)
class LivePart:
    html: SafeString
    version: str  # what it shows (console.live_versions), which its poll sends as `shown`


def _live_part(request, context: dict, *, poll: dict | None = None) -> LivePart:
    """The run's live part, with its version in the address its poll asks with."""
    poll = poll or {"part": "live"}
    version = _version(context, poll)
    query = urlencode({**poll, "shown": version})
    html = render_to_string("console/_run_live.html", {
        **context, "live_url": f"{reverse('console:run', args=[context['run'].pk])}?{query}"},
        request)
    # The template's own output, escaped there.
    return LivePart(html=mark_safe(html), version=version)  # noqa: S308


@require_GET
@login_required
def run_investigation(request, run_id: int):
    """The investigation card: a page, or Markdown to paste into a ticket. Lookups by key
    (reads, but they reach other systems) need the reconcile permission."""
    try:
        detail = _load_visible_run(request, run_id)
    except Http404:
        if archived_page := _archived_page(request, run_id):
            return archived_page
        raise
    run = detail.run
    lookups = request.GET.get("lookups") == "1"
    if lookups and (refusal := lookups_refusal(request.user, run)) is not None:
        raise PermissionDenied(refusal)
    card = investigate(run, reader=request.user, lookups=lookups)
    if request.GET.get("format") == "md":
        response = HttpResponse(to_markdown(card), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-investigation.md"'
        return response
    return render(request, "console/investigation.html", {"run": run, "card": card})


@require_POST
@login_required
def run_action(request, run_id: int, action: str):
    if action not in ACTIONS:
        # Before the form is read: its refusals are worded with the action's label.
        raise Http404(f"No action {action!r}.")
    # No number: a state no run is in, refused as a page drawn before a change is.
    seen = whole_number(request.POST.get("seen", ""))
    label = ACTIONS[action].label
    try:
        given = ActionInput.from_form(request.POST)
    except ActionInputError as exc:
        # Text no action can read is refused as act refuses any input: after the permission,
        # so that whoever may not act hears nothing of what they sent, nor whether the run
        # exists.
        try:
            refuse_who_may_not_act(action, run_id, user=request.user)
        except NoSuchRun as refused:
            if archived_page := _archived_page(request, run_id, action_label=label):
                return archived_page
            raise Http404(str(refused)) from None
        except ActionForbidden:
            raise PermissionDenied(f"You may not {label.lower()} this run.") from None
        return _action_refused(request, run_id, transitions.not_done(label, exc), exc.field)
    try:
        outcome = act(action, run_id, user=request.user, given=given,
                      seen=-1 if seen is None else seen)
    except NoSuchRun as exc:
        if archived_page := _archived_page(request, run_id, action_label=label):
            return archived_page
        raise Http404(str(exc)) from None
    except NoSuchAction as exc:
        raise Http404(str(exc)) from None
    except ActionForbidden:
        raise PermissionDenied(f"You may not {label.lower()} this run.") from None
    except StalePage as exc:
        messages.error(request, transitions.not_done(label, (
            str(exc) if seen is not None else
            "the form did not say which state of the run it was drawn for (its 'seen' "
            "field). Act from the run's page.")))
    except (ActionInputError, TransitionNotAllowed) as exc:
        # A field's text to correct (a reason of blanks, evidence missing) names its field.
        return _action_refused(request, run_id, transitions.not_done(label, exc),
                               getattr(exc, "field", ""))
    else:
        messages.success(request, outcome.message)
    return _after_action(request, run_id)


def _archived_page(request, run_id: int, *, action_label: str = ""):
    """Where an address of run `run_id` leads once archival has moved the run out of the hot
    tables (a link kept in a ticket or a notification, a page drawn before): its read-only
    archived page, for whoever may view it, as the API answers 410 naming the archive. For
    an action (`action_label`, its label), the page says the action was not done and why.
    None when the run was not archived or this person may not view it: to them it is still
    no run."""
    if (tombstone := archived.archived_run_viewable(request.user, run_id)) is None:
        return None
    if action_label:
        messages.error(request, transitions.not_done(
            action_label, f"{archived.gone_to_archive(tombstone)} since its page was drawn. It is "
                      "shown here read only; nothing was done."))
    target = reverse("console:archived_run", args=[run_id])
    # htmx swaps no answer of another page into the dialog: the browser goes there.
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


def _action_refused(request, run_id: int, said: str, field: str):
    """An action refused. Refused for one field's text, an action sent from its dialog
    through htmx is answered 422 naming the field (X-Refused-Field), not swapped: the dialog
    stays open with what was typed, and static/js/console.js marks the field invalid with
    this text as its error. Otherwise the messages say it, over the run as it is now."""
    if request.htmx and field:
        return HttpResponse(said, status=422, content_type="text/plain; charset=utf-8",
                            headers={"X-Refused-Field": field})
    messages.error(request, said)
    return _after_action(request, run_id)


def _after_action(request, run_id: int):
    """The run as it is now: its live part for htmx, else its page (the messages say what
    became of the action)."""
    if request.htmx:
        try:
            detail = _load_visible_run(request, run_id)
        except PermissionDenied:
            # An action's permission does not bring the view permission with it: the person
            # hears what became of their action, and a 403 here would read as a refusal of
            # an action that was done.
            return render(request, "console/_action_outcome.html")
        beside = _beside_steps(request, detail.run)
        return HttpResponse(_live_part(request, _detail_context(request, detail, beside)).html)
    return redirect(reverse("console:run", args=[run_id]))


@require_POST
@login_required
def bulk_action(request):
    action = request.POST.get("action", "")
    if action not in BULK_ACTIONS:
        raise Http404(f"No bulk action {action!r}.")
    spec = ACTIONS[action]
    # Before the form is read, as one run's action is: 403 (console.errors) with the
    # sentence, rather than each ticked run refused as no run they may act on.
    refuse_forbidden_in_bulk(spec, request.user)
    back = run_list.list_url(request.POST.get("query", ""))
    try:
        given = ActionInput.from_form(request.POST)
    except ActionInputError as exc:
        messages.error(request, transitions.not_done(spec.label, exc))
        return redirect(back)
    try:
        ids = selected_run_ids(request.POST.getlist("run"))
    except ValueError as exc:
        messages.error(request, transitions.not_done(spec.label, f"{exc}; nothing was done."))
        return redirect(back)
    # What each ticked row showed of its run (its audit sequence), as one run's form sends
    # "seen": a run that moved on since is refused, not acted on unseen. A row without it
    # is refused as a form without "seen" is.
    seen = {run_id: -1 if (n := whole_number(request.POST.get(f"seen-{run_id}", ""))) is None
            else n for run_id in ids}
    selected = act_on_selected(action, ids, user=request.user, given=given, seen=seen)
    _report_bulk(request, spec, selected)
    return redirect(back)


def _report_bulk(request, spec, selected) -> None:
    """The messages of a bulk action: the runs it was done for, those that wait for a
    second person (with their approval requests, as the run page says for one run), those
    refused, those archived since the list was drawn (to whoever may view them, as a run's
    page says it of one), and the ids of no run the person may act on. A run that does not
    exist and one the person may not act on are told alike: anything more would tell
    whoever may not see a run that it exists."""
    done, waiting, refused = selected.done, selected.waiting, selected.refused
    gone = archived.archived_runs_viewable(request.user, selected.unseen) \
        if selected.unseen else {}
    unseen = [run_id for run_id in selected.unseen if run_id not in gone]
    if done:
        messages.success(request, f"{spec.label} done for runs "
                                  f"{', '.join(str(o.run_id) for o in done)}.")
    if waiting:
        requests = ", ".join(f"{o.run_id} (approval request {o.approval.pk} "
                             f"{'created' if o.created else 'already waits'})"
                             for o in waiting)
        messages.info(request, f"A second person must approve {spec.label.lower()} for "
                               f"runs {requests}; nothing was done to them yet.")
    if refused:
        messages.error(request, f"{spec.label} refused for runs {'; '.join(refused)}.")
    for tombstone in (gone[run_id] for run_id in selected.unseen if run_id in gone):
        messages.error(request, f"{spec.label} not done: {archived.gone_to_archive(tombstone)} "
                                "since the list was drawn; nothing was done to it.")
    if unseen:
        messages.error(request, f"{spec.label} not done: no run you may act on has the "
                                f"id{'s' if len(unseen) > 1 else ''} "
                                f"{', '.join(map(str, unseen))}.")


@require_GET
@login_required
def audit_log(request):
    workflow_ids = _visible_ids(request.user)
    if request.GET.get("log") == "access":
        return _access_log(request, sees_all=workflow_ids is None)
    form = AuditFilterForm(request.GET or None)
    filters = form.list_filters()
    if filters is None:
        return _refused_filter(request, form)
    records, windowed = audit_listing(**filters, workflow_ids=workflow_ids)
    if request.GET.get("format") == "csv":
        return _audit_csv(records)
    page = audit_page(records, before=whole_number(request.GET.get("before", "")),
                      windowed=windowed)
    query = request.GET.copy()
    query.pop("before", None)
    return render(request, "console/audit.html", {
        "form": form, "records": page.records, "query": query.urlencode(),
        "next_before": page.next_before or "", "read_back_to": page.read_back_to,
        "scan_window": f"{page.window:,}" if page.window else "",
    })


def _access_log(request, *, sees_all: bool):
    """The access chain (who was given or lost what): for those who see every workflow's
    runs (auditors, superusers), as it concerns them all."""
    if not sees_all:
        raise PermissionDenied("The access log is for those who may view every workflow.")
    form = AccessFilterForm(request.GET)
    filters = form.list_filters()
    if filters is None:
        return _refused_filter(request, form, access=True)
    records = access_records(**filters)
    if request.GET.get("format") == "csv":
        return _audit_csv(records, lines=access_csv_lines, name="access")
    before = whole_number(request.GET.get("before", ""))
    if before is not None:
        records = records.filter(seq__lt=before)
    page = list(records[:100])
    query = request.GET.copy()
    query.pop("before", None)
    return render(request, "console/audit.html", {
        "form": form, "access": page, "query": query.urlencode(),
        "next_before": page[-1].seq if len(page) == 100 else "",
    })


def _refused_filter(request, form, *, access: bool = False):
    """The log's page with no record, the form to correct and what is wrong with it. 200
    for the page, as the runs list answers an invalid filter; 400 for an export, which is
    refused: a file of every record is not what was asked for."""
    return render(request, "console/audit.html", {
        "form": form, "problems": form.problems(), "access": [] if access else None},
        status=400 if request.GET.get("format") == "csv" else 200)


def _audit_csv(records, *, lines=audit_csv_lines, name="audit"):
    response = StreamingHttpResponse(lines(records), content_type="text/csv")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="{name}-{stamp}.csv"'
    return response


@require_GET
@login_required
def workflow_page(request, name: str):
    visible = _visible_ids(request.user)
    workflow = definition.registry.latest(name)
    if workflow is None:
        raise Http404(f"No workflow {name!r}.")
    # Its definition, contracts and owners are shown to those who may view its runs.
    if visible is not None and not Workflow.objects.filter(name=name, pk__in=visible).exists():
        raise PermissionDenied("You may not view this workflow.")
    return render(request, "console/workflow.html", {
        "workflow": workflow, "contracts": contract_table(workflow),
        "verdict": workflow_verdict(workflow)})


@require_GET
@login_required
def runbook(request, reason: str):
    # Operations' procedures are for the people who operate runs.
    _visible_ids(request.user)
    text = runbook_section(reason)
    if text is None:
        raise Http404(f"No runbook for {reason!r}.")
    title, _, body = text.partition("\n")
    return render(request, "console/runbook.html", {
        "title": title.lstrip("# "), "body": mark_safe(runbook_html(body))})  # noqa: S308


@require_GET
@login_required
def archived_run(request, run_id: int):
    """A run moved to the archive, read back from its archive file: no actions."""
    try:
        tombstone = archived.archived_run(run_id)
    except ArchivedRun.DoesNotExist:
        raise Http404(f"No archived run {run_id}.") from None
    if not grant_for(request.user, VIEW).covers(tombstone.workflow_id):
        raise PermissionDenied("You may not view this run.")
    try:
        detail, problem = read_archived_run(tombstone), ""
    except ArchiveUnreadable as exc:
        logger.error("archived run %s: %s", run_id, exc)
        detail, problem = None, str(exc)
    tool_calls = []
    if detail is not None:
        for step in detail.steps:
            # As the live page says it (the step's reference names only who approved).
            step["decided_unasked"] = transitions.rule_approval_words(step)
        names = {step.get("id"): step.get("name", "") for step in detail.steps}
        tool_calls = [{**call, "step_name": names.get(call.get("step_id") or call.get("step"),
                                                      "")}
                      for call in detail.tool_calls]
    return render(request, "console/archived_run.html", {
        "tombstone": tombstone, "detail": detail, "problem": problem,
        "tool_calls": tool_calls})


@require_GET
def home(request):
    """Where signing in lands (LOGIN_REDIRECT_URL): the runs for whoever may see runs, the
    approvals inbox for everyone else, never a page the person is refused."""
    if not request.user.is_authenticated:
        return redirect("login")
    grant = grant_for(request.user, VIEW)
    return redirect("console:runs" if grant.everywhere or grant.workflow_ids
                    else "approvals:inbox")

