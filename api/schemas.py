"""The API's request and response shapes; the OpenAPI document is derived from them."""

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from ninja import Field, Schema
from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema
from pydantic_core import PydanticCustomError

from audit.actions import STEP_OUTCOMES
from runs.definitions.definition import STEP_KINDS
from runs.machine.storable import (
    BLANKS,
    CONTROL_CHARACTER_RANGES,
    PERSON_TEXT_MAX,
    character_class,
)
from runs.machine.transitions.kernel import NEW
from runs.machine.transitions.outcome import REMOTE_REF_MAX
from runs.models import AttentionReason, ErrorClass, RunStatus, StepStatus, ToolCallStatus
from runs.operator.action_input import CALL_ID
from runs.reads.cursors import keyset_pattern
from runs.reads.id_in_path import LARGEST_ID

from .models import WebhookSubscriber
from .subscribers import SECRET_MAX_LENGTH, SECRET_MIN_LENGTH, SECRET_PATTERN, secret_problem

# A run as a caller sees it: a small, finite set of states.
State = Literal["accepted", "running", "waiting", "needs_attention", "compensating",
                "completed", "compensated", "compensation_failed", "terminated"]
FINAL_STATES = ("completed", "compensated", "terminated")
# What a waiting run waits for: a person's decision, an external event, a durable timer
# (a sleep step) or a scheduled retry (api.selectors.run_view says which).
WaitingFor = Literal["approval", "event", "timer", "retry"]
Reason = Literal[tuple(r.value for r in AttentionReason)]
ErrorClassName = Literal[tuple(c.value for c in ErrorClass)]
StepStatusName = Literal[tuple(s.value for s in StepStatus)]
# Every kind a step can be declared with, from the runtime's own list.
StepKind = Literal[STEP_KINDS]
ToolCallStateName = Literal[tuple(s.value for s in ToolCallStatus)]

# The largest id a path may name, as the console's paths read it.
MAX_RUN_ID = LARGEST_ID

# PostgreSQL text cannot hold NUL characters; the document says so, the API refuses them.
NO_NUL = r"^[^\u0000]+$"
NUL_FREE = r"^[^\u0000]*$"
# A business key reaches mail subjects and log lines: no control characters at all, no
# Unicode line or paragraph separators, no bidirectional or other invisible format
# characters (storable.CONTROL_CHARACTER_RANGES, the rule
# runs.machine.transitions.start_run applies to every caller). The request is checked
# against all of them (NO_CONTROL); the document's pattern says those up to U+FFFF, as
# \uXXXX, which every dialect a pattern is read in reads alike (ECMA-262 with its u flag
# or without, Python's re, the Rust regex crate). One above it has no spelling every reader
# takes: \u{...} (ECMA-262 with the u flag, the Rust regex crate) is an error to ECMA-262
# without it and to Python's re, which the contract test's generator draws keys with; a
# surrogate pair (ECMA-262 without the flag) is an error to the Rust regex crate and to
# jsonschema-rs, which checks the contract. The document's description names those instead
# (LEFT_TO_THE_START).
SAID_BY_THE_PATTERN = tuple((first, min(last, 0xFFFF))
                            for first, last in CONTROL_CHARACTER_RANGES if first <= 0xFFFF)
LEFT_TO_THE_START = tuple((max(first, 0x10000), last)
                          for first, last in CONTROL_CHARACTER_RANGES if last > 0xFFFF)
CONTROL_CHARACTERS = character_class(SAID_BY_THE_PATTERN)
NO_CONTROL = rf"^[^{character_class(CONTROL_CHARACTER_RANGES)}]+$"
# The format characters the document's patterns cannot name, as its descriptions name them.
UNSAID_BY_THE_PATTERN = ", ".join(f"U+{first:04X}" if first == last
                                  else f"U+{first:04X}-U+{last:04X}"
                                  for first, last in LEFT_TO_THE_START)
# The runs list's search (`q`): empty, or holding no control character
# (runs.reads.filter_problems), checked against all of them (CONTROL_FREE) and said up to
# U+FFFF, as a business key is.
CONTROL_FREE = rf"^[^{character_class(CONTROL_CHARACTER_RANGES)}]*$"
SEARCH_TEXT = Field(
    pattern=CONTROL_FREE, json_schema_extra={"pattern": rf"^[^{CONTROL_CHARACTERS}]*$"},
    description="Business key, idempotency key or remote reference. No control character "
                "(refused, 422): the pattern names those up to U+FFFF; those of Unicode "
                f"category Cf above it ({UNSAID_BY_THE_PATTERN}) are refused too.")
