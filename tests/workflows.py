"""Workflows for the runtime's own tests, driven by a script of what each call does.

`script` plays the remote systems: it records every call with the key it carried and keeps
the effects of write steps by key (as a key-honouring receiver would), so tests can count
effects afterwards.
"""

import time
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic import BaseModel

from runs.bench_receiver import RemoteIn, declare_remote_write
from runs.definitions.declarations import tool_approval
from runs.definitions.definition import Contract, Found, NotFound, StepResult, Workflow
from runs.definitions.retry import RetryPolicy
from runs.machine import limits
from runs.machine.errors import PermanentError
from runs.waiting.schedules import Schedule


@dataclass
class Script:
    # step name -> list of things the next calls do: an exception to raise, a value to
    # return, or the string "effect-then-raise" (commit the effect, then fail unknown).
    plan: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    effects: dict = field(default_factory=dict)  # key -> remote reference
    reconcile_calls: list = field(default_factory=list)
    lookup_errors: list = field(default_factory=list)  # what the next lookups by key raise
    compensations: dict = field(default_factory=dict)  # compensation key -> reference

    def reset(self):
        self.compensations.clear()
        self.plan.clear()
        self.calls.clear()
        self.effects.clear()
        self.reconcile_calls.clear()
        self.lookup_errors.clear()

    def next_action(self, step):
        queue = self.plan.get(step)
        return queue.pop(0) if queue else None


script = Script()


class OrderIn(BaseModel):
    order: str
    amount: int = 100


class Category(BaseModel):
    category: str
    confidence: float


FAST = RetryPolicy(initial_interval=0.01, maximum_interval=0.05, maximum_attempts=3, jitter=0)

orders = Workflow("test-orders", version=1, input=OrderIn)


def _call(ctx, default):
    script.calls.append((ctx.step, ctx.key, ctx.attempt))
    action = script.next_action(ctx.step)
    if action in ("hang", "effect-then-hang"):
        # A call that never ends (a receiver dripping its answer): only its deadline stops it.
        if action == "effect-then-hang":
            script.effects.setdefault(ctx.key, f"{ctx.step}-{len(script.effects) + 1}")
        time.sleep(3600)
    if action == "effect-then-raise":
        from runs.machine.errors import UnknownOutcome

        script.effects.setdefault(ctx.key, f"{ctx.step}-{len(script.effects) + 1}")
        raise UnknownOutcome("connection reset after the request was sent")
    if isinstance(action, BaseException):
        raise action
    if callable(action):  # step code of the test's own (a long step that heartbeats)
        return action(ctx)
    if action is not None:
        return action
    return default()


@orders.read("fetch", retry=FAST)
def fetch(ctx):
    return _call(ctx, lambda: {"order": ctx.input.order, "amount": ctx.input.amount})


@orders.decision("classify", schema=Category, format_failure_budget=1, retry=FAST)
def classify(ctx):
    return _call(ctx, lambda: {"category": "office", "confidence": 0.9})


def scripted_call(ctx, default):
    """A step's call played by `script`, for workflows that test modules declare."""
    return _call(ctx, default)


def _effect(ctx):
    def commit():
        ref = script.effects.setdefault(ctx.key, f"{ctx.step}-{len(script.effects) + 1}")
        return StepResult({"ref": ref}, remote_ref=ref)

    return commit


@orders.write("create-task", retry=FAST, honours_key=True,
              contract=Contract(evidence="task id", rule="reconcile by key", owner="ops"))
def create_task(ctx):
    return _call(ctx, _effect(ctx))


@create_task.reconcile
def find_task(ctx):
    script.reconcile_calls.append((ctx.step, ctx.key))
    if script.lookup_errors:
        raise script.lookup_errors.pop(0)
    ref = script.effects.get(ctx.key)
    return Found(ref, {"ref": ref}) if ref else NotFound()


@create_task.compensate
def cancel_task(ctx):
    return _compensation(ctx)


