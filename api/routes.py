"""The integration API: start a run, follow its state (and, in api.operator_routes, the
operator's surface: list, act, history, approval decisions).

Views are thin: check the token's scope, call runs.machine.transitions.start_run (which writes the
run, its steps and its first audit record in one transaction, or nothing), and describe the
run with api.selectors. Every refusal names its reason in a stable `error` code.
"""

import logging
import math
from collections.abc import Callable

from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import Http404
from django.urls import reverse
from ninja import NinjaAPI, Path, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError

from audit.chain import Actor
from runs.definitions.definition import registry
from runs.machine.artifacts import ARTIFACT
from runs.machine.errors import BusinessKeyConflict, InvalidInput, RunArchived, UnknownWorkflow
from runs.machine.logcontext import log_context
from runs.machine.storable import unstorable_texts
from runs.machine.transitions import start_run
from runs.models import Run
from runs.operator.guidance import ActsForNobody
from runs.operator.investigation import investigate, lookups_refusal
from runs.permissions import grants_of
from runs.reads.agent_selectors import conversations
from runs.reads.step_rows import next_try_at

from . import bulk_routes, openapi, operator_routes, selectors, subscriber_routes
from .archived import archived_body, run_not_here
from .auth import RateLimited, TokenAuth
from .errors import (
    DATABASE_DOWN,
    DONE_ANSWER_LOST,
    RETRY_AFTER_SECONDS,
    database_down_answer,
    error_body,
    no_acting_user,
    refused_change,
)
from .middleware import body_limit_text
from .parser import (
    JsonParser,
    MalformedJson,
    NonFiniteNumber,
    UnsupportedMediaType,
    refuse_unknown_query,
)
from .schemas import (
    FINAL_STATES,
    MAX_RUN_ID,
    PATTERN_SAYS,
    ArchivedConflict,
    ArchivedGone,
    Conflict,
    Error,
    InvalidRequest,
    Investigation,
    RunAccepted,
    RunState,
    StartRunIn,
)

access_log = logging.getLogger("api.access")
logger = logging.getLogger(__name__)

_RETRY_AFTER = {"Retry-After": {"description": "Seconds until the token's rate-limit window "
                                               "resets.", "schema": {"type": "integer"}}}
_WWW_AUTHENTICATE = {"WWW-Authenticate": {"description": "Bearer",
                                          "schema": {"type": "string"}}}
# Integer keys, like ninja's own: string keys would give the JSON document a second "429"
# and "401" in each operation's responses, which Swagger UI refuses to render.
_HEADERS = {"responses": {429: {"headers": _RETRY_AFTER},
                          401: {"headers": _WWW_AUTHENTICATE}}}


# By operation (its url name): the refusals it promises before it looks at the input (who
# may not act hears nothing of what they sent); a function of the request, answering a
# Status or None. The operations' modules add theirs.
REFUSALS_BEFORE_INPUT: dict[str, Callable[..., Status | None]] = {}
# By GET operation without path parameters (its url name): the words a query parameter its
# schema refuses is refused in, where a rule every door shares words it (e.g.
# runs.reads.filter_problems for the runs list); a function of the query (request.GET),
# answering {parameter: message}. Told by its path and method (_query_words): operations on
# one path share its url name (resolve("/api/runs") is start_run's).
QUERY_WORDS: dict[str, Callable[..., dict[str, str]]] = {}