# What the document says of a business key: no control character up to U+FFFF
# (CONTROL_CHARACTERS), and no blank at either end (BLANKS, what the start's str.strip()
# takes away). Said, not checked here: the start refuses a key with a blank at an end
# itself (422 invalid_input, in its own words, as it does for the CLI), where this pattern
# would refuse it first as a request that does not match its schema.
BUSINESS_KEY_PATTERN = (rf"^[^{CONTROL_CHARACTERS}{BLANKS}]"
                        rf"(?:[^{CONTROL_CHARACTERS}]*[^{CONTROL_CHARACTERS}{BLANKS}])?$")
# What a refusal by one of these patterns says, instead of quoting the expression: a caller
# reads "contains control characters", not which code points a character class excludes.
PATTERN_SAYS = {
    NO_NUL: "contains a NUL character, which cannot be stored",
    NUL_FREE: "contains a NUL character, which cannot be stored",
    # Reached by a NUL alone: a blank at either end is refused first (_secret_refused).
    SECRET_PATTERN: "contains a NUL character, which cannot be stored",
    NO_CONTROL: "contains control characters (line breaks, tabs, Unicode line or paragraph "
                "separators, bidirectional controls, ...)",
}
PATTERN_SAYS[CONTROL_FREE] = PATTERN_SAYS[NO_CONTROL]
# A list's `after` (a page's cursor, or the inbox's of two times): a client paging on is
# told what to send, as list_runs tells it, not the document's expression.
for _times in (1, 2):
    PATTERN_SAYS[f"^$|{keyset_pattern(_times)}"] = (
        "is not a cursor this list gave: pass a page's next_cursor as it came")


class StartRunIn(Schema):
    # A misspelt field ("business_ky", "inputs") would otherwise be dropped and the run
    # started without what the caller meant to send.
    model_config = {"extra": "forbid"}

    workflow: str = Field(min_length=1, max_length=200, pattern=NO_NUL,
                          description="The registered workflow to start (its latest version).")
    business_key: str = Field(
        min_length=1, max_length=300, pattern=NO_CONTROL,
        json_schema_extra={"pattern": BUSINESS_KEY_PATTERN},
        description="Identifies the business event, e.g. 'tenant-42:inv-1847'. The same "
                    "workflow, business key and input delivered again find the same run. "
                    "Not blank, no space at either end, in Unicode NFC (refused, 422). "
                    "The pattern names the control and format characters it may not hold "
                    f"up to U+FFFF; those of Unicode category Cf above it ("
                    f"{UNSAID_BY_THE_PATTERN}) are refused too (422).")
    input: dict[str, Any] = Field(
        default_factory=dict,
        description="The run's input, validated strictly against the workflow's input schema.")


class RunAccepted(Schema):
    id: int
    workflow: str
    business_key: str
    state: State
    status_url: str
    console_url: str


class CurrentStep(Schema):
    name: str
    number: int = Field(description="1-based position of the step in the workflow.")
    kind: StepKind
    status: StepStatusName
    attempt: int
    next_attempt_at: datetime | None = Field(
        description="When the step's wait ends: a scheduled retry, a timer (sleep step) or "
                    "an event wait's timeout (null when none is due: while the run "
                    "waits for a person, or when the run's end ended the wait: see "
                    "wait_ended).")
    wait_ended: str | None = Field(
        None, description="Set when the step still reads 'waiting' (an approval, an event) "
                          "but the run's end ended that wait: it says how the run was ended "
                          "(cancelled, terminated, compensated). Nothing more comes for it "
                          "unless the run is reopened.")


class DispatchHold(Schema):
    system: str = Field(description="The remote system the paused steps reach; empty: the "
                                    "whole workflow is paused.")
    paused_by: str
    paused_at: datetime
    reason: str


class LastError(Schema):
    error_class: ErrorClassName
    step: str


class OperatorAction(Schema):
    name: str = Field(description="The action's name, e.g. 'reconcile'.")
    label: str
    needs_second_person: bool = Field(
        description="Whether a second person must approve it (four eyes) on this run.")
    permitted: bool = Field(
        description="Whether the token's acting person may take it on this run (the "
                    "permission the action needs, on the run's workflow, as the console and "
                    "the CLI check it): one not permitted is refused with 403. False for "
                    "every action of a token that acts for nobody.")