def _compensation(ctx):
    """Undo by key: record the compensation once per compensation key."""
    def commit():
        ref = script.compensations.setdefault(ctx.key, f"undo-{ctx.step}")
        return StepResult({"undone": ctx.remote_ref}, remote_ref=ref)

    script.calls.append((f"{ctx.step}:compensate", ctx.key, ctx.attempt))
    action = script.next_action(f"{ctx.step}:compensate")
    if isinstance(action, BaseException):
        raise action
    return commit()


@orders.write("post-ledger", impact="high", retry=FAST,
              contract=Contract(evidence="ledger entry", rule="human confirmation",
                                owner="finance"))
def post_ledger(ctx):
    return _call(ctx, _effect(ctx))


@post_ledger.reconcile
def find_ledger_entry(ctx):
    script.reconcile_calls.append((ctx.step, ctx.key))
    ref = script.effects.get(ctx.key)
    return Found(ref, {"ref": ref}) if ref else NotFound()


@post_ledger.compensate
def reverse_ledger_entry(ctx):
    return _compensation(ctx)


# A saga that undoes itself by policy when a late step fails with evidence.
saga = Workflow("test-saga", version=1, input=OrderIn, auto_compensate=True)


@saga.write("reserve-stock", retry=FAST)
def reserve_stock(ctx):
    return _call(ctx, _effect(ctx))


@reserve_stock.compensate
def release_stock(ctx):
    return _compensation(ctx)


@saga.write("charge-card", retry=FAST)
def charge_card(ctx):
    return _call(ctx, _effect(ctx))


@charge_card.compensate
def refund_card(ctx):
    return _compensation(ctx)


@saga.write("book-shipment", retry=FAST)
def book_shipment(ctx):
    return _call(ctx, _effect(ctx))


# A run that waits for a person between two steps.
approval = Workflow("test-approval", version=1, input=OrderIn)


@approval.read("prepare", retry=FAST)
def prepare(ctx):
    return _call(ctx, lambda: {"order": ctx.input.order})


@approval.approval("approve", approvers=("group:approvers",), on_timeout="reject")
def approve(ctx):
    return {"order": ctx.results["prepare"]["order"], "amount": ctx.input.amount}


@approval.write("pay", retry=FAST, honours_key=True)
def pay(ctx):
    return _call(ctx, _effect(ctx))


# A workflow whose write step nothing can settle after a crash: no lookup, no key honoured.
unsafe = Workflow("test-unsafe", version=1, input=OrderIn, example={"order": "drill"})


@unsafe.write("post-unkeyed", retry=FAST,
              contract=Contract(evidence="nothing", rule="hope", owner="nobody"))
def post_unkeyed(ctx):
    return _call(ctx, _effect(ctx))


# A notification to a receiver that ignores keys but records the client reference.
messages = Workflow("test-messages", version=1, input=OrderIn)


# Declared low impact (a notify is high unless declared otherwise) to test resends.
@messages.notify("send", impact="low", retry=FAST, lookup_delay=5)
def send(ctx):
    return _call(ctx, _effect(ctx))


@send.reconcile
def find_sent(ctx):
    script.reconcile_calls.append((ctx.step, ctx.key))
    ref = script.effects.get(ctx.key)
    return Found(ref, {"ref": ref}) if ref else NotFound()


# A write to a real HTTP receiver (tests.receiver), to prove what is sent, and how often,
# when the receiver misbehaves forever.
class Receiver:
    url = ""


receiver = Receiver()
RECEIVER_POLICY = RetryPolicy(initial_interval=0.2, backoff_coefficient=2, maximum_interval=2,
                              maximum_attempts=4, jitter=0)
remote = Workflow("test-remote", version=1, input=OrderIn)


def _http(method: str, path: str, **kwargs):
    import httpx

    response = httpx.request(method, f"{receiver.url}{path}", timeout=2, **kwargs)
    response.raise_for_status()
    return response.json()


@remote.write("post-update", retry=RECEIVER_POLICY, honours_key=True,
              contract=Contract(evidence="update id", rule="reconcile by key", owner="ops"))
def post_update(ctx):
    body = _http("POST", "/updates", json={"order": ctx.input.order},
                 headers={"Idempotency-Key": ctx.key})
    return StepResult(body, remote_ref=body["id"])


