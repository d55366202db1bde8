"""The approver's pages: the inbox, a request with its approve / reject form, and the link
from the notification email.

Reading never changes anything (mail scanners follow links): only the POST to `decide`, with
its CSRF token, records a decision, through approvals.decisions.decide.
"""

import logging
import uuid

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from runs.machine.storable import text_problem, whole_number
from runs.reads.cursors import decode_keyset, encode_keyset

from . import decisions, selectors
from .application import APPLIED
from .forms import DecisionForm
from .models import ApprovalRequest
from .permissions import (
    can_decide,
    can_view,
    decide_refusal,
    is_requester,
    permissions_read_once,
)
from .problem_shown import problem_shown_to
from .sign_in import login_required
from .snapshots import snapshot_rows
from .throttle import link_failed, link_lockout
from .timeouts import clock
from .tokens import LinkCheck, approval_link_token
from .withdrawal import is_still_awaited, unawaited_reason

logger = logging.getLogger(__name__)

# Like PasswordResetConfirmView's INTERNAL_RESET_SESSION_TOKEN: link tokens live in the
# session, keyed by request id, once the link has been opened.
SESSION_TOKENS = "_approval_link_tokens"


@require_GET
@never_cache
def link(request, pk: int, token: str):
    """The link from the email. A valid token is moved into the session and the browser is
    sent to the token-less page (which asks to sign in first if needed); an expired, used
    or tampered link gets a page saying which, never an error. Tampered links count
    against the address like failed logins (approvals.throttle).

    A valid link is honoured even from an address that is locked out: the lock is there
    for a client trying link after link, and an approver behind the same address (one
    office, one proxy) must not lose their emailed link to it. Tokens are HMACs: a valid
    one cannot be reached by trying."""
    # Its token and its page need neither what is asked nor its params (a bulk job's are
    # megabytes at 100,000 runs).
    approval = ApprovalRequest.objects.defer("snapshot", "params").filter(pk=pk).first()
    check = approval_link_token.check_token(approval, token)
    if check is LinkCheck.INVALID:
        # Only a forged link counts and is locked out: a used or expired one carries our
        # signature, so it is nobody's guess, and its approver gets the page saying which.
        lockout = link_lockout(request)
        if lockout is not None:
            return lockout
        logger.warning("approval link for request %s refused: %s", pk,
                       "no such request" if approval is None else "invalid signature")
        if text_problem(token) is None:
            # Text no link ever had and the failed-login log cannot store (a NUL) is no
            # guess at one.
            link_failed(request)
    if check is LinkCheck.VALID:
        tokens = dict(request.session.get(SESSION_TOKENS, {}))
        tokens[str(pk)] = token
        request.session[SESSION_TOKENS] = tokens
        return redirect("approvals:detail", pk=pk)
    # A request that does not exist gets the answer of a forged link, counted above the
    # same way: told apart, they would let anyone try ids to learn which requests exist.
    # Its run may have finished and been archived since the email was sent (a workflow may
    # keep finished runs for no day at all), so the page names that case among the causes.
    status = 400 if check is LinkCheck.INVALID else 410
    return render(request, "approvals/link_error.html",
                  {"check": check.value,
                   "approval": approval if check is not LinkCheck.INVALID else None,
                   "timeout_outcome": selectors.timeout_outcome(approval)
                   if check is LinkCheck.USED else ""}, status=status)


def _refused(request, approval: ApprovalRequest) -> None:
    logger.warning("approval request %s: %s (id %s) refused at %s %s", approval.pk,
                   request.user.get_username(), request.user.pk, request.method, request.path)


def _not_found(pk: int):
    return Http404(f"No approval request {pk}.")


def _unseen(request, approval: ApprovalRequest):
    """A request the person may not see is answered as one that does not exist (the same
    404, the same page): told apart, anyone signed in could try ids to learn which exist,
    as a missing request's emailed link is answered as a forged one (link)."""
    _refused(request, approval)
    return _not_found(approval.pk)


def _forbidden(request, approval: ApprovalRequest):
    """For a person who sees the request and may not decide it (its requester, four
    eyes): they know it exists, and are told why."""
    _refused(request, approval)
    return render(request, "approvals/forbidden.html",
                  {"approval": approval, "is_requester": is_requester(request.user, approval),
                   "refusal": decide_refusal(request.user, approval)},
                  status=403)


