"""The lease holder's transitions of an agent step's model turns: the cancel request read
before each turn is asked, the model's answer stored (with a row per tool call it asks
for) before anything it asks for runs, and the stop when the step's turn, call or token
budget is spent (which one: agent_budgets). The tool calls' own checkpoints are
agent_calls'. Each, rolled back by the database for a clash with another session, is written
again from the rows as the database holds them (clashes)."""

import hashlib
import json
import logging
import math
from dataclasses import replace
from datetime import datetime

from pydantic import BaseModel, ValidationError

from audit.actions import AuditAction
from audit.redaction import REDACTED, mask_held_at, redact, redact_text

from ...agent_models import AgentTurn, ToolCall
from ...definitions import definition
from ...models import AttentionReason, ErrorClass, Run, Step, StepStatus
from .. import artifacts, sensitive
from ..keys import tool_call_key, tool_compensation_key
from ..storable import (
    NotFinite,
    TooManyDigits,
    finite_json,
    printable,
    text_problem,
    value_problem,
)
from .agent_budgets import turn_stops
from .agent_calls import (
    ModelTurn,
    S,
    agent_spec,
    args_hash,
    call_data,
)
from .clashes import written_again_on_clash
from .kernel import ATTENTION, Lease, audit_state, halt
from .lease_cycle import holding
from .repeats import repeats_take_open_keys

logger = logging.getLogger(__name__)
# The columns what the model hands over is kept in (runs.agent_models): a text longer than
# its column, or a token count past PostgreSQL's integer, fails the turn's checkpoint.
REF_MAX, FINISH_MAX, CALL_ID_MAX, TOKENS_MAX = 200, 40, 200, 2**31 - 1
# How much of arguments over RUNS_TOOL_ARGUMENTS_MAX_BYTES is kept as evidence (characters),
# as of arguments that are no JSON (_new_call's "unparsed").
ARGUMENTS_KEPT = 2000


def stop_if_cancelled(lease: Lease, step: Step, *, where: str) -> Lease:
    """Read the run's cancel request before work the lease holder is about to start (a
    model turn); if there is one, the run stops here. A plain read first: the lock is taken
    only when a cancel is pending; the stop, rolled back for a clash, is written again
    (clashes)."""
    if Run.objects.filter(pk=lease.run.pk, cancel_requested=True).exists():
        return written_again_on_clash(
            lease, step, f"the cancel {where} of step {step.name}",
            lambda step: stop_if_cancelled_once(lease, where))
    return lease


def stop_if_cancelled_once(lease: Lease, where: str) -> Lease:
    with holding(lease, "agent_turn", cancel_before=where):
        pass
    return lease


def record_agent_turn(lease: Lease, step: Step, turn: ModelTurn, *,
                      now: datetime | None = None) -> Lease:
    """Store the model's answer before any tool it asks for runs, with a row per tool call
    (its key fixed by its place in the conversation). Arguments that fail the tool's schema,
    or are over RUNS_TOOL_ARGUMENTS_MAX_BYTES, are kept as evidence and never executed; a
    turn asking for more calls than one may (artifacts.turn_calls_limit) is stored with none
    of them (AgentTurn.refused), counted as a schema error; past
    the step's schema error budget, or for a tool the step does not declare, or past the
    turn, call or token budget, the run stops for a person, saying which. Rolled back by
    the database for a clash with another session, the answer is stored again from the rows
    as the database holds them (clashes): the model is never asked again for it."""
    spec = agent_spec(lease, step)
    turn, notes, problems = storable_turn(turn, spec.budget.max_calls_per_turn)
    if notes:
        logger.warning("%s: the model's answer held what cannot be stored as sent: %s",
                       step.name, "; ".join(notes))
    return written_again_on_clash(
        lease, step, f"the model's turn of step {step.name}",
        lambda step: record_agent_turn_once(lease, step, spec, turn, notes, problems, now))