class ToolCallError(Schema):
    error_class: ErrorClassName | None = Field(
        description="The class of the call's last error, when it was classified.")
    message: str = Field(description="The last error as recorded (credentials masked).")


class AgentToolCall(Schema):
    ref: str = Field(description="The call within its step: 'turn.index', e.g. '2.0'.")
    tool: str
    state: ToolCallStateName
    idempotency_key: str = Field(description="Sent with every attempt of this call; the "
                                             "same across crashes and operator retries.")
    remote_ref: str = Field(description="The reference the other system gave the effect "
                                        "(empty until there is one).")
    attempts: int
    last_error: ToolCallError | None
    arguments: Any = Field(
        description="The call's arguments as people see them: the fields its tool declares "
                    "secret, and anything that looks like a credential, are '[redacted]'; "
                    "the whole value is '[redacted]' when the tool is no longer declared.")
    result: Any = Field(
        None, description="What the call returned (null until it returned anything), as the "
                          "run page shows it: a value sealed at rest (a field the tool "
                          "declares sensitive) and anything that looks like a credential are "
                          "'[redacted]', as in `arguments`; the whole value is '[redacted]' "
                          "when the tool is no longer declared.")
    actions: list[str] = Field(
        description="The operator actions that can be aimed at this call now (POST them "
                    "with `step` and `call`), e.g. 'confirm_compensation' on the call whose "
                    "undo a compensation paused at.")
    wait_ended: str | None = Field(
        None, description="Set when the call still reads 'waiting' (for a person's "
                          "approval) but the run's end ended that wait: it says how the run "
                          "was ended (cancelled, terminated, compensated), as a step's "
                          "wait_ended does. Nothing more comes for it unless the run is "
                          "reopened.")


class TranscriptArtifact(Schema):
    reference: str = Field(description="The artifact's name in the runtime's artifact "
                                       "storage.")
    size: int = Field(description="Bytes.")
    sha256: str = Field(description="Of the artifact's bytes, as hex.")
    download_url: str = Field(description="The artifact (JSON) on the console, for a "
                                          "signed-in person who may view the run.")


class AgentSummaryTurn(Schema):
    turn: int = Field(description="The summary turn's index.")
    summarises: int = Field(description="The summary stands for the turns before this "
                                        "index; they stay stored in full.")
    transcript: TranscriptArtifact | None = Field(
        description="The artifact holding the covered turns in full (each turn's content "
                    "and its tool calls with arguments and results; sensitive fields sealed).")


class AgentLongAnswer(Schema):
    turn: int = Field(description="The answer turn's index.")
    transcript: TranscriptArtifact = Field(
        description="The artifact holding the final answer whole (a JSON string); the "
                    "turn's content keeps only its start.")


class AgentStep(Schema):
    step: str = Field(description="The agent step's name.")
    turns: int = Field(description="Model turns stored so far.")
    prompt_tokens: int
    completion_tokens: int
    tool_calls: list[AgentToolCall] = Field(description="In the order the model asked for "
                                                        "them (turn, then index).")
    summaries: list[AgentSummaryTurn] = Field(
        description="The turns that summarise earlier ones once the conversation passed the "
                    "agent's context budget, oldest first.")
    long_answers: list[AgentLongAnswer] = Field(
        description="The final answers longer than RUNS_AGENT_TEXT_MAX_CHARS, each kept "
                    "whole in an artifact (the step's result reads it).")


class RunState(Schema):
    id: int
    workflow: str
    workflow_version: int
    business_key: str
    drill: bool = Field(description="A drill run (manage.py drill), not real work: a drill "
                                    "breaks runs on purpose, and its runs are left out of "
                                    "the lists, the metrics and webhook deliveries.")
    state: State
    final: bool
    description: str = Field(description="The state in words, e.g. 'running step 2 of 4 "
                                         "(classify)'.")
    step_count: int
    steps_done: int
    current_step: CurrentStep | None
    waiting_for: WaitingFor | None = Field(
        description="Set when state is 'waiting': 'approval' (a person's decision), 'event' "
                    "(an external event), 'timer' (a sleep step) or 'retry' (a scheduled "
                    "retry; or, for a step not yet tried, its first try, which a dispatch "
                    "pause holds: dispatch_pause).")
    attention_reason: Reason | None = Field(
        description="Set when state is 'needs_attention' or 'compensation_failed'.")
    message: str = Field(description="What the runtime said about the current state.")
    dispatch_pause: DispatchHold | None = Field(
        None, description="Set while a dispatch pause holds the run where it is (accepted, or "
                          "a retry or timer waiting): the pause of its whole workflow, or the "
                          "one towards the system its next step reaches. Lifting it lets the "
                          "run go on.")
    last_error: LastError | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    operator_actions: list[OperatorAction] = Field(
        description="What an operator can do with the run now, in the console (empty for a "
                    "run that needs nobody), each with whether the token's acting person "
                    "may take it (`permitted`).")
    agent_steps: list[AgentStep] = Field(
        description="For each agent step of the workflow, a summary of its conversation "
                    "(empty for a workflow without agent steps).")
    status_url: str
    console_url: str


