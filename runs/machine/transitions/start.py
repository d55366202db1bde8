"""Starting a run: the (workflow, business key) identity, input validation, the steps and
their stable keys, all in one transaction or not at all."""

import json
import unicodedata
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from audit.actions import AuditAction
from audit.chain import Actor
from audit.quoting import file_name, quoted

from ... import store
from ...definitions import definition
from ...definitions.input_errors import input_errors_text
from ...models import (
    Run,
    RunEvent,
    Step,
)
from .. import artifacts, retention, tracing
from ..errors import (
    BusinessKeyConflict,
    InvalidInput,
    RunArchived,
    UnknownWorkflow,
)
from ..keys import compensation_key, step_key
from ..storable import has_control_characters, text_problem
from ..wakeup import wake_after_commit
from . import wait_functions
from .kernel import (  # the package's shared vocabulary
    NEW,
    QUEUED,
    Change,
    input_hash,
    transition_time,
)

BUSINESS_KEY_MAX = Run._meta.get_field("business_key").max_length

def _storable(text: str) -> bool:
    # The JSON of an input writes a NUL as its escape, which jsonb refuses too.
    return "\\u0000" not in text and text_problem(text) is None


def _refuse_if_archived(workflow: str, business_key: str, digest: str) -> None:
    # One probe of a unique index per new run (see runs.machine.retention).
    archived = retention.archived_run(workflow, business_key)
    if archived is None:
        return
    same = archived.input_hash == digest
    raise RunArchived(
        f"business key {business_key!r} of {workflow} belongs to run "
        f"{archived.original_run_id}, which finished ({archived.final_status}) and was "
        f"archived to {file_name(archived.archive_file.name)}; nothing was started"
        + ("" if same else " (and this input differs from that run's)"),
        archived=archived, same_input=same)


def checked_input(workflow_def: definition.Workflow, input) -> dict:
    """`input` as a run of `workflow_def` keeps it, or InvalidInput naming what is wrong: the
    schema's refusal, text the database cannot store, or a size over RUNS_INPUT_MAX_BYTES.
    Each error's `loc` is within the input, as the schema's are: [] for the whole of it.
    Half of a start's check of its input (admitted_input)."""
    workflow = workflow_def.name
    validated, errors = workflow_def.parse_input(input, to_its_sender=True)
    if errors:
        raise InvalidInput(f"input for {workflow} does not match its schema: "
                           f"{input_errors_text(errors)}", errors=errors)
    data = validated.model_dump(mode="json")
    if not _storable(json.dumps(data, ensure_ascii=False)):
        raise InvalidInput(f"input for {workflow} holds NUL characters or unpaired surrogates, "
                           "which cannot be stored", errors=[{"loc": [],
                                                              "msg": "not storable"}])
    if (size := artifacts.over_input_limit(data)) is not None:
        raise InvalidInput(
            f"input for {workflow} is {size:,} bytes, over the limit of "
            f"{artifacts.input_limit():,} bytes (RUNS_INPUT_MAX_BYTES)",
            errors=[{"loc": [], "msg": "too large"}])
    return data


def refuse_waits_the_input_fails(workflow_def: definition.Workflow, data: dict,
                                 business_key: str) -> None:
    """InvalidInput naming each wait of `workflow_def` whose function of the input (a sleep's
    until, an event wait's correlate) raises, or gives what the wait cannot use, called with
    `data` as the run would hold it, by the rules the wait applies when the run reaches it
    (wait_functions): what depends only on the input (a key it lacks, a datetime without a
    time zone) is told to whoever starts the run, with nothing written, instead of holding
    the run at the wait weeks later. A function that fails for every input is refused so
    too. Both take the input alone (definition.validation.input_function_check)."""
    problems = []
    for spec in workflow_def.steps:
        try:
            if spec.kind == definition.SLEEP and spec.sleep_until is not None:
                wait_functions.until_time(spec, _as_stored(data))
            elif spec.kind == definition.EVENT and spec.correlate is not None:
                wait_functions.correlation_key(spec, _as_stored(data), business_key)
        except wait_functions.WaitFunctionFailed as exc:
            problems.append(f"step {spec.name!r}: {exc}")
        except wait_functions.TimeNotKept as exc:
            problems.append(f"step {spec.name!r}: its until(input) returned a time the "
                            f"database cannot keep: {exc}")
    if problems:
        raise InvalidInput(f"input for {workflow_def.name} is refused: {'; '.join(problems)}",
                           errors=[{"loc": [], "msg": problem} for problem in problems])


def admitted_input(workflow_def: definition.Workflow, input, *, business_key: str) -> dict:
    """`input` as a run of `workflow_def` under `business_key` keeps it, or InvalidInput
    naming what is wrong: the schema, what the database can store (checked_input), then each
    wait's function of it (refuse_waits_the_input_fails). The one check of a start's input,
    which a schedule's fixed input is held to when it is declared and once the workflow
    modules are loaded (runs.waiting.schedule_input)."""
    data = checked_input(workflow_def, input)
    refuse_waits_the_input_fails(workflow_def, data, business_key)
    return data


