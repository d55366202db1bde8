"""The integration API's pause switch: read, pause and resume a workflow's dispatch (all
its steps, or those reaching one remote system), as the console and the CLI do.

Pausing and resuming are actions like a run's (api.operator_routes): a token does them for
the person an admin named on it (ApiToken.acting_user), with that person's permission
(approvals.operator_actions.act_on_workflow, the check the console and the CLI pass too),
within the token's workflows, and the control record names that person. Refusals answer as
a run action's do: 403 `no_acting_user` (once the body is found sound: a token acting for
nobody has its body's faults named first), 403 `forbidden`; nothing is changed."""

from datetime import datetime

from ninja import Path, Schema, Status
from pydantic import ConfigDict, Field

from approvals.operator_actions import (
    ActionForbidden,
    NoSuchWorkflow,
    act_on_workflow,
    refuse_dispatch_input,
    refuse_workflow_action,
)
from runs.definitions import name_in_path  # noqa: F401  (registers the converter <name:...>)
from runs.machine import dispatch

from .errors import error_body, invalid_field, no_acting_user
from .openapi import NO_NUL_PATTERN
from .parser import refuse_unknown_query
from .routes import REFUSALS_BEFORE_INPUT, api
from .schemas import NO_NUL, Error, InvalidRequest

# The name as the console writes it in a path (runs.definitions.name_in_path): a name may
# hold a "/", which no segment could carry as it is.
_NAME_IN_PATH = Path(..., max_length=200, description=(
    'The workflow\'s name, written as in the console\'s links: "/" as "~2F", "~" as "~7E", '
    'and a name "." or ".." with each dot as "~2E" (e.g. billing/eu: billing~2Feu).'))

_HEADERS = {"responses": {429: {"headers": {"Retry-After": {
    "description": "Seconds until the token's rate-limit window resets.",
    "schema": {"type": "integer"}}}}}}


class PauseIn(Schema):
    # A misspelt field (`sytem`) would otherwise pause the whole workflow, not one system.
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000, pattern=NO_NUL,
                        description="Why; recorded.")
    system: str = Field("", max_length=200, pattern=NO_NUL_PATTERN,
                        description="Only the steps reaching this remote system; empty: "
                                    "the whole workflow.")


class PauseOut(Schema):
    system: str
    reason: str
    paused_by: str
    paused_at: datetime


class DispatchState(Schema):
    workflow: str
    paused: bool = Field(description="The whole workflow is paused.")
    pauses: list[PauseOut]


def _state(workflow: str) -> dict:
    dispatch.forget_cache()
    pauses = dispatch.current_pauses().get(workflow, [])
    return {"workflow": workflow, "paused": any(not p.system for p in pauses),
            "pauses": [{"system": p.system, "reason": p.reason, "paused_by": p.paused_by,
                        "paused_at": p.paused_at} for p in pauses]}


def _refusal(token, workflow: str):
    # A pause a release left behind, of a workflow it removed, is still read and lifted, as
    # from the console and the CLI; which action it allows is refuse_workflow_action's.
    if not token.may_use(workflow) or not dispatch.has_dispatch(workflow):
        return _unknown(workflow)
    return None


def _unknown(workflow: str):
    return Status(404, error_body("unknown_workflow", f"no workflow {workflow!r} for this token"))


@api.get("/workflows/{name:workflow}/dispatch", url_name="dispatch_state",
         operation_id="get_dispatch", summary="Whether a workflow's dispatch is paused",
         response={200: DispatchState, 401: Error, 404: Error, 422: InvalidRequest,
                   429: Error}, openapi_extra=_HEADERS,
         description="The workflow's pauses: of the whole workflow, and of each remote "
                     "system; also of a workflow a release removed, while a pause of it is "
                     "in force. 404: no such workflow for this token. 422: a query "
                     "parameter (it takes none; `errors` names it).")
def dispatch_state(request, workflow: str = _NAME_IN_PATH):
    # As the runs list: a parameter the operation does not take is refused, never ignored.
    if (refused := refuse_unknown_query(request, ())) is not None:
        return refused
    refused = _refusal(request.auth, workflow)
    return refused or Status(200, _state(workflow))


def _change(request, workflow: str, payload: PauseIn, *, pause: bool):
    if (refused := refuse_unknown_query(request, ())) is not None:
        return refused
    token = request.auth
    refused = _refusal(token, workflow)
    if refused:
        return refused
    action = "pause_dispatch" if pause else "resume_dispatch"
    try:
        if token.acting_user is None:
            # No person, no permission to keep from them: what is wrong with the body is
            # named first (as its schema's faults are: _refused_before_input), then the 403.
            refuse_dispatch_input(action, workflow, system=payload.system,
                                  reason=payload.reason)
            return no_acting_user(token, "pause or resume dispatch")
        act_on_workflow(action, workflow, system=payload.system, reason=payload.reason,
                        user=token.acting_user)
    except ActionForbidden as exc:
        return Status(403, error_body("forbidden", str(exc)))
    except NoSuchWorkflow:
        return _unknown(workflow)
    except dispatch.DispatchConflict as exc:
        return Status(409, error_body("already_paused" if pause else "not_paused", str(exc)))
    except dispatch.DispatchError as exc:
        return Status(422, invalid_field(exc.field or "body", str(exc)))
    return Status(200, _state(workflow))


def _refused_before_input(request):
    """A pause's or a resume's refusals before its body is read, in _change's order: who
    may not pause the workflow hears nothing of what they sent."""
    token, match = request.auth, request.resolver_match
    workflow = match.kwargs.get("workflow", "")
    refused = _refusal(token, workflow)
    if refused:
        return refused
    if token.acting_user is None:
        # No person, no permission to keep from them: the body's faults are named first.
        return None
    try:
        refuse_workflow_action(match.url_name, workflow, user=token.acting_user)
    except ActionForbidden as exc:
        return Status(403, error_body("forbidden", str(exc)))
    except NoSuchWorkflow:
        # Only a workflow a release removed, with a pause left behind, comes here
        # (_refusal): whether a resume lifts it depends on the `system` the body names, so
        # act_on_workflow decides once the body is read.
        pass
    return None


REFUSALS_BEFORE_INPUT["pause_dispatch"] = _refused_before_input
REFUSALS_BEFORE_INPUT["resume_dispatch"] = _refused_before_input

_RESPONSES = {200: DispatchState, 400: Error, 401: Error, 403: Error, 404: Error, 409: Error,
              422: InvalidRequest, 429: Error}


@api.post("/workflows/{name:workflow}/dispatch/pause", url_name="pause_dispatch",
          operation_id="pause_dispatch", summary="Pause a workflow's dispatch",
          response=_RESPONSES, openapi_extra=_HEADERS,
          description="Starts are still accepted and kept queued; steps in flight finish; no "
                      "new step starts; retries and timers hold. 409 if already paused. 403: "
                      "the token acts for nobody (answered once the body has no fault), or "
                      "its person may not pause the workflow (answered before the body is "
                      "looked at). "
                      "422, with `errors` naming the field: a field the body does not take, "
                      "a `reason` no record may keep (blank, or holding a control or "
                      "bidirectional character), or a `system` no step of the workflow "
                      "reaches. Nothing is paused on a refusal.")
def pause(request, payload: PauseIn, workflow: str = _NAME_IN_PATH):
    return _change(request, workflow, payload, pause=True)


@api.post("/workflows/{name:workflow}/dispatch/resume", url_name="resume_dispatch",
          operation_id="resume_dispatch", summary="Resume a workflow's dispatch",
          response=_RESPONSES, openapi_extra=_HEADERS,
          description="Lifts the pause (of `system`, if given) and wakes the runs it held; "
                      "a pause a release left behind, of a workflow it removed or towards a "
                      "system no step reaches now, is lifted too. 404 for a workflow a "
                      "release removed with no such pause. 409 if not paused. 403: as for a "
                      "pause: the token acts for nobody (once the body has no fault), or "
                      "its person may not resume the workflow. "
                      "422, with `errors` naming the field: as for a pause. Nothing is "
                      "lifted on a refusal.")
def resume(request, payload: PauseIn, workflow: str = _NAME_IN_PATH):
    return _change(request, workflow, payload, pause=False)