class Error(Schema):
    error: str = Field(description="A stable code, e.g. 'unknown_workflow'.")
    detail: str


class FieldError(Schema):
    loc: list[str | int] = Field(description="Where in the request body, e.g. "
                                             "['input', 'email'].")
    msg: str
    type: str


class InvalidRequest(Schema):
    error: Literal["invalid_request", "invalid_input"]
    detail: str
    errors: list[FieldError]


class Conflict(Schema):
    error: Literal["business_key_conflict"]
    detail: str
    existing_run: RunAccepted


class ArchivedRunOut(Schema):
    id: int = Field(description="The run's id when it was in the hot tables.")
    workflow: str
    business_key: str
    final_state: Literal[FINAL_STATES]
    finished_at: datetime | None
    archived_at: datetime
    archive_file: str = Field(description="The archive file that holds the run, its steps "
                                          "and its audit records.")
    same_input: bool | None = Field(
        None, description="Whether this start had the run's own input: the same event "
                          "delivered again (null when the answer is not to a start).")
    console_url: str


class ArchivedConflict(Schema):
    error: Literal["run_archived"]
    detail: str
    archived_run: ArchivedRunOut


class ArchivedGone(Schema):
    error: Literal["run_archived"]
    detail: str
    archived_run: ArchivedRunOut


class InvestigationFact(Schema):
    text: str
    evidence: str = Field(description="Where it comes from: an audit record number, the step "
                                      "row, or a lookup by key made for this report.")


class InvestigationStep(Schema):
    step: str
    kind: str
    impact: str
    status: str
    does: str = Field(description="What the step did or will do, in one line.")
    effect: Literal["exists", "does not exist", "unconfirmed", "none"]
    remote_ref: str
    recovery: str
    wait_ended: str = Field(
        "", description="Set when the step reads 'waiting' but the run's end ended that "
                        "wait: how the run was ended. Nothing more comes for it.")


class InvestigationRisk(Schema):
    action: str
    label: str
    duplicate_risk: str


class Investigation(Schema):
    run_id: int
    workflow: str
    business_key: str
    status: str
    made_at: datetime
    lookups_made: bool
    facts: list[InvestigationFact]
    inferences: list[str] = Field(description="Conclusions drawn, not observed.")
    unconfirmed: list[str]
    steps: list[InvestigationStep]
    risks: list[InvestigationRisk]
    verdict: Literal["go", "limited", "stop"]
    next_step: str
    audit_chain: Literal["intact", "broken", ""] = Field(
        description="The run's audit hash chain as verified for this card; \"\" when not "
                    "verified.")
    chain_broken_at: int | None = Field(
        description="The first audit record (seq) that does not verify, when broken.")


# --- the operator's surface: lists, actions, history, approval decisions ------------------

class RunSummary(Schema):
    id: int
    workflow: str
    workflow_version: int
    business_key: str
    state: State
    status: str = Field(description="The runtime's own status name (e.g. 'attention').")
    attention_reason: Reason | None
    current_step: str | None
    last_error_class: ErrorClassName | None
    created_at: datetime
    updated_at: datetime
    status_url: str


class RunPage(Schema):
    runs: list[RunSummary] = Field(description="Newest status change first.")
    next_cursor: str | None = Field(
        description="Pass as `after` for the next page (keyset paging: every page costs the "
                    "same); null on the last page.")


