"""Bulk by filter over the API: start a bulk job, follow its progress, cancel it.

The job is the console's (approvals.bulk): a durable background job that acts through the
one function every caller uses, once per run, one audit record per run, the runs that need
a second person gathered into one approval request. Over the API it acts as the token's
acting user, on one of the token's workflows, and only that person sees and cancels it;
the second person of the job's request follows it too (approvals.bulk.may_watch, the
console's rule), through a token that may see that request.
"""

from django.db import transaction
from django.urls import reverse
from ninja import Path, Status

from approvals.bulk import (
    BulkForbidden,
    BulkRefused,
    bulk_progress,
    cancel_bulk_job,
    is_second_person,
    may_follow,
    may_watch,
    refuse_bulk_request,
    start_bulk_job,
    started_as,
)
from approvals.models import BulkJob
from approvals.operator_actions import ActionInputError, InputNotRead, refuse_input_not_read
from runs.operator.actions import ActionInput
from runs.reads.selectors import RunFilters

from .bulk_schemas import BulkIn, BulkJobOut
from .errors import error_body, invalid_field, no_acting_user
from .operator_routes import not_read, visible_request
from .parser import refuse_unknown_query
from .schemas import MAX_RUN_ID, Error, InvalidRequest


def _job(request, job_id: int) -> dict:
    progress = bulk_progress(job_id)
    job = progress.job
    return {"id": job.pk, "action": job.action, "reason": job.reason, "status": job.status,
            "phase": job.phase, "total": job.total, "handled": progress.handled,
            "skipped": progress.skipped, "outcomes": progress.counts,
            "approval_request_id": job.approval_id, "created_at": job.created_at,
            "finished_at": job.finished_at,
            "status_url": request.build_absolute_uri(reverse("api:bulk_job",
                                                             args=[job.pk]))}



def _followed_job(token, job_id: int, *, read_only: bool = False) -> BulkJob | None:
    """The job, if the token may follow it (`read_only`: see its progress) or also cancel
    it. Its person by the rule every caller uses (approvals.bulk: may_follow, the person
    who started it or a superuser; may_watch, to see it, also its request's second
    person), within the token's reach: a job the token could have started, on one of its
    workflows named whole (a job over other workflows, over all of them, or over every
    workflow whose name holds a part, as the console's filter reads it, says how runs
    outside the token's reach went); for the second person, a job whose request the token
    may see and decide (visible_request: every run the job handled is of the token's
    workflows), which the decision's answer links."""
    job = BulkJob.objects.filter(pk=job_id).first()
    user = token.acting_user
    if job is None or user is None:
        return None
    filters = job.filters or {}
    if filters.get("workflow_exact") is True and filters.get("workflow") in (
            token.workflows or []) and (may_watch if read_only else may_follow)(user, job):
        return job
    if read_only and is_second_person(user, job) \
            and visible_request(token, job.approval_id) is not None:
        return job
    return None