def _look_up(path: str):
    import httpx

    try:
        body = _http("GET", path)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code == 404:
            return NotFound()
        raise
    return Found(body["id"], body)


@post_update.reconcile
def find_update(ctx):
    return _look_up(f"/updates/{ctx.key}")


@remote.write("post-payment", impact="high", retry=RECEIVER_POLICY, honours_key=True,
              contract=Contract(evidence="payment id", rule="reconcile by key", owner="ops"))
def post_payment(ctx):
    body = _http("POST", "/payments", json={"order": ctx.input.order},
                 headers={"Idempotency-Key": ctx.key})
    return StepResult(body, remote_ref=body["id"])


@post_payment.reconcile
def find_payment(ctx):
    return _look_up(f"/payments/{ctx.key}")


# Two workflows that share a step name, against the sandbox's tracker (which honours keys),
# and one whose step a person may also look up by its key.
def _tracker_workflow(name: str, *, looked_up: bool = False) -> Workflow:
    from demo.clients import build_services

    workflow = Workflow(name, version=1, input=OrderIn, services=build_services)

    @workflow.write("create-task", honours_key=True, retry=FAST,
                    contract=Contract(evidence="task id", rule="reconcile by key", owner="ops"))
    def create(ctx):
        task = ctx.services.tracker.create_task(key=ctx.key, title=f"{name} {ctx.input.order}",
                                                assignee="ops")
        return StepResult(task, remote_ref=task["id"])

    if looked_up:
        @create.reconcile
        def find_task(ctx):
            task = ctx.services.tracker.find_task(ctx.key)
            return NotFound() if task is None else Found(task["id"], task)

    return workflow


tracker_a = _tracker_workflow("test-tracker-a")
tracker_b = _tracker_workflow("test-tracker-b")
tracker_looked_up = _tracker_workflow("test-tracker-looked-up", looked_up=True)


# A step whose result is as large as its input says, read by the next step.
class BlobIn(BaseModel):
    order: str
    size: int = 10


big = Workflow("test-big-result", version=1, input=BlobIn)


@big.read("produce", retry=FAST)
def produce(ctx):
    return {"blob": "x" * ctx.input.size}


@big.read("consume", retry=FAST)
def consume(ctx):
    return {"length": len(ctx.results["produce"]["blob"])}


# An agent step whose tools play their remote systems through `script` (tests that place
# its tool calls by hand; the conversation tests use the demo's agent and the sandbox).
class NoteArgs(BaseModel):
    text: str


agentic = Workflow("test-agent", version=1, input=OrderIn)
assist = agentic.agent("assist", system_prompt="Take notes.")


@assist.tool("write-note", kind="write", honours_key=True, args=NoteArgs)
def write_note(ctx, args):
    """Write a note."""
    script.calls.append(("write-note", ctx.key, ctx.attempt))
    ref = script.effects.setdefault(ctx.key, f"NOTE-{len(script.effects) + 1}")
    return StepResult({"note": ref}, remote_ref=ref)


@write_note.reconcile
def find_note(ctx, args):
    script.reconcile_calls.append(("write-note", ctx.key))
    ref = script.effects.get(ctx.key)
    return Found(ref) if ref else NotFound()


@write_note.compensate
def delete_note(ctx, args):
    script.calls.append(("write-note:compensate", ctx.key, ctx.attempt))
    ref = script.compensations.setdefault(ctx.key, f"DEL-{len(script.compensations) + 1}")
    return StepResult({"deleted": ctx.remote_ref}, remote_ref=ref)


# An agent after a step, undone by policy (auto_compensate): its tool "write-note" declares
# an undo and "charge" fails for good, which starts the compensation (the model is scripted
# by the tests: runs.agents.agent_loop.ask_model).
agent_saga = Workflow("test-agent-saga", version=1, input=OrderIn, auto_compensate=True)


@agent_saga.write("reserve", retry=FAST, honours_key=True)
def saga_reserve(ctx):
    return _call(ctx, _effect(ctx))


@saga_reserve.compensate
def saga_release(ctx):
    return _compensation(ctx)


