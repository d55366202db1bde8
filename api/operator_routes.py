"""The operator's surface over the API: list and search runs, take any action of the table,
read a run's history, and decide approval requests.

Actions and decisions are a person's: a token acts for the user an admin named on it
(ApiToken.acting_user), with that user's permissions, within the token's workflows, and
the audit trail names that user. Each action is the one function every caller uses
(approvals.operator_actions.act): the same permission rule, four-eyes rule and transitions
as the console and the CLI. A token without a person lists and reads, and is refused (403)
the rest.
"""

import uuid
from typing import Annotated, Literal

from django.core.exceptions import PermissionDenied
from django.urls import reverse
from ninja import Path, Query, Status

from approvals.decisions import (
    DecisionRefused,
    RequestUnseen,
    decide,
    decision_refusal,
    deny_who_may_not_decide,
)
from approvals.models import ApprovalRequest, RequestKind, RequestStatus
from approvals.operator_actions import (
    ActionForbidden,
    ActionInputError,
    InputNotRead,
    NoSuchRun,
    act,
    refuse_who_may_not_act,
)
from approvals.permissions import reaching_only
from approvals.selectors import inbox_page
from runs.machine.errors import (
    EvidenceRequired,
    NoSuchStep,
    ReasonRequired,
    TransitionNotAllowed,
)
from runs.machine.storable import whole_number
from runs.models import ErrorClass, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.reads.cursors import KEYSET_PATTERN, decode_keyset, encode_keyset, keyset_pattern
from runs.reads.filter_problems import SEARCH_MOST, run_filter_problems
from runs.reads.selectors import RunFilters, runs_page
from runs.reads.workers import workers_page

from . import selectors
from .archived import run_not_here
from .errors import error_body, invalid_field, no_acting_user
from .openapi import NO_NUL_PATTERN
from .parser import refuse_unknown_query
from .schemas import (
    MAX_RUN_ID,
    SEARCH_TEXT,
    ActionDone,
    ActionIn,
    ActionPending,
    ApprovalList,
    ArchivedGone,
    DecisionIn,
    DecisionOut,
    Error,
    HistoryPage,
    InvalidRequest,
    RunPage,
    WorkerList,
)

ActionName = Literal[tuple(ACTIONS)]
RunStatusName = Literal[("", *RunStatus.values)]
StepStatusName = Literal[("", *StepStatus.values)]
ErrorClassName = Literal[("", *ErrorClass.values)]
# The inbox's cursor: its request's due and asked times, then its id (approvals.selectors).
INBOX_CURSOR_PATTERN = keyset_pattern(2)


def not_read(exc: InputNotRead) -> dict:
    """The 422 body (InvalidRequest) naming the body fields the action would not read."""
    where = f"{exc.action} in mode {exc.mode}" if exc.mode else exc.action
    return {"error": "invalid_request", "detail": str(exc),
            "errors": [{"loc": [name], "msg": f"does not apply with {where}",
                        "type": "not_read"} for name in exc.fields]}


LIST_PARAMETERS = ("status", "workflow", "step_status", "error_class", "attention", "stuck",
                   "q", "after", "limit")


def _approval(request, approval: ApprovalRequest) -> dict:
    snapshot = approval.snapshot if isinstance(approval.snapshot, dict) else {}
    operator = approval.kind == RequestKind.OPERATOR_ACTION
    return {"id": approval.pk, "kind": approval.kind, "run_id": approval.run_id,
            # A bulk job's request acts on every run of the job, not on run_id alone.
            "bulk_job": approval.params.get("bulk_job") if approval.is_bulk else None,
            "run_count": approval.bulk_run_count or 1,
            "action": approval.action, "step": approval.target_step, "status": approval.status,
            "requested_by": snapshot.get("requested_by") if operator else None,
            "requested_at": approval.requested_at, "due_at": approval.due_at,
            "reason": snapshot.get("reason", "") if operator else "",
            "decide_url": request.build_absolute_uri(
                reverse("approvals:detail", args=[approval.pk]))}


def _applying_job_url(request, approval: ApprovalRequest) -> str | None:
    # The approval of a bulk job's request is applied by the job's worker, after the answer.
    if not approval.is_bulk or approval.status != RequestStatus.APPROVED \
            or approval.settled_at is None or approval.apply_error:
        return None
    return request.build_absolute_uri(reverse("api:bulk_job",
                                              args=[approval.params["bulk_job"]]))