def _page(request, approval: ApprovalRequest, form: DecisionForm | None = None, *,
          status: int = 200, runs_page: int | None = None):
    link_problem = None
    token = request.session.get(SESSION_TOKENS, {}).get(str(approval.pk))
    if token:
        check = approval_link_token.check_token(approval, token)
        if check is not LinkCheck.VALID:
            link_problem = check.value
    awaited = not approval.is_pending or is_still_awaited(approval)
    decidable = approval.is_pending and awaited and can_decide(request.user, approval)
    if decidable and form is None:
        form = DecisionForm(initial={"decision_id": uuid.uuid4()})
    bulk = selectors.bulk_runs_page(approval, runs_page)
    return render(request, "approvals/detail.html", {
        "approval": approval, "run": approval.run, "bulk": bulk,
        "rows": snapshot_rows(approval.snapshot if bulk is None else bulk.snapshot),
        "follows": selectors.what_follows(approval, awaited=awaited),
        "form": form if decidable else None, "can_decide": decidable,
        "is_requester": is_requester(request.user, approval),
        "overdue": selectors.is_overdue(approval), "link_problem": link_problem,
        # How long ago it was asked, by the clock that dated it (not this host's).
        "now": clock(),
        "awaited": awaited, "unawaited_reason": "" if awaited else unawaited_reason(approval),
        "timeout_outcome": selectors.timeout_outcome(approval, name_deputies=True),
        "problem": problem_shown_to(request.user, approval.problem),
        # Said whether or not the form is shown again: a request decided meanwhile has none.
        "refusal": form.refusal() if form is not None and form.is_bound else [],
    }, status=status)


def _approval_or_404(pk: int) -> ApprovalRequest:
    approval = ApprovalRequest.objects.select_related(
        "run", "superseded_by", "tool_call").filter(pk=pk).first()
    if approval is None:
        raise _not_found(pk)
    return approval


@login_required
@require_GET
def detail(request, pk: int):
    # A bulk job's request without the lists its page shows a page of (request_for_page).
    approval = selectors.request_for_page(pk)
    if approval is None:
        raise _not_found(pk)
    # May they see it, and may they decide it (the form): one reading of their grants.
    with permissions_read_once(request.user):
        if not can_view(request.user, approval):
            raise _unseen(request, approval)
        # A bulk job's runs, a page at a time: a number that is none starts at the first.
        return _page(request, approval,
                     runs_page=whole_number(request.GET.get("runs_page", "")))


def _decided_by_post_only(request, approval: ApprovalRequest):
    # require_POST would answer a bare 405; a person who reloads the address a decision
    # was posted to, or follows it, is shown the way to the request page instead.
    response = render(request, "approvals/decide_by_post.html", {"approval": approval},
                      status=405)
    response["Allow"] = "POST"
    return response


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def decide(request, pk: int):
    """Record the decision posted from the request page. Any other method records
    nothing and is answered with a 405 page pointing to that page."""
    with permissions_read_once(request.user):
        return _decide(request, pk)


def _decide(request, pk: int):
    # Whether they may see it, whether they may decide it, and decisions.decide's own two
    # checks, of one reading of their grants.
    approval = _approval_or_404(pk)
    if not can_view(request.user, approval):
        raise _unseen(request, approval)
    if request.method != "POST":
        return _decided_by_post_only(request, approval)
    if decide_refusal(request.user, approval) is not None:
        # Refused before the form is read, as decisions.decide and the API refuse: a
        # requester told what to fix in the form would take it that they may decide.
        return _forbidden(request, approval)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        form.renew_decision_id()
        return _page(request, approval, form, status=400)
    try:
        result = decisions.decide(
            approval.pk, user=request.user, approved=form.approved,
            comment=form.cleaned_data["comment"], decision_id=form.cleaned_data["decision_id"])
    except PermissionDenied:
        return _forbidden(request, approval)
    tokens = dict(request.session.get(SESSION_TOKENS, {}))
    if tokens.pop(str(pk), None) is not None:
        request.session[SESSION_TOKENS] = tokens
    # A reused decision id is an error, not news: the person's decision was not recorded.
    # One recorded and not applied to the run (not yet, or not at all) is no success: the
    # person is warned, with what happens next.
    level = {"recorded": messages.SUCCESS, "already_recorded": messages.INFO,
             decisions.DECISION_ID_REUSED: messages.ERROR}.get(result.outcome,
                                                               messages.WARNING)
    if result.recorded and result.application != APPLIED:
        level = messages.WARNING
    messages.add_message(request, level, result.message)
    target = result.new_request or result.request
    return redirect("approvals:detail", pk=target.pk)


# Requests on one page of the inbox.
INBOX_PAGE = 50


@login_required
@require_GET
def inbox(request):
    """What waits for me: requests I may decide, the earliest due (the overdue) first, a
    page at a time by the API's keyset cursor (`after`): a request decided while its page is
    read makes the next page skip none. A cursor that names no place in the inbox (edited
    by hand, a runs list's) starts over at the first page, as the runs list's does."""
    after = decode_keyset(request.GET.get("after", ""), times=2)
    rows, next_cursor = selectors.inbox_page(request.user, after=after, limit=INBOX_PAGE)
    return render(request, "approvals/inbox.html", {
        "page": rows, "next_cursor": encode_keyset(next_cursor) or "",
        "first_page": after is None,
        # How long ago each was asked; whether it is overdue is the database's to say
        # (selectors.inbox).
        "now": clock()})