saga_assist = agent_saga.agent("assist", system_prompt="Take notes, then charge.")
saga_assist.tool("write-note", kind="write", honours_key=True, args=NoteArgs)(write_note.fn)
saga_assist.tools["write-note"].compensate(delete_note)


@saga_assist.tool("charge", kind="write", honours_key=True, args=NoteArgs, retry=FAST)
def saga_charge(ctx, args):
    script.calls.append(("charge", ctx.key, ctx.attempt))
    raise PermanentError("card declined")


def notes_then_charge(*impacts: str, tool=None, monkeypatch=None):
    """test-agent-saga's model, scripted (for runs.agents.agent_loop.ask_model): a note for
    each of `impacts`, one a turn ("hold the room", "book the taxi", "order flowers"), then
    a charge, which fails for good and undoes the run by policy, then it is done. The calls
    are "c0", "c1", ... in that order. Given the note `tool` (and `monkeypatch`), each note
    is written with its impact (which the call keeps), and the tool is low impact again once
    the notes are written; with no tool, the tool's impact is left as it is."""
    from runs.machine.transitions.agent_calls import ModelTurn

    texts = ["hold the room", "book the taxi", "order flowers"]
    turns = [(impact, ModelTurn(content="", tool_calls=[
        {"id": f"c{i}", "name": "write-note", "arguments": f'{{"text": "{texts[i]}"}}'}]))
        for i, impact in enumerate(impacts)]
    turns += [("low", ModelTurn(content="", tool_calls=[
        {"id": f"c{len(impacts)}", "name": "charge", "arguments": '{"text": "10 EUR"}'}])),
        ("low", ModelTurn(content="done", tool_calls=[]))]

    def ask(client, spec, conversation, **kw):
        impact, turn = turns.pop(0)
        if tool is not None:
            monkeypatch.setattr(tool, "impact", impact)
        return turn
    return ask


def note_then_charge():
    """test-agent-saga's model, scripted: it writes a note, then charges, which fails for
    good and undoes the run by policy, then is done (notes_then_charge, one note)."""
    return notes_then_charge("low")


def start_saga(key: str):
    """A run of test-agent-saga, for the order `key` under the business key `key`, started
    by the system with no wake-up hint (the test advances it)."""
    from runs.machine.transitions import start_run
    from tests.factories import SYSTEM

    run, _ = start_run(workflow="test-agent-saga", business_key=key, input={"order": key},
                       actor=SYSTEM, wake=False)
    return run


# The invoice-triage agent with a small context budget (runs.agents.agent_history): its tools are
# the demo's; past SUMMARISED_CONTEXT_BUDGET estimated tokens, the turns before the last
# one are summarised by a stored turn.
SUMMARISED_CONTEXT_BUDGET = 550


def _summarised_triage() -> Workflow:
    import dataclasses

    from demo import agent_workflow as demo_triage
    from demo.clients import build_services
    from runs.definitions.definition import AgentBudget

    workflow = Workflow("test-triage-summarised", version=1, input=demo_triage.TriageIn,
                        services=build_services)
    agent = workflow.agent("triage", system_prompt=demo_triage.triage.system_prompt,
                           budget=AgentBudget(max_turns=12, max_tool_calls=10,
                                              max_tokens=20_000),
                           contract=demo_triage.triage.contract,
                           context_budget=SUMMARISED_CONTEXT_BUDGET, keep_turns=1)
    agent.prompt(demo_triage.triage_task)
    for name, tool in demo_triage.triage.tools.items():
        agent.tools[name] = dataclasses.replace(tool, agent=agent)
    agent.impact = demo_triage.triage.impact
    return workflow


summarised_triage = _summarised_triage()