def refuse_who_may_not_take(request) -> Status | None:
    """run_action's refusals that come before its input is looked at, in its order: no such
    run among the token's workflows (404), a person without the action's permission (403);
    None if none applies, or if the path names no run and action (then the path itself is
    what is wrong)."""
    kwargs = request.resolver_match.kwargs
    action, run_id = kwargs.get("action", ""), whole_number(kwargs.get("run_id", ""))
    if action not in ACTIONS or run_id is None or not 1 <= run_id <= MAX_RUN_ID:
        return None
    token = request.auth
    if selectors.visible_run(run_id, workflows=token.workflows or []) is None:
        return run_not_here(request, token, run_id)
    if token.acting_user is None:
        # No person, no permission to keep from them; the body's faults are named (422)
        # as for a pause (tests/api/test_dispatch_pause_refuses_nul.py), then the 403.
        return None
    try:
        refuse_who_may_not_act(action, run_id, user=token.acting_user)
    except NoSuchRun:
        return Status(404, error_body("run_not_found", f"no run {run_id} for this token"))
    except ActionForbidden as exc:
        return Status(403, error_body("forbidden", str(exc)))
    return None


def visible_request(token, request_id: int) -> ApprovalRequest | None:
    """The approval request `request_id` if every workflow it reaches is one of the
    token's (a bulk job's reaches those of all the job's runs, not only the run it hangs
    on)."""
    return ApprovalRequest.objects.filter(
        reaching_only(workflow_names=token.workflows or []), pk=request_id).first()


def request_not_found(request_id: int) -> Status:
    """The one answer for a request that does not exist, one that reaches beyond the
    token's workflows, and one the token's person may not see (RequestUnseen, the console
    page's rule): told apart, they would let anyone holding a token try ids to learn which
    requests exist. It echoes only the id asked for."""
    return Status(404, error_body("request_not_found",
                                  f"no approval request {request_id} for this token"))


def nobody_decides(token) -> Status:
    """The one answer to a token that acts for nobody, whatever request it names (one of its
    workflows', another workflow's, none), its body not looked at: no decision can be made
    through it, whatever it sends. It lists no request either (approval_requests): a 404 for
    some ids and a 422 or 403 for others let it try ids to learn which requests exist within
    its workflows."""
    return no_acting_user(token, "decide approval requests")


def refusal_to_decide(request_id: int, exc: PermissionDenied) -> Status:
    """decide's refusal of the token's person (deny_who_may_not_decide): as for no such
    request if they may not see it; 403 saying why if they see it and may not decide it
    (its requester, four eyes), who knows it exists."""
    if isinstance(exc, RequestUnseen):
        return request_not_found(request_id)
    return Status(403, error_body("forbidden", str(exc)))


def refuse_who_may_not_decide(request) -> Status | None:
    """decide_approval's refusals that come before its body is looked at: a token that acts
    for nobody (403, nobody_decides), no such request among the token's workflows, or one
    its person may not see (404), a person who sees it and may not decide it (403), by the
    check decide makes (one rule, one reading of their grants: the body is not read, so
    decide is not called)."""
    request_id = whole_number(request.resolver_match.kwargs.get("request_id", ""))
    if request_id is None or not 1 <= request_id <= MAX_RUN_ID:
        return None
    token = request.auth
    if token.acting_user is None:
        return nobody_decides(token)
    approval = visible_request(token, request_id)
    if approval is None:
        return request_not_found(request_id)
    try:
        deny_who_may_not_decide(token.acting_user, approval)
    except PermissionDenied as exc:
        return refusal_to_decide(request_id, exc)
    return None