def _as_stored(data: dict) -> dict:
    # As the run's column gives it back, and a copy of its own: a function that changes what
    # it is given changes neither what is stored nor what the next one is given.
    return json.loads(json.dumps(data, ensure_ascii=False))


def start_run(*, workflow: str, business_key: str, input: dict, actor: Actor,
              now: datetime | None = None, wake: bool = True,
              guard: Callable[[], None] | None = None,
              drill: bool = False) -> tuple[Run, bool]:
    """Start a run of the latest version of `workflow`, or find the one already started.

    Returns (run, created). The same (workflow, business key, input) delivered twice, or by
    two processes at once, gives one run. The same business key with a different input, an
    unknown workflow, input that fails the workflow's schema and input a wait's until() or
    correlate() fails with (refuse_waits_the_input_fails) are refused with an error naming
    the problem, and nothing is written. With wake=False no worker is told about the
    new run (the caller advances it itself, as the drill kit does); the sweeper still finds
    it if nobody does.

    `guard`, if given, is called in the transaction that creates the run, just before the
    insert: a row it locks stays locked until the run is committed, and what it raises
    leaves nothing written and reaches the caller. A caller whose own state may forbid the
    run (a schedule paused meanwhile) checks it there, so that the check and the creation
    cannot interleave with a change of that state.

    `drill`: a drill run (runs.operator.drills), so flagged in the statement that makes it:
    not for an instant is it work the lists, counts, subscribers or a fleet's worker take
    for real.
    """
    workflow_def = definition.registry.latest(workflow)
    if workflow_def is None:
        raise UnknownWorkflow(f"unknown workflow {quoted(workflow)}; registered: "
                              f"{', '.join(definition.registry.names()) or 'none'}")
    # Blank counts as empty: a key of spaces names nothing a person could tell apart.
    if not isinstance(business_key, str) or not business_key.strip():
        raise InvalidInput("business key must be a non-empty string, not only spaces",
                           errors=[{"loc": ["business_key"], "msg": "required"}])
    # Two keys that differ by a space at an end would start two runs of one business
    # object that no list or page tells apart (and a search by the key's end misses one).
    if business_key != business_key.strip():
        raise InvalidInput(
            f"business key must not begin or end with spaces: {business_key[:80]!r}",
            errors=[{"loc": ["business_key"], "msg": "begins or ends with spaces"}])
    if len(business_key) > BUSINESS_KEY_MAX or not _storable(business_key):
        raise InvalidInput(
            f"business key must be at most {BUSINESS_KEY_MAX} characters of text without NUL "
            "or unpaired surrogates",
            errors=[{"loc": ["business_key"], "msg": "too long or not storable"}])
    # A key whose accents are written apart ("cafe" and a combining accent) looks like the
    # composed one everywhere and would start a run of its own, as a space at an end would.
    if not unicodedata.is_normalized("NFC", business_key):
        raise InvalidInput(
            "business key must be in Unicode's composed form (NFC: an accented letter as one "
            f"character, not a letter and a combining accent): {business_key[:80]!r}",
            errors=[{"loc": ["business_key"], "msg": "not in Unicode NFC form"}])
    # A business key ends up in mail subjects, log lines and file names.
    if has_control_characters(business_key):
        raise InvalidInput(
            "business key must not contain control characters (line breaks, tabs, Unicode "
            "line or paragraph separators, bidirectional controls, ...)",
            errors=[{"loc": ["business_key"], "msg": "contains control characters"}])
    data = admitted_input(workflow_def, input, business_key=business_key)
    digest = input_hash(data)
    now = transition_time(now)
    db = store.current()
    if connection.atomic_blocks and not connection.atomic_blocks[-1]._from_testcase:
        # The one statement below commits on its own, as a durable atomic block would.
        raise RuntimeError("start_run commits on its own: call it outside any transaction")
    tombstones = retention.archived_table()
    if tombstones is None:
        _refuse_if_archived(workflow, business_key, digest)  # a lookup without a table
    for _ in range(3):
        run, steps, change = _new_rows(workflow_def, workflow=workflow,
                                       business_key=business_key, data=data, digest=digest,
                                       actor=actor, now=now, drill=drill,
                                       run_id=db.next_run_id())
        # One statement (runs.store), its own transaction: the run, its steps, its first
        # audit record and its progress event, or nothing if the key is taken. The key is
        # free only if the statement's snapshot holds neither a run nor a tombstone for it.
        # Archiving deletes the run and writes its tombstone in one transaction, so one
        # snapshot sees exactly one of them (or the run while archiving is under way): the
        # insert never reuses the key of an archived run, even when it waits on the
        # archiving transaction.
        try:
            with _insert_transaction(guard):
                workflow_id = db.insert_run_if_new(
                    run=run, steps=steps, records=change.records, events=change.events,
                    tombstones=tombstones)
        except IntegrityError as exc:
            if not db.start_may_try_again(exc):
                raise
            continue
        if workflow_id is not None:
            run.workflow_id = workflow_id
            run._state.adding, run._state.db = False, connection.alias
            if wake:
                wake_after_commit(run.pk)
            tracing.run_started(run)
            return run, True
        # Taken: by another delivery of this event (same input, the same run), by a
        # different input, or by an archived run.
        existing = Run.objects.filter(workflow_name=workflow, business_key=business_key).first()
        if existing is not None:
            if not _same_start(existing, workflow_def, digest):
                raise BusinessKeyConflict(
                    f"business key {business_key!r} of {workflow} is already used by run "
                    f"{existing.pk} with a different input", run_id=existing.pk,
                )
            return existing, False
        _refuse_if_archived(workflow, business_key, digest)
        # The run this statement saw was removed since (not archived): try again.
    raise RuntimeError(f"business key {business_key!r} of {workflow} kept changing hands; "
                       "nothing was started")


def _same_start(existing: Run, workflow_def: definition.Workflow, digest: str) -> bool:
    """Whether the input whose digest is `digest`, as `workflow_def` (the newest version)
    reads it, is the one `existing` was started with, as that version reads it too. A start
    sent again after a release gave the input a field with a default is read with the field
    filled in: the same request, which compared with the run's stored input alone was
    refused as another input. One that sets the new field otherwise is another input."""
    if existing.input_hash == digest:
        return True
    if existing.workflow_version == workflow_def.version:
        return False
    try:
        return input_hash(checked_input(workflow_def, existing.input)) == digest
    except InvalidInput:
        return False


@contextmanager
def _insert_transaction(guard: Callable[[], None] | None):
    if guard is None:
        with _savepoint_if_nested():
            yield
        return
    # The guard's check and the insert commit together: what it locked cannot change
    # between them.
    with store.current().transaction():
        guard()
        yield


def _savepoint_if_nested():
    # Inside a test's transaction a failed statement needs a savepoint to roll back to;
    # outside any (production) the statement is its own transaction and needs none.
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


def _new_rows(definition, *, workflow: str, business_key: str, data: dict, digest: str,
              actor: Actor, now: datetime, run_id: int | None, drill: bool = False):
    """The unsaved run, its steps and the change holding its first audit record and
    progress event (chained from `run_id`, which the hash covers)."""
    run = Run(pk=run_id, workflow_name=workflow, workflow_version=definition.version,
              business_key=business_key, input=data, input_hash=digest,
              status=QUEUED, step_count=len(definition.steps),
              current_step=definition.steps[0].name if definition.steps else "",
              created_at=now, updated_at=now, drill=drill)
    steps = _step_rows(definition, workflow=workflow, business_key=business_key,
                       run_id=run_id, now=now)
    return run, steps, _first_change(run, definition, digest=digest, actor=actor, now=now)


def _step_rows(definition, *, workflow: str, business_key: str, run_id: int | None,
               now: datetime) -> list[dict]:
    """The rows of a new run's steps, each with its idempotency key (and its compensation's)."""
    steps = []
    for s, template in zip(definition.steps, _step_templates(definition), strict=True):
        row = dict(template, run_id=run_id, updated_at=now,
                   idempotency_key=step_key(workflow, business_key, s.name, s.version))
        if s.compensate_fn:
            row["compensation_key"] = compensation_key(workflow, business_key, s.name,
                                                       s.version)
        steps.append(row)
    return steps


def _first_change(run: Run, definition, *, digest: str, actor: Actor,
                  now: datetime) -> Change:
    """The start transition of `run`: its first audit record and its progress event."""
    change = Change(run, "start", actor, now, status=NEW)
    change.audit(AuditAction.STARTED, before={"status": NEW}, after={"status": QUEUED},
                 data={"version": definition.version, "input_hash": digest})
    change.events.append(RunEvent(run_id=run.pk, status_from=NEW, status_to=QUEUED,
                                  created_at=now))
    return change


# A workflow definition's step rows with everything but the run, the keys and the time:
# built once per definition, copied per run.
_TEMPLATES: dict[int, tuple] = {}


def _step_templates(definition) -> list[dict]:
    cached = _TEMPLATES.get(id(definition))
    if cached is None or cached[0] is not definition:
        rows = [_step_row_template(
                    Step(name=s.name, position=i, kind=s.kind, impact=s.impact,
                         version=s.version))
                for i, s in enumerate(definition.steps)]
        cached = _TEMPLATES[id(definition)] = (definition, rows)
    return cached[1]


def _step_row_template(step: Step) -> dict:
    """`step`'s columns as the store's insert_run_if_new takes them (a dict to copy and fill
    in per run, cheaper than a model instance per step)."""
    return {f.column: getattr(step, f.attname)
            for f in Step._meta.concrete_fields if not f.primary_key}