# The invoice-triage agent whose approval task is a keyed write to a receiver that answers
# after a delay and counts the requests per key (runs.bench_receiver.SlowReceiver, at the
# run's input url): its other tools and its model are the sandbox's.
def _triage_with_task_to_receiver() -> Workflow:
    import dataclasses

    from demo import agent_workflow as demo_triage
    from demo.clients import build_services
    from runs.bench_receiver import look_up_effect, send_effect

    class TriageToReceiverIn(demo_triage.TriageIn, RemoteIn):
        pass

    workflow = Workflow("test-triage-task-to-receiver", version=1, input=TriageToReceiverIn,
                        services=build_services)
    agent = workflow.agent("triage", system_prompt=demo_triage.triage.system_prompt,
                           budget=demo_triage.triage.budget,
                           contract=demo_triage.triage.contract)
    agent.prompt(demo_triage.triage_task)
    for name, tool in demo_triage.triage.tools.items():
        agent.tools[name] = dataclasses.replace(tool, agent=agent)
    agent.tools["open-approval-task"] = dataclasses.replace(
        agent.tools["open-approval-task"], fn=lambda ctx, args: send_effect(ctx),
        reconcile_fn=lambda ctx, args: look_up_effect(ctx), compensate_fn=None)
    agent.impact = demo_triage.triage.impact
    return workflow


triage_task_to_receiver = _triage_with_task_to_receiver()


# Started by a schedule: one run per minute slot, its input derived from the slot.
class SlotIn(BaseModel):
    slot: str


nightly = Workflow("test-scheduled", version=1, input=SlotIn)


@nightly.read("tally", retry=FAST)
def tally(ctx):
    return _call(ctx, lambda: {"slot": ctx.input.slot})


def _slot_input(slot):
    return {"slot": slot.isoformat()}


every_minute = Schedule(nightly, "every-minute", every=timedelta(minutes=1), catch_up="all",
                        input=_slot_input)


# Two steps towards two remote systems, for pausing the dispatch towards one of them.
two_systems = Workflow("test-two-systems", version=1, input=OrderIn)


@two_systems.write("to-ledger", retry=FAST, system="ledger")
def to_ledger(ctx):
    return _call(ctx, lambda: StepResult({"ok": True}, remote_ref=f"L-{ctx.input.order}"))


@two_systems.write("to-tracker", retry=FAST, system="tracker")
def to_tracker(ctx):
    return _call(ctx, lambda: StepResult({"ok": True}, remote_ref=f"T-{ctx.input.order}"))


# A receiver that allows 5 requests a second, and vendors served one at a time, for the
# limits the runtime enforces (runs.machine.limits). Worker processes find the receiver through
# TEST_LIMITED_RECEIVER_URL; this process through limited_receiver.url.
class VendorIn(BaseModel):
    order: str
    vendor: str = "acme"


limited_receiver = Receiver()


def _limited_post(ctx, path: str):
    import os

    import httpx

    base = limited_receiver.url or os.environ.get("TEST_LIMITED_RECEIVER_URL", "")
    response = httpx.post(f"{base}{path}", json={"order": ctx.input.order,
                                                  "vendor": getattr(ctx.input, "vendor", "")},
                          headers={"Idempotency-Key": ctx.key}, timeout=5)
    response.raise_for_status()
    return StepResult(response.json(), remote_ref=response.json()["id"])


rated = Workflow("test-rated", version=1, input=VendorIn)


@rated.write("send", retry=FAST, honours_key=True, system="limited-receiver")
def send_rated(ctx):
    return _limited_post(ctx, "/rated")


vendors = Workflow("test-vendors", version=1, input=VendorIn)


@vendors.write("order-goods", retry=FAST, honours_key=True, system="vendor-desk")
def order_goods(ctx):
    return _limited_post(ctx, "/vendor")


@vendors.write("confirm-order", retry=FAST, honours_key=True, system="vendor-desk")
def confirm_order(ctx):
    return _limited_post(ctx, "/vendor")


limits.rate_limit("limited-receiver", per_second=5)
limits.limit_workflow(vendors, concurrency_key="vendor")


# A durable timer between two reads: the run sleeps an hour, holding no process.
sleepy = Workflow("test-sleepy", version=1, input=OrderIn)


@sleepy.read("look", retry=FAST)
def look(ctx):
    return _call(ctx, lambda: {"looked": ctx.input.order})


sleepy.sleep("cool-off", duration=timedelta(hours=1))


@sleepy.read("look-again", retry=FAST)
def look_again(ctx):
    return _call(ctx, lambda: {"looked_again": ctx.input.order})


# Waits for a payment provider's callback, matched by the run's business key.
class PaymentSettled(BaseModel):
    amount: int
    reference: str


def _payment_workflow(name: str, on_timeout: str) -> Workflow:
    workflow = Workflow(name, version=1, input=OrderIn)

    @workflow.read("invoice", retry=FAST)
    def invoice(ctx):
        return _call(ctx, lambda: {"order": ctx.input.order})

    workflow.wait_for_event("payment", event="payment.settled", schema=PaymentSettled,
                            timeout=timedelta(hours=1), on_timeout=on_timeout,
                            default={"amount": 0, "reference": "none"})

    @workflow.read("book", retry=FAST)
    def book(ctx):
        return _call(ctx, lambda: {"paid": ctx.results.get("payment")})

    return workflow


payment_wait = _payment_workflow("test-payment-wait", "escalate")
payment_wait_continue = _payment_workflow("test-payment-continue", "continue")
payment_wait_fail = _payment_workflow("test-payment-fail", "fail")


# A high-impact charge (with an undo) before a wait for its payment, then a shipment: a
# compensation started while the run waits must not let the event send it on to "ship".
charge_then_wait = Workflow("test-charge-then-wait", version=1, input=OrderIn)


@charge_then_wait.write("charge", impact="high", retry=FAST, honours_key=True)
def charge(ctx):
    return _call(ctx, _effect(ctx))


@charge.compensate
def refund(ctx):
    return _compensation(ctx)


charge_then_wait.wait_for_event("payment", event="payment.settled", schema=PaymentSettled,
                                timeout=timedelta(hours=1), on_timeout="escalate")


@charge_then_wait.read("ship", retry=FAST)
def ship(ctx):
    return _call(ctx, lambda: {"shipped": True})


# Two writes to a receiver that answers after a delay (runs.bench_receiver), for the threads
# mode of a worker: many runs wait on their first call at once.
two_calls = Workflow("test-two-remote-calls", version=1, input=RemoteIn)


REMOTE_CALLS = [declare_remote_write(two_calls, name, owner="ops")
                for name in ("first-call", "second-call")]


# The stop verdict enforced (runs.machine.transitions.stop_gate): a high-impact payment to a real
# HTTP receiver (tests.receiver) that ignores keys, with nothing to look a payment up by.
# Worker processes find the receiver through TEST_STOP_RECEIVER_URL; this process through
# stop_receiver.url.
stop_receiver = Receiver()
unsettleable = Workflow("test-stop-verdict", version=1, input=OrderIn)


@unsettleable.write("pay-unkeyed", impact="high", retry=FAST, system="payments receiver",
                    contract=Contract(evidence="nothing", rule="human confirmation",
                                      owner="stop-approvers"))
def pay_unkeyed(ctx):
    import os

    import httpx

    base = stop_receiver.url or os.environ.get("TEST_STOP_RECEIVER_URL", "")
    response = httpx.post(f"{base}/pay", json={"order": ctx.input.order,
                                               "amount": ctx.input.amount}, timeout=5)
    response.raise_for_status()
    return StepResult(response.json(), remote_ref=response.json()["id"])


@pay_unkeyed.describe
def describe_payment(ctx):
    return f"pay {ctx.input.amount} EUR for order {ctx.input.order}"


# The invoice-triage agent whose ledger posting has the stop verdict: declared as a receiver
# that ignores keys, with no lookup. Its approve_if (only large amounts) no longer decides:
# every attempt of every posting waits for a person.
def _triage_with_unsettleable_posting() -> Workflow:
    import dataclasses

    from demo import agent_workflow as demo_triage
    from demo.clients import build_services

    workflow = Workflow("test-triage-stop-verdict", version=1, input=demo_triage.TriageIn,
                        services=build_services)
    agent = workflow.agent("triage", system_prompt=demo_triage.triage.system_prompt,
                           budget=demo_triage.triage.budget,
                           contract=demo_triage.triage.contract)
    agent.prompt(demo_triage.triage_task)
    for name, tool in demo_triage.triage.tools.items():
        agent.tools[name] = dataclasses.replace(tool, agent=agent)
    agent.tools["post-ledger"] = dataclasses.replace(
        demo_triage.triage.tools["post-ledger"], agent=agent, honours_key=False,
        reconcile_fn=None)
    agent.impact = demo_triage.triage.impact
    return workflow