class WorkerOut(Schema):
    name: str = Field(description="host:pid, as leases name their holder.")
    host: str
    pid: int | None
    queues: str
    started_at: datetime | None
    heartbeat_at: datetime | None = Field(description="The worker's last heartbeat.")
    stopped_at: datetime | None = Field(description="Set when the worker stopped cleanly.")
    silent: bool = Field(description="No heartbeat for longer than a lease (and not stopped).")
    registered: bool = Field(description="False: a lease holder that never wrote a heartbeat.")
    held_runs: list[int] = Field(description="Runs of the token's workflows it holds now (the "
                                             "first ones).")
    held_count: int
    expired_leases: int = Field(description="Of those, how many leases ran out.")


class WorkerList(Schema):
    workers: list[WorkerOut] = Field(description="Newest heartbeat first.")
    lease_seconds: float


class ActionIn(Schema):
    # A misspelt field ("steps", "evidense") would otherwise be dropped and the action
    # taken, or refused, without what the person meant to send.
    model_config = {"extra": "forbid"}

    # Its length is the document's to say and the action's rule to hold (require_reason, as
    # for the console and the CLI): a reason empty or too long is refused in the same words
    # at every door, still 422 naming `reason`. So is a NUL in any field, and a control
    # character in one that names a thing (runs.operator.action_input.field_refused): the
    # document says so with its pattern, and the rule answers.
    reason: str = Field(json_schema_extra={"minLength": 1, "maxLength": PERSON_TEXT_MAX,
                                           "pattern": NUL_FREE},
                        description="Why: recorded in the audit trail. Required.")
    # Its length the document's to say (a step's name is at most 200 characters) and the
    # action's rule to hold: a longer one names no step of the run, 422 naming `step` in the
    # console's and the CLI's words, not the schema's.
    step: str = Field("", json_schema_extra={"maxLength": 200, "pattern": NUL_FREE},
                      description="The step, for the actions aimed at one.")
    # Its form is the rule every door reads it by (action_input.call_id_problem): written
    # otherwise, it is refused with 422 naming `call`, in the command line's words.
    call: str = Field("", max_length=40, json_schema_extra={"pattern": f"^$|^{CALL_ID}$"},
                      description="The tool call, for the tool-call actions: 'turn.index' "
                                  "as the run page shows it, e.g. '2.0'.")
    mode: Literal["ask", "found", "not_found"] = Field(
        "ask", description="reconcile: ask the remote system by key, or record by hand.")
    # Its length too is the document's to say and the action's rule to hold (a reference
    # longer than a record keeps: 422 naming it in the console's and the CLI's words, not
    # the schema's).
    remote_ref: str = Field("", json_schema_extra={"maxLength": REMOTE_REF_MAX,
                                                   "pattern": NUL_FREE},
                            description="reconcile found: the effect's remote reference, "
                                        "whole (a cut one would name another effect).")
    # No length of its own: the action's rule holds it, as in the console and the CLI (a
    # person's evidence, PERSON_TEXT_MAX; an event's payload, RUNS_INPUT_MAX_BYTES as JSON).
    evidence: str = Field("", json_schema_extra={"pattern": NUL_FREE}, description=(
        f"reconcile by hand: what established it, at most {PERSON_TEXT_MAX:,} characters. "
        "event_received: the event's payload, as JSON text, at most RUNS_INPUT_MAX_BYTES "
        "(256 KB unless set) as compact JSON, as an event sent to /api/events. Longer is "
        "refused with 422 naming `evidence`."))


class ApprovalRequestOut(Schema):
    id: int
    kind: str
    run_id: int = Field(description="The run the request is kept with: for a bulk job's "
                                    "request, the first of the `run_count` runs it acts on.")
    bulk_job: int | None = Field(description="The bulk job whose runs an approval acts on "
                                             "(four eyes), or null.")
    run_count: int = Field(description="How many runs an approval acts on: 1, or the bulk "
                                       "job's runs that wait for a second person.")
    action: str = Field(description="The operator action asked for (four eyes), or empty.")
    step: str
    status: str
    requested_by: str | None
    requested_at: datetime
    due_at: datetime
    reason: str = Field(description="The requester's reason, for an operator action.")
    decide_url: str


class ActionDone(Schema):
    action: str
    run_id: int
    message: str
    state: State
    status_url: str


class ActionPending(Schema):
    action: str
    run_id: int
    message: str
    approval_request: ApprovalRequestOut


class HistoryEntry(Schema):
    seq: int = Field(description="The record's place in the run's audit chain.")
    at: datetime
    action: str
    actor: str
    actor_kind: str
    step: str
    reason: str
    before: dict[str, Any]
    after: dict[str, Any]
    data: dict[str, Any]