def record_agent_turn_once(lease: Lease, step: Step, spec: definition.AgentSpec,
                           turn: ModelTurn, notes: list[str], problems: dict[int, str],
                           now: datetime | None) -> Lease:
    with holding(lease, "agent_turn", now) as change:
        if change is None:
            return lease
        now = change.now
        index = AgentTurn.objects.filter(step=step, generation=step.generation).count()
        turn = with_call_ids(turn, index)
        AgentTurn.objects.create(
            step=step, generation=step.generation, index=index, content=turn.content or "",
            tool_calls=masked_calls(sensitive.seal_asked_calls(turn.tool_calls, spec.tools)),
            finish_reason=turn.finish_reason, model_ref=turn.model_ref,
            prompt_tokens=turn.prompt_tokens, completion_tokens=turn.completion_tokens,
            summarises=turn.summarises, transcript=turn.transcript, refused=turn.refused,
            sealed_content=turn.sealed_content, created_at=now)
        rows, invented, invalid = [], [], []
        for position, asked in enumerate(turn.tool_calls):
            row = _new_call(change.run, step, spec, index, position, asked, now,
                            problem=problems.get(position, ""))
            rows.append(row)
            if row.tool not in spec.tools:
                invented.append(row.tool)
            elif row.status == S.INVALID:
                invalid.append(row)
        same_key_as = repeats_take_open_keys(step, rows)
        ToolCall.objects.bulk_create(rows)
        change.audit(AuditAction.AGENT_TURN_STORED, step=step, data={
            "turn": index, "content": turn.content[:500] if turn.content else "",
            "tool_calls": [f"{r.ref} {r.tool}" for r in rows],
            # Not "tokens": a key naming a token is masked as a credential would be.
            "usage": {"prompt": turn.prompt_tokens, "completion": turn.completion_tokens},
            "model_ref": turn.model_ref,
            # What the model sent that could not be kept as sent, and what was kept instead.
            **({"stored_otherwise": notes} if notes else {}),
            **({"summarises": turn.summarises} if turn.summarises else {}),
            **({"refused": turn.refused} if turn.refused else {}),
            # A repeat of a call a person settled as not done is sent under that call's key.
            **({"same_key_as": same_key_as} if same_key_as else {}),
            # The chain vouches for the transcript too: its artifact can be checked by hash.
            **({"transcript_sha256": turn.transcript["sha256"]} if turn.transcript else {})})
        for row in invalid:
            change.audit(AuditAction.TOOL_CALL_INVALID, step=step,
                         data=call_data(row, error=row.error_message,
                                         arguments=sensitive.shown(spec.tools[row.tool],
                                                                   row.arguments)))
        stop = turn_stops(step, spec, invented)
        if stop is not None:
            reason, message = stop
            before = audit_state(change.run, step)
            step.status = StepStatus.FAILED
            step.error_class = ErrorClass.MODEL_FORMAT if reason == \
                AttentionReason.MODEL_OUTPUT_PAUSED else ErrorClass.EXHAUSTED
            step.error_message = message
            step.lease_owner, step.lease_expires_at = "", None
            change.step_changed(step)
            halt(change, lease, step, before, ATTENTION, reason, f"{step.name}: {message}", message)
    return lease