triage_stop_verdict = _triage_with_unsettleable_posting()


# One effect, two kinds of row (tests/runs/transitions/test_effect_machine.py): a write step
# and an agent's tool call with the same contract, driven through their transitions by hand
# (their functions are never called). "pay" has the stop verdict: high impact, no lookup,
# a receiver that ignores keys; its tool asks no approval of its own (approve_if).
effect_step = Workflow("test-effect-step", version=1, input=OrderIn)
effect_call = Workflow("test-effect-call", version=1, input=OrderIn)
effect_agent = effect_call.agent("act", system_prompt="Act.")
gated_step = Workflow("test-gated-step", version=1, input=OrderIn)
gated_call = Workflow("test-gated-call", version=1, input=OrderIn)
gated_agent = gated_call.agent("act", system_prompt="Act.")


@effect_step.write("note", retry=FAST, honours_key=True, lookup_attempts=2)
def effect_note(ctx):
    raise AssertionError("driven by hand")


@effect_agent.tool("note", kind="write", honours_key=True, args=NoteArgs, retry=FAST,
                   lookup_attempts=2)
def effect_note_tool(ctx, args):
    raise AssertionError("driven by hand")


@gated_step.write("pay", impact="high", retry=FAST)
def gated_pay(ctx):
    raise AssertionError("driven by hand")


@gated_agent.tool("pay", kind="write", impact="high", args=NoteArgs, retry=FAST,
                  approve_if=lambda args: False,
                  approval=tool_approval(approvers=("group:operators",)))
def gated_pay_tool(ctx, args):
    raise AssertionError("driven by hand")


# The same effects after a step that undoes by policy (auto_compensate): a failure of
# either kind undoes "reserve".
saga_step = Workflow("test-effect-saga-step", version=1, input=OrderIn, auto_compensate=True)
saga_call = Workflow("test-effect-saga-call", version=1, input=OrderIn, auto_compensate=True)
for _saga in (saga_step, saga_call):
    @_saga.write("reserve", retry=FAST, honours_key=True)
    def _reserve(ctx):
        raise AssertionError("driven by hand")

    @_reserve.compensate
    def _release(ctx):
        raise AssertionError("driven by hand")


@saga_step.write("note", retry=FAST, honours_key=True)
def saga_note(ctx):
    raise AssertionError("driven by hand")


saga_agent = saga_call.agent("act", system_prompt="Act.")


@saga_agent.tool("note", kind="write", honours_key=True, args=NoteArgs, retry=FAST)
def saga_note_tool(ctx, args):
    raise AssertionError("driven by hand")


# A timer and an event wait, each followed by a keyed write to a receiver over HTTP
# (runs.bench_receiver.SlowReceiver, which counts the POSTs per key), for the tests that
# kill a real worker around the write after the wait (tests/runs/test_waits_under_crashes.py).
napper = Workflow("test-nap-then-send", version=1, input=RemoteIn)
napper.sleep("nap", duration=timedelta(seconds=1))
payee = Workflow("test-event-then-send", version=1, input=RemoteIn)
payee.wait_for_event("payment", event="payment.settled", schema=PaymentSettled,
                     timeout=timedelta(hours=1), on_timeout="fail")


for _waiting in (napper, payee):
    declare_remote_write(_waiting, "send", owner="ops", lookup_delay=0.2, retry=FAST)


# Step code that exits its process (a library's sys.exit()): recorded as the step's failure
# (runs.machine.errors.CODE_FAILURES), the worker going on.
exits = Workflow("test-exits", version=1, input=OrderIn)


@exits.read("parse", retry=FAST)
def parse_and_exit(ctx):
    raise SystemExit(3)


@exits.write("notify", retry=FAST, honours_key=True)
def notify_after_exit(ctx):
    return _call(ctx, _effect(ctx))