class HistoryPage(Schema):
    run_id: int
    entries: list[HistoryEntry] = Field(description="Oldest first within the page.")
    older: int | None = Field(description="Pass as `before` for the page of older entries; "
                                          "null when none is older.")


class ApprovalList(Schema):
    requests: list[ApprovalRequestOut] = Field(
        description="The earliest due first, then the earliest asked, then the lowest id.")
    next_cursor: str | None = Field(
        description="Pass as `after` for the next page (keyset paging: every page costs the "
                    "same); null on the last page.")


class DecisionIn(Schema):
    # A misspelt `comment` would otherwise be dropped and the approval recorded without it.
    model_config = {"extra": "forbid"}

    # Strict: pydantic would read "yes", "no", "1" or 0 as a boolean, and a client's
    # mistaken field would then approve; only JSON true or false decides.
    approve: bool = Field(strict=True, description="true approves, false rejects; JSON "
                                                   "true or false only.")
    decision_id: str = Field(
        pattern=r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                r"[0-9a-fA-F]{12}$",
        description="A UUID the caller makes once per decision: sending it again with "
                    "the same decision on the same request changes nothing; on another "
                    "request or with the other decision it is refused (409).")
    # A NUL or a length over PERSON_TEXT_MAX is the decision's rule to word
    # (approvals.decisions.decision_refusal), as at the console and the command line; the
    # document says them.
    comment: str = Field("", json_schema_extra={"maxLength": PERSON_TEXT_MAX,
                                                "pattern": NUL_FREE})


class DecisionOut(Schema):
    outcome: Literal["recorded", "already_recorded"]
    message: str
    application: Literal["applied", "pending", "not_applied"] = Field(
        description="Where the decision is with its run. `applied`: the run has it. "
                    "`pending`: recorded, not applied yet (the database interrupted it, or "
                    "the run is passing through another state): the approvals sweep applies "
                    "it shortly, as this person; nothing needs sending again. "
                    "`not_applied`: recorded, but the run cannot take it (it was terminated "
                    "meanwhile); `message` says why.")
    approval_request: ApprovalRequestOut
    bulk_job_url: str | None = Field(
        None, description="A bulk job's request, approved: the job's progress (GET "
                          "/api/bulk/{id}), where its worker takes the action on each run "
                          "that waited for the approval. Null otherwise.")


# Webhook subscribers (api.subscriber_routes). The secret is write-only: no answer has it.
_NAME_MAX = WebhookSubscriber._meta.get_field("name").max_length
_URL_MAX = WebhookSubscriber._meta.get_field("url").max_length
SubscriberWorkflows = list[Annotated[str, Field(min_length=1, max_length=200,
                                                pattern=NO_NUL)]]
_SUBSCRIBER_NAME = "Unique; the subject of its records in the access chain, so it never changes."
_SUBSCRIBER_URL = ("Where its events are POSTed (http or https), as Django admin takes it; "
                   "in a deployment only a public address is sent anything.")
_SUBSCRIBER_SECRET = (f"Signs each delivery (HMAC-SHA256); give it to the receiver: at least "
                      f"{SECRET_MIN_LENGTH} characters, random ones (a short one proves "
                      "nothing), with no blank at either end (refused, never stripped). "
                      "Write-only: never answered, logged or recorded.")


def _secret_refused(value):
    # secret_problem's words, as admin's form says them, asked before the constraints (the
    # same rule, for the document) would say it in pydantic's.
    if isinstance(value, str) and (problem := secret_problem(value)) is not None:
        raise PydanticCustomError("secret", problem)
    return value


SubscriberSecret = Annotated[str, Field(min_length=SECRET_MIN_LENGTH,
                                        max_length=SECRET_MAX_LENGTH, pattern=SECRET_PATTERN),
                             BeforeValidator(_secret_refused)]
_SUBSCRIBER_WORKFLOWS = ("The workflows whose runs it is told of, each one of the token's "
                         "and one whose runs the token's person may view; [] (every "
                         "workflow) is beyond any token.")