def register(api, *, headers: dict) -> None:
    """Add the bulk-job operations to `api` (api.routes' NinjaAPI)."""

    @api.post(
        "/bulk", url_name="start_bulk_job", operation_id="start_bulk_job",
        summary="Start a bulk action on every run a filter matches",
        response={202: BulkJobOut, 200: BulkJobOut, 400: Error, 401: Error, 403: Error,
                  409: Error, 422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="One action of the operator table, with one reason, on every run of one "
                    "of the token's workflows that the filters match when the job starts, "
                    "as the token's acting user. 202: the job is recorded and runs in the "
                    "background (follow `status_url`). 200: a start sent again with its "
                    "`start_key`: the job it started (nothing new). 409 "
                    "(`start_key_reused`): that key started a job with another action, "
                    "reason, filters or step. Each run is checked as it is acted "
                    "on (permission, the transition's refusal); runs that need a second "
                    "person go into one approval request. 400: the workflow is not the "
                    "token's, the action cannot run in bulk, or the filters match no run, or "
                    "none the token's person may take the action on (`invalid_bulk_job`, "
                    "naming them: no job is made). 403: the token acts for "
                    "nobody (answered once the body has no fault), or its person may take "
                    "the action on no run. 422: the body "
                    "does not match its schema (an unknown status is never read as no "
                    "filter), has a `reason` no record may keep (blank, holding a "
                    "control or bidirectional character, or too long once the job's mark is "
                    "added: each run's record carries the reason followed by "
                    "` [bulk job N]`, so leave room for it, about 16 characters of the "
                    "2,000), or names a `step` for an action "
                    "not aimed at one, or one no version of the workflow declares; "
                    "`errors` names the field.")
    def start_bulk(request, payload: BulkIn):
        if (refused := refuse_unknown_query(request, ())) is not None:
            return refused
        token = request.auth
        mine = list(token.workflows or [])
        workflow = payload.filters.workflow.strip() or (mine[0] if len(mine) == 1 else "")
        if workflow not in mine:
            theirs = ", ".join(mine) or "none"
            # One named and not the token's is told so: asked to name one, it had.
            said = (f"filters.workflow {workflow!r} is not one of this token's workflows: "
                    f"{theirs}" if workflow else
                    f"name the workflow (filters.workflow), one of the token's: {theirs}")
            return Status(400, error_body("invalid_bulk_job", said))
        try:
            # Refused once here rather than run by run: each run's action would refuse it.
            refuse_input_not_read(payload.action, ActionInput(reason=payload.reason,
                                                              step=payload.step.strip()))
        except InputNotRead as exc:
            return Status(422, not_read(exc))
        except ActionInputError as exc:
            # The input's own rule (action_input.field_refused), as for one run's action.
            return Status(422, invalid_field(exc.field, str(exc)))
        f = payload.filters
        # The token names whole workflows: test-agent's job never reaches test-agent-saga.
        filters = RunFilters(workflow=workflow, workflow_exact=True, status=f.status,
                             step_status=f.step_status, error_class=f.error_class,
                             attention=f.attention, stuck=f.stuck, q=f.q)
        params = {"step": payload.step.strip()} if payload.step.strip() else {}
        try:
            if token.acting_user is None:
                # No person, no permission to keep from them: what is wrong with the body is
                # named first (as its schema's faults are), then the 403; a reason too long
                # once the job's mark is added among them, as the other doors order it.
                refuse_bulk_request(payload.action, filters, user=None, reason=payload.reason,
                                    params=params or None)
                return no_acting_user(token, "start a bulk job")
            with transaction.atomic():
                # Made now, or found by its start key (even one a concurrent request
                # committed a moment ago).
                job, created = start_bulk_job(payload.action, filters,
                                              user=token.acting_user, reason=payload.reason,
                                              params=params or None,
                                              start_key=payload.start_key)
        except BulkForbidden as exc:
            return Status(403, error_body("forbidden", str(exc)))
        except BulkRefused as exc:
            if exc.field:
                # Refused as a run action refuses its input: 422 naming the field.
                return Status(422, invalid_field(exc.field, f"{exc}; nothing was started"))
            return Status(400, error_body("invalid_bulk_job", str(exc)))
        if created:
            return Status(202, _job(request, job.pk))
        if not started_as(job, payload.action, filters, reason=payload.reason, params=params):
            return Status(409, error_body(
                "start_key_reused", f"start_key {payload.start_key!r} started bulk job "
                                    f"{job.pk} with another action, reason, filters or step; "
                                    "nothing was started (use a new key for a new job)"))
        return Status(200, _job(request, job.pk))

    @api.get(
        "/bulk/{job_id}", url_name="bulk_job", operation_id="get_bulk_job",
        summary="A bulk job's progress",
        response={200: BulkJobOut, 401: Error, 403: Error, 404: Error, 422: InvalidRequest,
                  429: Error},
        openapi_extra=headers,
        description="Its status, how many runs it matched and has handled, and how many "
                    "ended each way. 404: no such job that the token's person may follow: "
                    "their own (any, for a superuser) on one of the token's workflows, or "
                    "one whose approval request they decided or may decide, where the "
                    "token may see that request (every run the job handled is of the "
                    "token's workflows).")
    def get_bulk(request, job_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
        if (refused := refuse_unknown_query(request, ())) is not None:
            return refused
        token = request.auth
        if token.acting_user is None:
            return no_acting_user(token, "follow a bulk job")
        if _followed_job(token, job_id, read_only=True) is None:
            return Status(404, error_body("bulk_job_not_found", f"no bulk job {job_id} of "
                                                          "this token's person"))
        return Status(200, _job(request, job_id))

    @api.post(
        "/bulk/{job_id}/cancel", url_name="cancel_bulk_job", operation_id="cancel_bulk_job",
        summary="Cancel a bulk job",
        response={200: BulkJobOut, 401: Error, 403: Error, 404: Error, 409: Error,
                  422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="No further run is acted on; what was done stays done. 409: the job "
                    "had already finished.")
    def cancel_bulk(request, job_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
        if (refused := refuse_unknown_query(request, ())) is not None:
            return refused
        token = request.auth
        if token.acting_user is None:
            return no_acting_user(token, "cancel a bulk job")
        if _followed_job(token, job_id) is None:
            return Status(404, error_body("bulk_job_not_found", f"no bulk job {job_id} of "
                                                          "this token's person"))
        if not cancel_bulk_job(job_id, user=token.acting_user):
            return Status(409, error_body("finished", f"bulk job {job_id} had already finished"))
        return Status(200, _job(request, job_id))
