"""What the simulated model answers when it is offered tools: a deterministic agent.

The next answer is worked out from the conversation so far, as a model's would be: which
tools have been called and what they returned. So a runtime that replays stored turns and
tool results gets the answers it got before, and one that loses a result asks again (and
tests can count the requests the sandbox served).

The script is "invoice-triage" (read the invoice, look the vendor up, open the approval
task, post to the ledger, then answer with a summary) unless a system or user message
says otherwise with a directive "[sandbox-script: NAME flag ...]". Flags make the model
misbehave on purpose, for the tests and the drills:

  invalid-args-once     the first post-ledger call has an amount that fails the schema
  invalid-args-always   every post-ledger call does
  invent-tool           asks for a tool nobody declared ("wire-money") instead of the task
  loop                  looks the vendor up again and again, never finishing
  both-writes           opens the task and posts to the ledger in one turn (two calls)
  change-args           after a declined post-ledger, proposes a different amount
  huge-args-once        the first open-approval-task call carries a megabyte of "notes"
                        (a field its schema ignores)
  huge-args-always      every open-approval-task call does

The fault "malformed" (demo.sandbox.faults) breaks one turn's tool calls the same way for any
script: their arguments are not JSON (malformed).

It also answers a request to summarise a conversation (sent without tools; its system
message asks to "summarise the conversation" and its user message carries the conversation
as a JSON array): a short text, with the facts the script needs later as a tail
"[sandbox-facts: {...}]" (each call's tool and a compact result, and how many turns the
summary stands for). A conversation that carries such a summary is read as if the turns it
summarises were there, so the agent goes on where it was.
"""

import json
import re

from . import classifier

TRIAGE = "invoice-triage"
DIRECTIVE = re.compile(r"\[sandbox-script:\s*([a-z0-9-]+)((?:\s+[a-z0-9-]+)*)\s*\]")
INVOICE_NUMBER = re.compile(r"\b(INV-[A-Za-z0-9-]+)")
INVENTED_TOOL = "wire-money"
# What the huge-args flags add to a call: far past any sensible bound on arguments.
HUGE_NOTES = "x" * (1024 * 1024)
SUMMARY_REQUEST = re.compile(r"summari[sz]e the conversation", re.IGNORECASE)
FACTS = re.compile(r"\[sandbox-facts: (\{.*\})\]", re.DOTALL)
# What a summary keeps of each tool's result: the fields the script reads later.
KEPT_FIELDS = {"read-invoice": ("number", "vendor", "amount", "currency", "lines"),
               "lookup-vendor": ("name", "iban"), "open-approval-task": ("id",),
               "post-ledger": ("id",)}


def _text(content) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def script_of(messages: list) -> tuple[str, set[str]]:
    for message in messages:
        if isinstance(message, dict) and message.get("role") in ("system", "user"):
            match = DIRECTIVE.search(_text(message.get("content")))
            if match:
                return match.group(1), set(match.group(2).split())
    return TRIAGE, set()


class Conversation:
    """The calls made so far (in order) and what each returned."""

    def __init__(self, messages: list):
        self.calls: list[dict] = []
        self.results: dict[str, object] = {}
        self.turns = 0
        self.task = ""
        for message in messages:
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            facts = FACTS.search(_text(message.get("content"))) if role == "user" else None
            if facts:
                self._recall(facts.group(1))
            elif role == "user" and not self.task:
                self.task = _text(message.get("content"))
            elif role == "assistant":
                self.turns += 1
                for call in message.get("tool_calls") or []:
                    function = call.get("function") or {}
                    self.calls.append({"id": call.get("id"), "name": function.get("name"),
                                       "arguments": function.get("arguments")})
            elif role == "tool":
                try:
                    value = json.loads(_text(message.get("content")))
                except ValueError:
                    value = {"error": _text(message.get("content"))}
                self.results[message.get("tool_call_id")] = value

    def _recall(self, text: str) -> None:
        """Take in the facts of an earlier summary, as if its turns were here."""
        try:
            facts = json.loads(text)
        except ValueError:
            return
        self.turns += int(facts.get("turns") or 0)
        for position, fact in enumerate(facts.get("calls") or []):
            ident = f"summarised_{len(self.calls)}_{position}"
            self.calls.append({"id": ident, "name": fact.get("name"), "arguments": None})
            self.results[ident] = fact.get("result")

    def facts(self) -> dict:
        """What a summary of this conversation keeps."""
        calls = []
        for call in self.calls:
            result = self.results.get(call["id"])
            if isinstance(result, dict) and "error" not in result:
                kept = KEPT_FIELDS.get(call["name"])
                result = {k: result.get(k) for k in kept} if kept else result
            elif isinstance(result, dict):
                result = {"error": str(result["error"])[:120]}
            calls.append({"name": call["name"], "result": result})
        return {"turns": self.turns, "calls": calls}

    def outcomes(self, name: str) -> list:
        return [self.results.get(c["id"]) for c in self.calls if c["name"] == name]

    def succeeded(self, name: str):
        """The last successful result of a call of `name`, or None."""
        for value in reversed(self.outcomes(name)):
            if isinstance(value, dict) and "error" not in value:
                return value
        return None

    def declined(self, name: str) -> bool:
        return any(isinstance(v, dict) and "declined" in str(v.get("error", ""))
                   for v in self.outcomes(name))


