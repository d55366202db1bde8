"""Starting a run: the (workflow, business key) identity, input validation, the steps and
their stable keys, all in one transaction or not at all."""

import json
from datetime import datetime

from django.db import IntegrityError, transaction
from pydantic import ValidationError

from audit.actions import AuditAction
from audit.chain import Actor

from .. import artifacts, retention
from .. import definition as d
from ..errors import (
    BusinessKeyConflict,
    InvalidInput,
    RunArchived,
    UnknownWorkflow,
)
from ..keys import compensation_key, step_key
from ..models import (
    Run,
    RunEvent,
    Step,
    Workflow,
)
from .kernel import (  # the package's shared vocabulary
    NEW,
    Q,
    _Change,
    _now,
    input_hash,
)

BUSINESS_KEY_MAX = Run._meta.get_field("business_key").max_length

def _control_characters(text: str) -> bool:
    # A business key ends up in mail subjects, log lines and file names: no line breaks,
    # no other control characters.
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)

def _storable(text: str) -> bool:
    # PostgreSQL text and jsonb refuse NUL and lone surrogates; refuse them up front.
    if "\x00" in text or "\\u0000" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

def _refuse_if_archived(workflow: str, business_key: str, digest: str) -> None:
    # One probe of a unique index per new run (see runs.retention).
    archived = retention.archived_run(workflow, business_key)
    if archived is None:
        return
    same = archived.input_hash == digest
    raise RunArchived(
        f"business key {business_key!r} of {workflow} belongs to run "
        f"{archived.original_run_id}, which finished ({archived.final_status}) and was "
        f"archived to {archived.archive_file.name}; nothing was started"
        + ("" if same else " (and this input differs from that run's)"),
        archived=archived, same_input=same)


def start_run(*, workflow: str, business_key: str, input: dict, actor: Actor,
              now: datetime | None = None, wake: bool = True) -> tuple[Run, bool]:
    """Start a run of the latest version of `workflow`, or find the one already started.

    Returns (run, created). The same (workflow, business key, input) delivered twice, or by
    two processes at once, gives one run. The same business key with a different input, an
    unknown workflow and input that fails the workflow's schema are refused with an error
    naming the problem, and nothing is written. With wake=False no worker is told about the
    new run (the caller advances it itself, as the drill kit does); the sweeper still finds
    it if nobody does.
    """
    definition = d.registry.latest(workflow)
    if definition is None:
        raise UnknownWorkflow(f"unknown workflow {workflow!r}; registered: "
                              f"{', '.join(d.registry.names()) or 'none'}")
    if not business_key or not isinstance(business_key, str):
        raise InvalidInput("business key must be a non-empty string",
                           errors=[{"loc": ["business_key"], "msg": "required"}])
    if len(business_key) > BUSINESS_KEY_MAX or not _storable(business_key):
        raise InvalidInput(
            f"business key must be at most {BUSINESS_KEY_MAX} characters of text without NUL "
            "or unpaired surrogates",
            errors=[{"loc": ["business_key"], "msg": "too long or not storable"}])
    if _control_characters(business_key):
        raise InvalidInput(
            "business key must not contain control characters (line breaks, tabs, ...)",
            errors=[{"loc": ["business_key"], "msg": "contains control characters"}])
    try:
        validated = definition.input_schema.model_validate(input)
    except ValidationError as exc:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in errors)
        raise InvalidInput(f"input for {workflow} does not match its schema: {fields}",
                           errors=errors) from None
    data = validated.model_dump(mode="json")
    if not _storable(json.dumps(data, ensure_ascii=False)):
        raise InvalidInput(f"input for {workflow} holds NUL characters or unpaired surrogates, "
                           "which cannot be stored", errors=[{"loc": ["input"],
                                                              "msg": "not storable"}])
    size = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())
    if size > artifacts.input_limit():
        raise InvalidInput(
            f"input for {workflow} is {size:,} bytes, over the limit of "
            f"{artifacts.input_limit():,} bytes (RUNS_INPUT_MAX_BYTES)",
            errors=[{"loc": ["input"], "msg": "too large"}])
    digest = input_hash(data)
    now = _now(now)

    with transaction.atomic(durable=True):
        row, _ = Workflow.objects.get_or_create(name=workflow)
        try:
            with transaction.atomic():
                run = Run.objects.create(
                    workflow=row, workflow_name=workflow, workflow_version=definition.version,
                    business_key=business_key, input=data, input_hash=digest,
                    status=Q, step_count=len(definition.steps),
                    current_step=definition.steps[0].name if definition.steps else "",
                    created_at=now, updated_at=now,
                )
        except IntegrityError:
            # Another delivery of this event got there first (or committed while we waited
            # on the unique index): same input means the same run.
            existing = Run.objects.filter(workflow_name=workflow,
                                          business_key=business_key).first()
            if existing is None:
                # Archived between our insert and this read (archiving writes the tombstone
                # in the transaction that deletes the row, so this read sees it).
                _refuse_if_archived(workflow, business_key, digest)
                raise
            if existing.input_hash != digest:
                raise BusinessKeyConflict(
                    f"business key {business_key!r} of {workflow} is already used by run "
                    f"{existing.pk} with a different input", run_id=existing.pk,
                ) from None
            return existing, False
        # The unique constraint protects the key only while its run is in the hot table;
        # once archived, a tombstone keeps it. Looked up after the insert, not before: an
        # insert that waited on an archiving transaction deleting the old row succeeds when
        # that commits, and this statement then sees the tombstone it committed with.
        _refuse_if_archived(workflow, business_key, digest)
        Step.objects.bulk_create([
            Step(run=run, name=s.name, position=i, kind=s.kind, impact=s.impact,
                 version=s.version,
                 idempotency_key=step_key(workflow, business_key, s.name, s.version),
                 compensation_key=(compensation_key(workflow, business_key, s.name, s.version)
                                   if s.compensate_fn else ""),
                 updated_at=now)
            for i, s in enumerate(definition.steps)
        ])
        change = _Change(run, "start", actor, now, status=NEW)
        change.audit(AuditAction.STARTED, before={"status": NEW}, after={"status": Q},
                     data={"version": definition.version, "input_hash": digest})
        change.events.append(RunEvent(run_id=run.pk, status_from=NEW, status_to=Q,
                                      created_at=now))
        change.wake = wake
        change.save()
    return run, True