def storable_turn(turn: ModelTurn, calls_declared: int | None = None
                  ) -> tuple[ModelTurn, list[str], dict[int, str]]:
    """The model's answer as the database can keep it, checked in this one place before the
    turn is stored (a model is a neighbour that may misbehave: a turn that fails its
    checkpoint would be asked again at every attempt). Returns the turn, notes for a person
    on what was kept otherwise than sent, and why each tool call (by position) is invalid.

    Content: a NUL written out (printable), a value that is no text as its JSON text, cut
    past RUNS_AGENT_TEXT_MAX_CHARS saying how long it was. More tool calls than one turn may
    ask for (`calls_declared`, the agent's, within RUNS_AGENT_TURN_MAX_TOOL_CALLS): none is
    kept, the turn says why (refused).
    model_ref and finish_reason only name the completion for a person: cut to their
    columns, said so. Token counts that are no whole number in the column's range count 0,
    said so. A call whose id holds a NUL or is longer than its column is invalid (a model
    format error, never executed): the id is what its result is matched to in the
    conversation, and a changed id is not the one the model sent; it is kept cut and
    written out, the same in the raw calls and the call's row so the conversation still
    pairs them. A name with a NUL is written out and so names no declared tool. Raw
    arguments that value_problem refuses are kept as their printable JSON text; raw
    arguments over RUNS_TOOL_ARGUMENTS_MAX_BYTES make the call invalid, kept as their start,
    size and sha256."""
    notes: list[str] = []
    content = _text_of(turn.content)
    if content != turn.content and turn.content is not None:
        notes.append("content " + ("written out where it held what text cannot"
                                   if isinstance(turn.content, str) else
                                   f"was {type(turn.content).__name__}, kept as its JSON text"))
    # A checkpoint never holds a credential in clear (results and errors are redacted too):
    # what looks like one in the model's text is masked in the turn stored and shown, and
    # the text as written is kept sealed for the model alone (AgentTurn.sealed_content).
    written = content
    if (masked := redact_text(content)) != content:
        notes.append("content: what looks like a credential masked (kept sealed for the "
                     "model)")
        content = masked
    if len(content) > (most := artifacts.text_limit()):
        # A final answer this long is whole in its artifact (runs.agents.turn_bounds).
        notes.append(f"content of {len(content):,} characters cut to its {most:,} "
                     "(RUNS_AGENT_TEXT_MAX_CHARS)" + (
                         ", kept whole as an artifact" if turn.transcript and
                         not turn.summarises else ""))
        content, written = cut_text(content, most), cut_text(written, most)
    fields = {"content": content, "refused": too_many_calls(turn.tool_calls, calls_declared),
              "sealed_content": sensitive.encrypt(written) if written != content else ""}
    if fields["refused"]:
        notes.append(fields["refused"])
        turn = replace(turn, tool_calls=[])
    for name, most in (("model_ref", REF_MAX), ("finish_reason", FINISH_MAX)):
        sent = getattr(turn, name)
        kept = _text_of(sent)
        if len(kept) > most:
            notes.append(f"{name} of {len(kept):,} characters cut to its {most}")
            kept = kept[:most]
        elif kept != (sent or ""):
            notes.append(f"{name} written out: {kept!r}")
        fields[name] = kept
    for name in ("prompt_tokens", "completion_tokens"):
        sent = getattr(turn, name)
        fields[name] = _whole(sent)
        if fields[name] is None:
            fields[name] = 0
            notes.append(f"{name} {str(sent)[:40]!r} is no whole number from 0 to "
                         f"{TOKENS_MAX:,}: counted as 0")
    kept = [_storable_call(asked) for asked in turn.tool_calls or []]
    # Every id the model sent, so that an id given to a repeat is none of them either.
    taken = {call["id"] for call, _ in kept if call.get("id")}
    calls, problems, ids = [], {}, {}
    for position, (call, problem) in enumerate(kept):
        if call.get("id") and call["id"] in ids:
            # A result is paired with its call by id: two calls under one id could not be
            # told apart (an endpoint refuses such a conversation, once both effects are
            # made). The later one is kept under an id of its own, never executed.
            first = call["id"]
            call["id"] = own_id(first, f"~repeat-{position}", taken)
            problem = problem or (f"its id {first[:60]!r} repeats tool call {ids[first]}'s in "
                                  "this turn: kept as " f"{call['id'][-60:]!r}, not executed")
        elif call.get("id"):
            ids[call["id"]] = position
        calls.append(call)
        if problem:
            problems[position] = problem
            notes.append(f"tool call {position}: {problem}")
    return replace(turn, tool_calls=calls, **fields), notes, problems


def cut_text(text: str, most: int) -> str:
    return f"{text[:most]}… (cut: {len(text):,} characters in all)"


def kept_text(value) -> str:
    """A turn's text as storable_turn keeps it, before it is cut to its bound."""
    return redact_text(_text_of(value))


def too_many_calls(asked, declared: int | None = None) -> str:
    """Why a turn's tool calls are refused as a whole, or "": more than one turn may ask
    for. None of them is taken, so a model's thousands never become rows or effects."""
    most, bound = artifacts.turn_calls_limit(declared)
    if not isinstance(asked, list) or len(asked) <= most:
        return ""
    names = sorted({printable(str(c.get("name") or ""))[:60] if isinstance(c, dict) else ""
                    for c in asked})
    return (f"it asked for {len(asked):,} tool calls ({', '.join(map(repr, names[:5]))}"
            f"{', ...' if len(names) > 5 else ''}), more than the {most:,} one answer may "
            f"ask for ({bound})")


def with_call_ids(turn: ModelTurn, index: int) -> ModelTurn:
    """The turn with an id for each tool call the model sent none for: the id its row and
    its result in the conversation go by (call_TURN_POSITION), the same on the stored turn,
    or the conversation sent back would pair no result with its call."""
    taken = {c.get("id") for c in turn.tool_calls}
    calls = []
    for position, call in enumerate(turn.tool_calls):
        if not call.get("id"):
            ident = f"call_{index}_{position}"
            if ident in taken:
                ident = own_id(ident, f"~{position}", taken)
            taken.add(ident)
            call = {**call, "id": ident}
        calls.append(call)
    return replace(turn, tool_calls=calls)


def own_id(sent: str, tail: str, taken: set) -> str:
    """An id for a call whose id is `sent` (or none, `sent` the one it would get) and is
    another call's: `sent` ending in `tail`, cut to fit the column, and none of `taken` (the
    ids sent or given in the turn), which it joins. The model may send any id, this form
    too: a number is added until the id is the turn's own."""
    more, end = 0, tail
    while (ident := f"{sent[:CALL_ID_MAX - len(end)]}{end}") in taken:
        more += 1
        end = f"{tail}-{more}"
    taken.add(ident)
    return ident


def masked_calls(tool_calls: list[dict]) -> list[dict]:
    """The raw tool calls as the turn keeps them: the arguments of a call not sealed with
    what looks like a credential masked (its row keeps the arguments it runs with, its
    tool's declared fields sealed; the turn is only what the model is shown again)."""
    out = []
    for call in tool_calls:
        raw = call.get("arguments")
        if raw is None or sensitive.is_sealed(raw):
            out.append(call)
            continue
        try:
            value = finite_json(raw) if isinstance(raw, str) else raw
        except (ValueError, RecursionError):  # no JSON (NotFinite is one): masked as text
            masked = redact_text(raw)
        else:
            shown = redact(value)
            masked = raw if shown == value else (json.dumps(shown) if isinstance(raw, str)
                                                 else shown)
        out.append(call if masked == raw else {**call, "arguments": masked})
    return out


def _text_of(value) -> str:
    """`value` as text the database stores: a value that is no text as its JSON text."""
    if value is None:
        return ""
    return printable(value if isinstance(value, str) else _json_text(value))


def _json_text(value) -> str:
    """`value` written as JSON (NaN as JSON's readers write it), or as Python writes it
    when JSON has no form for it (a key that is no text)."""
    try:
        return json.dumps(value, default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def _whole(value) -> int | None:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= TOKENS_MAX:
        return value
    return None


def _storable_call(asked) -> tuple[dict, str]:
    """One raw tool call as kept on the turn, and why it is invalid ("" if it is not)."""
    if not isinstance(asked, dict):
        asked = {"arguments": asked}
    out, problem = {}, ""
    for field in ("id", "name"):
        sent = asked.get(field)
        if sent is None or sent == "":
            out[field] = sent
            continue
        text = sent if isinstance(sent, str) else str(sent)
        why = text_problem(text)
        text = printable(text)
        if field == "id" and len(text) > CALL_ID_MAX:
            why = why or f"{len(text):,} characters, longer than the {CALL_ID_MAX} kept"
            text = text[:CALL_ID_MAX]
        if why and not problem:
            problem = f"the call's {field} cannot be stored as sent ({why}): kept as " \
                      f"{text[:60]!r}{'...' if len(text) > 60 else ''}, not executed"
        out[field] = text
    raw = asked.get("arguments")
    too_large = _too_large(raw)
    if too_large is not None:
        # Never executed, and never kept whole: the turn is sent back to the model at every
        # turn after it, and its row would carry the megabytes too.
        raw, why = too_large
        problem = problem or why
    elif value_problem(raw) is not None:
        raw = printable(raw if isinstance(raw, str) else _json_text(raw))
    out["arguments"] = raw
    return out, problem


def _too_large(raw) -> tuple[str, str] | None:
    """Arguments over RUNS_TOOL_ARGUMENTS_MAX_BYTES: what is kept of them instead (their
    start, size and sha256, as JSON text) and why the call is invalid; or None. A schema
    error like any other: counted against the same budget, and the model is told."""
    text = raw if isinstance(raw, str) else _json_text(raw)
    body = text.encode(errors="surrogatepass")
    most = artifacts.arguments_limit()
    if len(body) <= most:
        return None
    kept = json.dumps({"arguments_start": printable(text[:ARGUMENTS_KEPT]),
                       "size": len(body), "sha256": hashlib.sha256(body).hexdigest()})
    return kept, (f"the arguments are {len(body):,} bytes, over the limit of {most:,} bytes "
                  "(RUNS_TOOL_ARGUMENTS_MAX_BYTES)")


def _new_call(run: Run, step: Step, spec: definition.AgentSpec, turn: int, position: int,
              asked: dict, now: datetime, *, problem: str = "") -> ToolCall:
    name = str(asked.get("name") or "")[:200]
    tool = spec.tools.get(name)
    key = tool_call_key(run.workflow_name, run.business_key, step.name, step.version, turn,
                        position, name, step.generation)
    row = ToolCall(step=step, generation=step.generation, turn=turn, index=position,
                   call_id=str(asked.get("id") or f"call_{turn}_{position}"), tool=name,
                   idempotency_key=key, updated_at=now,
                   kind=tool.kind if tool else "", impact=tool.impact if tool else "")
    raw = asked.get("arguments") or "{}"
    try:
        parsed = finite_json(raw) if isinstance(raw, str) else raw
    except NotFinite as exc:
        # Read as JSON by Python, refused by jsonb: kept as text, as arguments that are not.
        parsed = {"unparsed": printable(str(raw)[:2000])}
        row.error_message = f"the arguments hold {exc.texts[0]}, not a finite number"
    except TooManyDigits as exc:
        # JSON, but not JSON Python reads: the model is told which number, not "not JSON".
        parsed = {"unparsed": printable(str(raw)[:2000])}
        row.error_message = f"the arguments hold {exc}"
    except ValueError:
        parsed = {"unparsed": printable(str(raw)[:2000])}
        row.error_message = "the arguments are not JSON"
    except RecursionError:
        # JSON nested deeper than Python reads it: no arguments, and no turn stored if it
        # escaped (the model asked again at every attempt).
        parsed = {"unparsed": printable(str(raw)[:2000])}
        row.error_message = "the arguments are JSON nested too deep to be read"
    else:
        if (unstorable := value_problem(parsed)) is not None:
            parsed = {"unparsed": printable(str(raw)[:2000])}
            row.error_message = f"the arguments cannot be stored: {unstorable}"
        elif (where := mask_held_at(parsed)) is not None:
            # The model can only have read the mask where a value was masked for it: made,
            # the call would act on the mask (a payment to "[redacted]"), and an approver
            # sees a sealed field shown the same way.
            row.error_message = (f"{where or 'the arguments'} is {REDACTED!r}, the mark of a value "
                                 "masked where it was shown, not a value to act on")
    if tool is None:
        row.status, row.arguments = S.INVALID, redact(parsed)
        row.error_class = ErrorClass.MODEL_FORMAT
        row.error_message = (f"{problem}; " if problem else "") + \
            f"no tool named {name!r}: the step declares {', '.join(spec.tools) or 'none'}"
    elif row.error_message or problem:
        # Never executed: kept as evidence, with what looks like a credential masked.
        row.status, row.arguments = S.INVALID, redact(parsed)
        row.error_class = ErrorClass.MODEL_FORMAT
        row.error_message = "; ".join(m for m in (problem, row.error_message) if m)
    else:
        try:
            valid: BaseModel = tool.args.model_validate(parsed)
        except ValidationError as exc:
            row.status, row.arguments = S.INVALID, redact(parsed)
            row.error_class = ErrorClass.MODEL_FORMAT
            row.error_message = (f"arguments do not match {tool.args.__name__}: "
                                 f"{exc.error_count()} error(s): " + "; ".join(
                                     f"{'.'.join(map(str, e['loc'])) or 'arguments'}: "
                                     f"{e['msg']}" for e in exc.errors()[:3]))
        else:
            row.arguments = valid.model_dump(mode="json")
            if tool.compensate_fn is not None:
                row.compensation_key = tool_compensation_key(key)
    # The hash covers the arguments in clear (an approval is of what is sent); the row
    # keeps the declared fields sealed.
    row.args_hash = args_hash(row.arguments)
    row.arguments = sensitive.seal_arguments(row.arguments, tool, spec.tools)
    if row.status == S.INVALID:
        row.finished_at = now
    return row


def agent_budget_spent(lease: Lease, step: Step, message: str, *,
                       now: datetime | None = None) -> Lease:
    """Stop before asking the model again: a budget is spent. Rolled back for a clash, the
    stop is written again (clashes)."""
    return written_again_on_clash(
        lease, step, f"the spent budget of step {step.name}",
        lambda step: agent_budget_spent_once(lease, step, message, now))


def agent_budget_spent_once(lease: Lease, step: Step, message: str,
                            now: datetime | None) -> Lease:
    with holding(lease, "agent_turn", now) as change:
        if change is None:
            return lease
        before = audit_state(change.run, step)
        step.status, step.error_class, step.error_message = (StepStatus.FAILED,
                                                            ErrorClass.EXHAUSTED, message)
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
        halt(change, lease, step, before, ATTENTION, AttentionReason.BUDGET_EXHAUSTED,
              f"{step.name}: {message}", message)
    return lease