def register(api, *, headers: dict, refusals: dict, query_words: dict) -> None:
    """Add the operator's operations to `api` (api.routes' NinjaAPI), to `refusals`
    those refused before their input is read, and to `query_words` those whose query
    parameters a rule every door shares words."""
    refusals["run_action"] = refuse_who_may_not_take
    refusals["decide_approval"] = refuse_who_may_not_decide
    # The runs list's status and search, refused in the console's and list_runs' words.
    query_words["list_runs"] = lambda query: run_filter_problems(
        status=query.get("status") or "", q=query.get("q") or "")

    @api.get(
        "/runs", url_name="list_runs", operation_id="list_runs", summary="List and search runs",
        response={200: RunPage, 400: Error, 401: Error, 422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="The console's runs list: the same filters and search (business key, "
                    "idempotency key or remote reference), newest status change first, a "
                    "page at a time (keyset: pass `next_cursor` as `after`; an `after` "
                    "of another shape is refused with 422, never answered with the first "
                    "page). Only runs of the token's workflows. `workflow` is a part of a "
                    "name: one that is part of none of the token's workflows' names is "
                    "refused with 400 (`unknown_workflow`, naming the token's workflows), "
                    "never answered with an empty page.")
    def list_runs(request, status: RunStatusName = "",
                  workflow: str = Query("", max_length=200, pattern=NO_NUL_PATTERN),
                  step_status: StepStatusName = "", error_class: ErrorClassName = "",
                  attention: bool = False, stuck: bool = False,
                  # A NUL (no text holds one) is refused: dropped, it would leave an empty
                  # filter, and the list of every run would answer a search for it. So is
                  # any control character, in filter_problems' words (query_words).
                  q: Annotated[str, SEARCH_TEXT] = Query(
                      "", max_length=SEARCH_MOST, description=SEARCH_TEXT.description),
                  after: str = Query("", pattern=f"^$|{KEYSET_PATTERN}"),
                  limit: int = Query(50, ge=1, le=selectors.MOST_A_PAGE)):
        if (refused := refuse_unknown_query(request, LIST_PARAMETERS)) is not None:
            return refused
        # `after` is refused unless it has a cursor's shape (KEYSET_PATTERN, in the document):
        # a client paging on with anything else would be handed the first page, and loop.
        cursor = decode_keyset(after) if after else None
        token = request.auth
        if (problem := selectors.workflow_filter_problem(workflow, token.workflows or [])):
            return Status(400, error_body("unknown_workflow", problem))
        filters = RunFilters(status=status, workflow=workflow, step_status=step_status,
                             error_class=error_class, attention=attention, stuck=stuck, q=q)
        rows, next_cursor = runs_page(
            filters, workflow_ids=selectors.token_workflow_ids(token.workflows or []),
            after=cursor, limit=limit)
        return Status(200, {"runs": [{
            **selectors.summary_of(run),
            "status_url": request.build_absolute_uri(reverse("api:run_state", args=[run.pk])),
        } for run in rows], "next_cursor": encode_keyset(next_cursor)})

    @api.post(
        "/runs/{run_id}/actions/{action}", url_name="run_action", operation_id="run_action",
        summary="Take an operator action on a run",
        response={200: ActionDone, 202: ActionPending, 400: Error, 401: Error, 403: Error,
                  404: Error, 409: Error, 410: ArchivedGone, 422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="Any action of the operator table (the run's `operator_actions` say "
                    "which it offers now, and whether the token's person may take each), as "
                    "the token's acting user, with a reason. 200: "
                    "done. 202: a second person must approve it (four eyes): the approval "
                    "request is returned and nothing is done until another person decides "
                    "it. 409: the run's state refuses it (the refusal in `detail`). 400: "
                    "input the action needs is missing (a step, a tool call, the remote "
                    "reference of an effect reconcile records as found), or the action "
                    "refuses what it was given (`detail` says which). 422, "
                    "with `errors` naming the field: the body does not match its schema; "
                    "a NUL in any field, or a control character in `step`, `call` or "
                    "`remote_ref` (which name one thing on one line); a `remote_ref` "
                    "longer than a record keeps (300 characters), in the console's words; "
                    "a `reason` no record may keep (blank, or holding a control or "
                    "bidirectional character); `evidence` missing where reconcile records "
                    "an outcome by hand, or none may keep (longer than 2,000 characters, "
                    "holding a control character); an event payload in `evidence` that "
                    "event_received refuses (not JSON, larger than RUNS_INPUT_MAX_BYTES, "
                    "nested too deep, or failing the step's schema); "
                    "a `step` the run does not have (one longer than a step's name, 200 "
                    "characters, too, in the console's words); a `call` not written "
                    "'turn.index' "
                    "(a well-formed one the run does not have is a 409), or given without "
                    "its `step` (named: before the run's state); or a field "
                    "the action does not read (e.g. `evidence` with reconcile in mode "
                    "`ask`). 403: the token acts for nobody, or its person lacks the "
                    "permission (asked before the reason and the step are). "
                    "404: no such run among the token's workflows; 410: the run finished and "
                    "was archived (`run_archived`, with its archive file). Nothing is written "
                    "on a refusal.")
    def run_action(request, action: ActionName, payload: ActionIn,
                   run_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
        if (refused := refuse_unknown_query(request, ())) is not None:
            return refused
        token = request.auth
        if selectors.visible_run(run_id, workflows=token.workflows or []) is None:
            return run_not_here(request, token, run_id)
        try:
            # The input's own rule (action_input.field_refused), in the words of every door;
            # named before saying the token acts for nobody, as the schema's faults are.
            given = ActionInput(reason=payload.reason, step=payload.step, call=payload.call,
                                mode=payload.mode, remote_ref=payload.remote_ref,
                                evidence=payload.evidence)
        except ActionInputError as exc:
            # As a fault the schema finds: after who may not act (refuse_who_may_not_take).
            return refuse_who_may_not_take(request) or Status(
                422, invalid_field(exc.field, str(exc)))
        if token.acting_user is None:
            return no_acting_user(token, "act or decide")
        try:
            outcome = act(action, run_id, user=token.acting_user, given=given)
        except ActionForbidden as exc:
            return Status(403, error_body("forbidden", str(exc)))
        except NoSuchRun as exc:
            return Status(404, error_body("run_not_found", str(exc)))
        except InputNotRead as exc:
            return Status(422, not_read(exc))
        except (ReasonRequired, EvidenceRequired) as exc:
            # A reason was given (the schema requires one) that no record may keep, evidence
            # missing where it settles an outcome: bad input in the one field the refusal
            # names (exc.field, as the console marks it), answered as the schema answers one.
            return Status(422, invalid_field(exc.field, str(exc)))
        except ActionInputError as exc:
            # A field's value the action refused (Deliver event's payload, its limit the
            # event door's) is named as the schema names one; what is missing is not a field's.
            if exc.field:
                return Status(422, invalid_field(exc.field, str(exc)))
            return Status(400, error_body("invalid_action_input", str(exc)))
        except NoSuchStep as exc:
            # Input to correct, where the other refusals of a transition are the run's state.
            return Status(422, invalid_field("step", f"{exc}; nothing was done",
                                             "unknown_step"))
        except TransitionNotAllowed as exc:
            return Status(409, error_body("refused", str(exc)))
        if not outcome.done:
            return Status(202, {"action": action, "run_id": run_id,
                                "message": outcome.message,
                                "approval_request": _approval(request, outcome.approval)})
        return Status(200, {"action": action, "run_id": run_id, "message": outcome.message,
                            "state": selectors.state_of(outcome.run.status),
                            "status_url": request.build_absolute_uri(
                                reverse("api:run_state", args=[run_id]))})

    @api.get(
        "/runs/{run_id}/history", url_name="run_history", operation_id="get_run_history",
        summary="A run's history",
        response={200: HistoryPage, 401: Error, 404: Error, 410: ArchivedGone,
                  422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="The run's audit trail as JSON, a page at a time: each record with its "
                    "actor, reason, the state before and after, and its data (credentials "
                    "masked as recorded; a sensitive value the record keeps sealed shown as "
                    "\"[redacted]\"). Newest page first; pass `older` as `before` for the "
                    "page before. 410: the run finished and was archived (error "
                    "`run_archived`, with its archive file).")
    def run_history(request, run_id: int = Path(..., ge=1, le=MAX_RUN_ID),
                    before: int | None = Query(None, ge=1, le=MAX_RUN_ID),
                    limit: int = Query(selectors.HISTORY_PAGE, ge=1, le=selectors.MOST_A_PAGE)):
        if (refused := refuse_unknown_query(request, ("before", "limit"))) is not None:
            return refused
        token = request.auth
        run = selectors.visible_run(run_id, workflows=token.workflows or [])
        if run is None:
            return run_not_here(request, token, run_id)
        page = selectors.history_page(run, before=before, size=limit)
        return Status(200, {"run_id": run.pk, "older": page.older,
                            "entries": [selectors.history_entry(r) for r in page.records]})

    @api.get(
        "/workers", url_name="workers", operation_id="list_workers",
        summary="Workers and the runs they hold",
        response={200: WorkerList, 401: Error, 422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="The console's workers page: each worker process seen lately (host, "
                    "process, queues, last heartbeat, since when), those silent past a lease "
                    "marked, and the runs of the token's workflows each holds now.")
    def list_workers(request):
        if (refused := refuse_unknown_query(request, ())) is not None:
            return refused
        page = workers_page(workflow_ids=selectors.token_workflow_ids(
            request.auth.workflows or []))
        return Status(200, {"lease_seconds": page.lease_seconds, "workers": [{
            "name": w.name, "host": w.host, "pid": w.pid, "queues": w.queues,
            "started_at": w.started_at, "heartbeat_at": w.heartbeat_at,
            "stopped_at": w.stopped_at, "silent": w.silent, "registered": w.registered,
            "held_runs": w.held, "held_count": w.held_count, "expired_leases": w.expired,
        } for w in page.workers]})

    @api.get(
        "/approvals", url_name="approval_requests", operation_id="list_approval_requests",
        summary="Approval requests the token's person may decide",
        response={200: ApprovalList, 401: Error, 403: Error, 422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="Pending requests that reach only the token's workflows (a bulk "
                    "job's request reaches the workflow of each of the job's runs) and "
                    "that its acting user may "
                    "decide (never one they asked for), the earliest due first (then the "
                    "earliest asked, then the lowest id), a page at a time (keyset: pass "
                    "`next_cursor` as `after`; it is null on the last page; an `after` of "
                    "another shape, a runs list's cursor included, is refused with 422, "
                    "never answered with the first page). A request decided between two "
                    "pages makes the next page skip no other.")
    def approval_requests(request,
                          after: str = Query("", pattern=f"^$|{INBOX_CURSOR_PATTERN}"),
                          limit: int = Query(selectors.MOST_A_PAGE, ge=1,
                                             le=selectors.MOST_A_PAGE)):
        if (refused := refuse_unknown_query(request, ("after", "limit"))) is not None:
            return refused
        token = request.auth
        if token.acting_user is None:
            return no_acting_user(token, "act or decide")
        # `after` is refused unless it has the inbox cursor's shape (in the document): a
        # client paging on with anything else would be handed the first page, and loop.
        rows, next_cursor = inbox_page(
            token.acting_user, workflows=token.workflows or [],
            after=decode_keyset(after, times=2) if after else None, limit=limit)
        return Status(200, {"requests": [_approval(request, a) for a in rows],
                            "next_cursor": encode_keyset(next_cursor)})

    @api.post(
        "/approvals/{request_id}/decision", url_name="decide_approval",
        operation_id="decide_approval_request", summary="Approve or reject a request",
        response={200: DecisionOut, 400: Error, 401: Error, 403: Error, 404: Error, 409: Error,
                  422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="The token's acting user decides, as themselves (four eyes: never a "
                    "request they asked for). 200: recorded (or this decision_id was "
                    "already recorded: nothing changed); `application` says whether the run "
                    "has it yet. 409: decided by someone else, "
                    "closed, or superseded because its payload changed, or the decision_id "
                    "was used for another request or the opposite decision "
                    "(`decision_id_reused`; `error` and `detail` say which). 403: the "
                    "token acts for nobody (`no_acting_user`, alike for any request id, its "
                    "body not looked at), or its person sees "
                    "the request and may not decide it: they asked for it (four eyes; "
                    "`detail` says why). 404 "
                    "(`request_not_found`): no such request that reaches only the token's "
                    "workflows (a bulk job's request reaches the workflow of each of the "
                    "job's runs) and that its person may see (its approvers and the one who "
                    "asked for it): one they may not see is answered as one that does not "
                    "exist, in the same words, whatever the body. "
                    "400: a body that is not JSON, or names a key twice in one object. 422: the "
                    "body does not match its schema, "
                    "rejects without a `comment` (a rejection says why), or has a `comment` "
                    "no record may keep (a NUL, another control character, too long), in "
                    "the words the console and the command line use; nothing is recorded.")
    def decide_approval(request, payload: DecisionIn,
                        request_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
        if (refused := refuse_unknown_query(request, ())) is not None:
            return refused
        token = request.auth
        if token.acting_user is None:
            return nobody_decides(token)
        approval = visible_request(token, request_id)
        if approval is None:
            return request_not_found(request_id)
        if (refusal := decision_refusal(approved=payload.approve,
                                        comment=payload.comment)) is not None:
            # The body's own fault: after who may not decide (refuse_who_may_not_decide),
            # as a fault the schema finds.
            return refuse_who_may_not_decide(request) or Status(422, invalid_field(
                "comment", refusal, "value_error" if payload.comment.strip() else "missing"))
        try:
            decision = decide(approval.pk, user=token.acting_user, approved=payload.approve,
                              decision_id=uuid.UUID(payload.decision_id),
                              comment=payload.comment)
        except PermissionDenied as exc:
            return refusal_to_decide(request_id, exc)
        except DecisionRefused as exc:
            return Status(422, {"error": "invalid_request", "detail": str(exc),
                                "errors": [{"loc": [exc.field], "msg": str(exc),
                                            "type": "missing"}]})
        if decision.outcome in ("recorded", "already_recorded"):
            return Status(200, {"outcome": decision.outcome, "message": decision.message,
                                "application": decision.application,
                                "approval_request": _approval(request, decision.request),
                                "bulk_job_url": _applying_job_url(request, decision.request)})
        return Status(409, error_body(decision.outcome, decision.message))