class SubscriberIn(Schema):
    # A misspelt field ("workflow") would otherwise be dropped, and the subscriber told of
    # other runs than meant.
    model_config = {"extra": "forbid"}

    name: str = Field(min_length=1, max_length=_NAME_MAX, pattern=NO_NUL,
                      description=_SUBSCRIBER_NAME)
    url: str = Field(min_length=1, max_length=_URL_MAX, pattern=NO_NUL,
                     description=_SUBSCRIBER_URL)
    secret: SubscriberSecret = Field(description=_SUBSCRIBER_SECRET)
    workflows: SubscriberWorkflows = Field(description=_SUBSCRIBER_WORKFLOWS)
    # Strict, as every boolean of a body: "no" would be read as a boolean.
    active: bool = Field(True, strict=True, description="Sent its events; false holds them.")


class SubscriberChange(Schema):
    model_config = {"extra": "forbid"}

    name: str | None = Field(None, min_length=1, max_length=_NAME_MAX, pattern=NO_NUL,
                             description=f"{_SUBSCRIBER_NAME} Its own name only (or null).")
    url: str | None = Field(None, min_length=1, max_length=_URL_MAX, pattern=NO_NUL,
                            description=_SUBSCRIBER_URL)
    secret: SubscriberSecret | None = Field(
        None,
        description=f"{_SUBSCRIBER_SECRET} A new one replaces the current one, which signs "
                    "beside it for WEBHOOK_SECRET_OVERLAP_HOURS while the receiver switches.")
    workflows: SubscriberWorkflows | None = Field(None, description=_SUBSCRIBER_WORKFLOWS)
    active: bool | None = Field(None, strict=True)
    end_overlap: bool = Field(
        False, strict=True, description="For a secret that leaked: the replaced one (now, or "
                                        "earlier and still signing) signs nothing from now on.")


class SubscriberOut(Schema):
    id: int
    name: str
    url: str = Field(description="As the access chain records it: the credentials a URL may "
                                 "carry (its userinfo, its query's values) masked.")
    workflows: list[str] = Field(description="[]: every workflow.")
    active: bool
    previous_secret_signs_until: datetime | None = Field(
        description="Until when the secret last replaced signs beside the current one (each "
                    "delivery carries both signatures); null when only the current one does.")
    created_at: datetime


class SubscriberList(Schema):
    subscribers: list[SubscriberOut] = Field(description="The oldest made first; those of "
                                                         "the token's workflows only.")
    next_cursor: str | None = Field(
        description="Pass as `after` for the next page (keyset paging: every page costs the "
                    "same); null on the last page.")


# Progress events (api.webhooks): the bodies POSTed to subscribers. The publisher builds
# each body through these models and the OpenAPI document's `webhooks` is derived from them,
# so what is sent and what is published cannot drift apart.
RunStatusName = Literal[tuple(s.value for s in RunStatus)]
StepOutcomeName = Literal[tuple(str(a) for a in STEP_OUTCOMES)]
# As sent, not as pydantic writes a datetime ("Z" for UTC): `at` was always isoformat().
IsoTime = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str),
                    WithJsonSchema({"type": "string", "format": "date-time"})]


class WebhookRun(Schema):
    id: int
    workflow: str
    business_key: str
    status_url: str = Field(json_schema_extra={"format": "uri"},
                            description="The run's GET /api/runs/{id}, absolute: its current "
                                        "state.")


class WebhookStep(Schema):
    name: str
    outcome: StepOutcomeName


class RunStatusChanged(Schema):
    delivery_id: UUID = Field(description="The same on every attempt of this delivery (and "
                                           "in X-Webhook-Id): drop a second copy.")
    type: Literal["run.status_changed"]
    run: WebhookRun
    from_: RunStatusName | Literal[NEW] = Field(
        alias="from", description="The run's status before; 'new' for a run just started.")
    to: RunStatusName
    at: IsoTime = Field(description="When the change was written (not when it was sent), "
                                    "with its UTC offset.")


class RunStepCompleted(Schema):
    delivery_id: UUID = Field(description="The same on every attempt of this delivery (and "
                                           "in X-Webhook-Id): drop a second copy.")
    type: Literal["run.step_completed"]
    run: WebhookRun
    from_: RunStatusName | Literal[""] = Field(
        alias="from", description="The run's status before the step's outcome, when the "
                                  "outcome's record says it; else empty.")
    to: RunStatusName | Literal[""] = Field(
        description="The run's status after the step's outcome, when the record says it "
                    "(else as `from`).")
    at: IsoTime = Field(description="When the outcome was written (not when it was sent), "
                                    "with its UTC offset.")
    step: WebhookStep