class IntegrationApi(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        openapi.exact_start_body(schema, operation_id="start_run")
        openapi.declare_common_answers(schema)
        openapi.declare_webhooks(schema)
        return schema

    def on_exception(self, request, exc):
        # Ninja turns whatever the parser raises into a 400 "Cannot parse request body",
        # keeping it as the cause: a body in another media type, or holding a number that is
        # not finite, is answered as such.
        if isinstance(exc, HttpError) and isinstance(
                exc.__cause__, (UnsupportedMediaType, NonFiniteNumber, MalformedJson)):
            exc = exc.__cause__
        return super().on_exception(request, exc)

    def create_response(self, request, data, *, status=None, temporal_response=None):
        response = super().create_response(request, data, status=status,
                                           temporal_response=temporal_response)
        token = getattr(request, "auth", None)
        # The access log: every call, with the token that made it (reads are audited here;
        # starts are also in the run's audit log under the token's name).
        access_log.info("%s %s %s", request.method, request.path, response.status_code,
                        extra={"actor": token.actor_label if token is not None else "",
                               "run_id": data.get("id") if isinstance(data, dict) else None})
        return response


api = IntegrationApi(
    title="Durable workflows integration API",
    version="1",
    description="Start runs of registered workflows and follow their state. Authenticate "
                "with `Authorization: Bearer <token>`; tokens are created by an admin in "
                "Django admin and scoped to workflows. Every operation refuses a query "
                "parameter it does not declare with 422 naming it; nothing is done.",
    urls_namespace="api",
    auth=TokenAuth(),
    parser=JsonParser(),
)


def _error(request, status: int, code: str, detail: str, headers: dict | None = None):
    response = api.create_response(request, {"error": code, "detail": detail}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    detail = str(exc) if str(exc) != "Unauthorized" else \
        "send an API token as 'Authorization: Bearer <token>'"
    return _error(request, 401, "unauthorized", detail, {"WWW-Authenticate": "Bearer"})


@api.exception_handler(RateLimited)
def _rate_limited(request, exc):
    return _error(request, 429, "rate_limited", str(exc),
                  {"Retry-After": str(max(1, math.ceil(exc.retry_after)))})


@api.exception_handler(HttpError)
def _http_error(request, exc):
    codes = {400: "bad_request", 403: "forbidden", 404: "not_found"}
    return _error(request, exc.status_code, codes.get(exc.status_code, "error"), str(exc))


@api.exception_handler(UnsupportedMediaType)
def _unsupported_media_type(request, exc):
    return _error(request, 415, "unsupported_media_type", str(exc))


@api.exception_handler(MalformedJson)
def _malformed_json(request, exc):
    # "bad_request", the code ninja's own refusal of such a body had: clients match on it.
    return _error(request, 400, "bad_request", str(exc))


@api.exception_handler(NonFiniteNumber)
def _non_finite_number(request, exc):
    return api.create_response(request, {"error": "invalid_request", "detail": str(exc),
                                         "errors": exc.errors}, status=422)


@api.exception_handler(Http404)
def _not_found(request, exc):
    return _error(request, 404, "not_found", "not found")


@api.exception_handler(RequestDataTooBig)
def _too_large(request, exc):
    return _error(request, 413, "request_too_large",
                  f"the request body is larger than the limit of {body_limit_text()}")


@api.exception_handler(Exception)
def _server_error(request, exc):
    # Ninja's own handler answers a traceback as text when DEBUG is on and leaves it to
    # Django's HTML page when off: the caller gets JSON either way, the log the traceback.
    refused = refused_change(exc)
    if refused is not None:
        # Not the code's fault, and said to the caller: one line, no traceback.
        logger.warning("%s %s: %s", request.method, request.path, refused[1])
        connection.close()  # a new session next time (runs.execution.database_outage)
        return _error(request, 503, *refused, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    if isinstance(exc, DATABASE_DOWN):
        code, detail = database_down_answer(exc)
        # The database's, not the code's: one line, in the words the caller gets, not a
        # traceback for each request while it lasts.
        logger.warning("%s %s: %s", request.method, request.path, " ".join(detail.split()))
        # Done: nothing to try again.
        return _error(request, 503, code, detail, headers={} if code == DONE_ANSWER_LOST
                      else {"Retry-After": str(RETRY_AFTER_SECONDS)})
    logger.exception("unhandled error in %s %s", request.method, request.path)
    return _error(request, 500, "server_error", "internal error; it has been logged")


@api.exception_handler(ValidationError)
def _invalid_request(request, exc):
    # Ninja validates the body before the operation runs: an operation that promises to
    # refuse whoever may not act before it looks at their input says so first.
    match = request.resolver_match
    before = REFUSALS_BEFORE_INPUT.get(match.url_name) if match is not None else None
    refused = before(request) if before is not None and request.auth is not None else None
    if refused is not None:
        return api.create_response(request, refused.value, status=refused.status_code)
    words = _query_words(request)
    errors = [{"loc": _body_loc(e.get("loc", ())), "msg": _said(e, words),
               "type": e.get("type", "")} for e in exc.errors]
    return api.create_response(request, {
        "error": "invalid_request", "detail": "the request does not match its schema",
        "errors": errors}, status=422)


def _query_words(request) -> dict[str, str]:
    """The operation's words for its query parameters (QUERY_WORDS), or none."""
    if request.method != "GET":
        return {}
    for name, worded in QUERY_WORDS.items():
        if reverse(f"api:{name}") == request.path:
            return worded(request.GET)
    return {}


def _said(error: dict, words: dict[str, str]) -> str:
    """The error's message: a query parameter's in the operation's words (QUERY_WORDS),
    a refusal by a pattern of ours in words (PATTERN_SAYS)."""
    loc = list(error.get("loc", ()))
    if len(loc) == 2 and loc[0] == "query" and loc[1] in words:
        return words[loc[1]]
    pattern = (error.get("ctx") or {}).get("pattern") \
        if error.get("type") == "string_pattern_mismatch" else None
    return PATTERN_SAYS.get(pattern, error.get("msg", ""))


def _body_loc(loc) -> list:
    # Ninja reports ("body", "payload", "business_key"); callers know the body as sent.
    loc = list(loc)
    if loc[:2] == ["body", "payload"]:
        return loc[2:] or ["body"]
    return loc


def _links(request, run_id: int) -> dict:
    return {
        "status_url": request.build_absolute_uri(reverse("api:run_state", args=[run_id])),
        "console_url": request.build_absolute_uri(reverse("console:run", args=[run_id])),
    }


def _accepted(request, run: Run) -> dict:
    return {"id": run.pk, "workflow": run.workflow_name, "business_key": run.business_key,
            "state": selectors.state_of(run.status), **_links(request, run.pk)}


@api.post(
    "/runs", url_name="start_run", operation_id="start_run", summary="Start a run",
    response={201: RunAccepted, 200: RunAccepted, 400: Error, 401: Error, 403: Error,
              404: Error, 409: Conflict | ArchivedConflict, 422: InvalidRequest, 429: Error},
    openapi_extra=_HEADERS,
    description="201: a new run. 200: the same event (workflow, business key and input) "
                "delivered again: the run it started. 409: the business key is used by "
                "another run with a different input (named in `existing_run`), or by a run "
                "that finished and was archived (error `run_archived`, the run and its "
                "archive file named in `archived_run`; nothing is started, whatever the "
                "input: a business key is never reused). 422: the "
                "input does not match the workflow's schema, field by field, or a wait's "
                "until(input) or correlate(input) fails with it (the step named). 404: no such "
                "workflow. 403: the token may not start this workflow. Nothing is written "
                "on any refusal.",
)
def start(request, payload: StartRunIn):
    if (refused := refuse_unknown_query(request, ())) is not None:
        return refused
    token = request.auth
    with log_context(workflow=payload.workflow, business_key=payload.business_key,
                     actor=token.actor_label):
        definition = registry.latest(payload.workflow)
        if definition is None:
            allowed = ", ".join(n for n in registry.names() if token.may_use(n)) or "none"
            return Status(404, error_body("unknown_workflow",
                                    f"unknown workflow {payload.workflow!r}; this token may "
                                    f"start: {allowed}"))
        if not token.may_use(payload.workflow):
            return Status(403, error_body("workflow_not_allowed",
                                    f"this token may not start {payload.workflow} runs"))
        # Text that is not Unicode (a lone surrogate) cannot even be handed to the strict
        # validation below, which reads it as JSON and would answer "Invalid JSON" about
        # `input` as a whole: named where it is instead.
        unreadable = [e for e in unstorable_texts(payload.input, ["input"])
                      if e["type"] == "string_unicode"]
        if unreadable:
            return Status(422, _invalid_input(payload.workflow, unreadable))
        # Strict: the input must have the JSON types the published schema says ("5" is not
        # an integer), whatever the runtime's own coercions (as start_run's command reads it).
        validated, problems = definition.strict_input(payload.input)
        if problems:
            errors = [{**e, "loc": ["input", *e["loc"]]} for e in problems]
        else:
            # What would be stored (fields the schema does not declare are dropped).
            errors = unstorable_texts(validated.model_dump(mode="json"), ["input"])
        if errors:
            return Status(422, _invalid_input(payload.workflow, errors))
        try:
            run, created = start_run(workflow=payload.workflow,
                                     business_key=payload.business_key, input=payload.input,
                                     actor=Actor.system(token.actor_label))
        except UnknownWorkflow as exc:
            return Status(404, error_body("unknown_workflow", str(exc)))
        except InvalidInput as exc:
            # In the start's own words, as the CLI says them: a blank business key or an
            # input over RUNS_INPUT_MAX_BYTES is no mismatch with the schema.
            return Status(422, _invalid_input(payload.workflow, [
                {"loc": e["loc"] if e["loc"] == ["business_key"] else ["input", *e["loc"]],
                 "msg": e["msg"], "type": "value_error"} for e in exc.errors],
                detail=str(exc)))
        except BusinessKeyConflict as exc:
            existing = Run.objects.get(pk=exc.run_id)
            return Status(409, {**error_body("business_key_conflict", str(exc)),
                                "existing_run": _accepted(request, existing)})
        except RunArchived as exc:
            return Status(409, {**error_body("run_archived", str(exc)),
                                "archived_run": archived_body(request, exc.archived,
                                                          same_input=exc.same_input)})
        with log_context(run_id=run.pk):
            access_log.info("run %s %s", run.pk, "started" if created else "found again")
        return Status(201 if created else 200, _accepted(request, run))


def _invalid_input(workflow: str, errors: list[dict], *, detail: str = "") -> dict:
    fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
    return {"error": "invalid_input",
            "detail": detail or f"input for {workflow} does not match its schema: {fields}",
            "errors": errors}


@api.get(
    "/runs/{run_id}/investigation", url_name="run_investigation",
    operation_id="get_run_investigation", summary="A run's investigation card",
    response={200: Investigation, 401: Error, 403: Error, 404: Error, 410: ArchivedGone,
              422: InvalidRequest, 429: Error},
    openapi_extra=_HEADERS,
    description="A read-only report for the person about to act: facts with their evidence "
                "apart from inferences, which effects exist in other systems, what is "
                "unconfirmed, the duplicate risk of each action the run offers, and a go / "
                "limited / stop verdict with the smallest next step (where the token's "
                "acting person may not take the action it advises, it says that the action "
                "needs someone who holds its permission; to a token that acts for nobody, "
                "that the action needs a person, and the permission that person needs). "
                "With lookups=true, "
                "steps whose outcome is unknown are looked up by key now (reads that reach "
                "other systems): as on the console, only for a token whose acting person "
                "has the reconcile permission on the run's workflow (403 otherwise). 410: "
                "the run finished and was archived (error `run_archived`, with its archive "
                "file).",
)
def run_investigation(request, run_id: int = Path(..., ge=1, le=MAX_RUN_ID),
                      lookups: bool = False):
    # A misspelt ?lookup=true would otherwise be answered without the lookups it asked for.
    if (refused := refuse_unknown_query(request, ("lookups",))) is not None:
        return refused
    token = request.auth
    run = selectors.visible_run(run_id, workflows=token.workflows or [])
    if run is None:
        return run_not_here(request, token, run_id)
    if lookups:
        # A lookup reaches another system: a person's (investigation.lookups_refusal).
        if token.acting_user is None:
            return no_acting_user(token, "look effects up in other systems (lookups=true)")
        if (refusal := lookups_refusal(token.acting_user, run)) is not None:
            return Status(403, error_body(
                "forbidden", f"{token.acting_user.get_username()}: {refusal} (lookups=true)"))
    # A token no person is behind reads that the advice needs one, as a person who may not
    # take it reads who may.
    reader = token.acting_user or ActsForNobody(f"API token {token.name}")
    return Status(200, investigate(run, reader=reader, lookups=lookups).as_dict())


@api.get(
    "/runs/{run_id}", url_name="run_state", operation_id="get_run", summary="A run's state",
    response={200: RunState, 401: Error, 404: Error, 410: ArchivedGone, 422: InvalidRequest,
              429: Error},
    openapi_extra=_HEADERS,
    description="The run's state in a finite model: accepted, running (step n of m), "
                "waiting (for approval or to retry), needs_attention (with the reason), "
                "compensating, completed, compensated, compensation_failed, terminated. "
                "Each agent step comes with a summary of its conversation: turns, tokens "
                "and its tool calls (state, key, remote reference, attempts, last error, "
                "arguments and result masked as the run page masks them). "
                "Runs of workflows the token may not use are not found. 410: the run "
                "finished and was archived (error `run_archived`, with its archive file).",
)
def run_state(request, run_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
    # As the runs list: a parameter the operation does not take is refused, never ignored.
    if (refused := refuse_unknown_query(request, ())) is not None:
        return refused
    token = request.auth
    run = selectors.visible_run(run_id, workflows=token.workflows or [])
    if run is None:
        return run_not_here(request, token, run_id)
    view = selectors.run_view(run)
    current, error = view.current, view.last_error
    # Whether the token's person may take each action the run offers: the rule the console's
    # run page and the CLI ask. A token that acts for nobody may take none.
    may = grants_of(token.acting_user) if token.acting_user is not None else None
    return Status(200, {
        "id": run.pk, "workflow": run.workflow_name, "workflow_version": run.workflow_version,
        "business_key": run.business_key, "drill": run.drill, "state": view.state,
        "final": view.state in FINAL_STATES, "description": view.description,
        "step_count": run.step_count, "steps_done": run.steps_done,
        "current_step": None if current is None else {
            "name": current.name, "number": current.position + 1, "kind": current.kind,
            "status": current.status, "attempt": current.attempt,
            # An ended wait's timeout is not due: nothing happens then.
            "next_attempt_at": None if current.name in view.ended_waits
            else next_try_at(run, current),
            "wait_ended": view.ended_waits.get(current.name)},
        "waiting_for": view.waiting_for,
        "attention_reason": run.attention_reason or None,
        "message": run.status_message,
        "dispatch_pause": selectors.hold_of(view),
        "last_error": None if error is None else {"error_class": error.error_class,
                                                  "step": error.name},
        "created_at": run.created_at, "updated_at": run.updated_at,
        "finished_at": run.finished_at,
        "operator_actions": [{"name": a.name, "label": a.label,
                              "needs_second_person": a.needs_second_person(view.steps),
                              "permitted": may is not None
                              and may(a.permission).covers(run.workflow_id)}
                             for a in view.operator_actions],
        "agent_steps": _agent_steps(request, run, view.steps),
        **_links(request, run.pk),
    })


def _agent_steps(request, run: Run, steps) -> list[dict]:
    """The conversation of each agent step, as the console reads it (two queries however
    many steps, turns and calls; none for a workflow without agent steps)."""
    return [{"step": conv.step, "turns": len(conv.turns),
             "prompt_tokens": conv.prompt_tokens, "completion_tokens": conv.completion_tokens,
             "tool_calls": [_tool_call(c) for turn in conv.turns for c in turn.calls],
             "summaries": [_summary(request, run, turn) for turn in conv.turns
                           if turn.summarises],
             # A final answer past RUNS_AGENT_TEXT_MAX_CHARS: the turn keeps its start only.
             "long_answers": [{"turn": turn.index,
                               "transcript": _artifact(request, run, turn)}
                              for turn in conv.turns
                              if turn.transcript and not turn.summarises]}
            # The current generation's: a re-run's earlier conversations are on the run page.
            for conv in conversations(run, steps) if conv.current]


def _summary(request, run: Run, turn) -> dict:
    return {"turn": turn.index, "summarises": turn.summarises,
            "transcript": _artifact(request, run, turn)}


def _artifact(request, run: Run, turn) -> dict | None:
    """The artifact a turn keeps (a summary's transcript, a long answer whole), with the
    console's download of it, which checks the reader may view the run."""
    artifact = turn.transcript
    return None if not artifact else {
        "reference": artifact[ARTIFACT], "size": artifact["size"],
        "sha256": artifact["sha256"],
        "download_url": request.build_absolute_uri(reverse(
            "console:turn_artifact", args=[run.pk, turn.id]))}


def _tool_call(call: dict) -> dict:
    error = None
    if call["error_class"] or call["error"]:
        error = {"error_class": call["error_class"] or None, "message": call["error"]}
    return {"ref": call["ref"], "tool": call["tool"], "state": call["status"],
            "idempotency_key": call["key"], "remote_ref": call["remote_ref"],
            "attempts": call["attempt"], "last_error": error,
            "arguments": call["arguments"], "result": call["result"], "actions": call["ops"],
            "wait_ended": call["wait_ended"]}


operator_routes.register(api, headers=_HEADERS, refusals=REFUSALS_BEFORE_INPUT,
                         query_words=QUERY_WORDS)
bulk_routes.register(api, headers=_HEADERS)
subscriber_routes.register(api, headers=_HEADERS, refusals=REFUSALS_BEFORE_INPUT)