def answer(messages: list) -> tuple[str, list[dict]]:
    """(content, tool calls as [{"name", "arguments": dict}]) for the next turn."""
    script, flags = script_of(messages)
    talk = Conversation(messages)
    if script != TRIAGE:
        return f"unknown sandbox script {script!r}: nothing to do", []
    return _triage(talk, flags)


def is_summary_request(messages: list) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "system"
               and SUMMARY_REQUEST.search(_text(m.get("content"))) for m in messages)


def summarise(messages: list) -> str:
    """The summary of the conversation a summary request carries (as a JSON array in its
    user message): what was done, and the facts tail."""
    text = next((_text(m.get("content")) for m in messages
                 if isinstance(m, dict) and m.get("role") == "user"), "")
    start = text.find("[")
    try:
        older, _ = json.JSONDecoder().raw_decode(text[start:]) if start >= 0 else ([], 0)
    except ValueError:
        older = []
    talk = Conversation(older if isinstance(older, list) else [])
    facts = talk.facts()
    done = "; ".join(f"{c['name']}: {'failed' if 'error' in (c['result'] or {}) else 'done'}"
                     for c in facts["calls"]) or "nothing yet"
    return (f"{talk.turns} earlier turns. Task: {talk.task[:200]}. Done so far: {done}.\n"
            f"[sandbox-facts: {json.dumps(facts, sort_keys=True)}]")


def _triage(talk: Conversation, flags: set[str]) -> tuple[str, list[dict]]:
    found = INVOICE_NUMBER.search(talk.task)
    number = found.group(1) if found else talk.task.strip()[:40] or "INV-0"
    bill = talk.succeeded("read-invoice")
    if bill is None:
        return "", [{"name": "read-invoice", "arguments": {"number": number}}]
    vendor = talk.succeeded("lookup-vendor")
    if vendor is None or "loop" in flags:
        return "", [{"name": "lookup-vendor", "arguments": {"name": bill.get("vendor", "")}}]
    if "invent-tool" in flags:
        return "", [{"name": INVENTED_TOOL, "arguments": {"iban": vendor.get("iban"),
                                                         "amount": bill.get("amount")}}]
    lines = " ".join(line.get("description", "") for line in bill.get("lines", []))
    category = classifier.classify(lines)["category"]
    task = talk.succeeded("open-approval-task")
    ledger = talk.succeeded("post-ledger")
    calls = []
    if task is None:
        calls.append({"name": "open-approval-task", "arguments": {
            "invoice": number, "vendor": bill.get("vendor", ""), "amount": bill.get("amount"),
            "currency": bill.get("currency", "EUR"), "category": category}})
        if "huge-args-always" in flags or ("huge-args-once" in flags
                                           and not talk.outcomes("open-approval-task")):
            calls[-1]["arguments"]["notes"] = HUGE_NOTES
        if "both-writes" not in flags:
            return "", calls
    if ledger is None and not (talk.declined("post-ledger") and "change-args" not in flags):
        attempts = talk.outcomes("post-ledger")
        amount = bill.get("amount")
        if "invalid-args-always" in flags or ("invalid-args-once" in flags and not attempts):
            amount = "a lot"
        elif talk.declined("post-ledger") and bill.get("lines"):
            amount = bill["lines"][0].get("amount", amount)  # a smaller, different amount
        calls.append({"name": "post-ledger", "arguments": {
            "invoice": number, "account": f"expenses:{category}", "amount": amount,
            "currency": bill.get("currency", "EUR"), "iban": vendor.get("iban", "")}})
        return "", calls
    if calls:
        return "", calls
    task_ref = (task or {}).get("id", "-")
    ledger_ref = (ledger or {}).get("id") or "not posted (declined)"
    return (f"Invoice {number} from {bill.get('vendor')}: {bill.get('amount')} "
            f"{bill.get('currency')}, category {category}; approval task {task_ref}; "
            f"ledger entry {ledger_ref}."), []


def malformed(tool_calls: list[dict]) -> list[dict]:
    """The calls as a model that broke off mid-answer sends them (the fault malformed): the
    arguments' JSON text without its closing brace, which no JSON reader takes."""
    return [{**c, "arguments": json.dumps(c["arguments"])[:-1]} for c in tool_calls]


def completion(*, completion_id: str, model: str, messages: list, content: str,
               tool_calls: list[dict]) -> dict:
    """A chat.completion with tool calls, as the OpenAI API returns it. Call ids are
    deterministic: the turn's number and the call's place in it. A call's arguments are
    sent as JSON text, or as the text they are (malformed)."""
    # Turns a summary in the conversation stands for count too: call ids stay unique.
    turn = Conversation(messages).turns
    calls = [{"id": f"call_{turn}_{i}", "type": "function",
              "function": {"name": c["name"], "arguments": c["arguments"]
                           if isinstance(c["arguments"], str) else json.dumps(c["arguments"])}}
             for i, c in enumerate(tool_calls)]
    prompt_tokens = sum(len(_text(m.get("content")).split()) + 4 for m in messages
                        if isinstance(m, dict))
    completion_tokens = len(content.split()) + sum(
        len(c["function"]["arguments"].split()) + 3 for c in calls)
    return {
        "id": completion_id, "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "logprobs": None,
                     "finish_reason": "tool_calls" if calls else "stop",
                     "message": {"role": "assistant", "content": content or None,
                                 "refusal": None, "tool_calls": calls or None}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }
