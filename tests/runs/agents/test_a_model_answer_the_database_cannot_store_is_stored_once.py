"""A model is a neighbour that may misbehave: its answer may hold what PostgreSQL cannot
store (a NUL, content that is no text, ids and references longer than their columns, token
counts no integer column holds, arguments that are an object holding NaN). The turn is still
stored, once, with what could not be kept as sent written out, cut or counted as 0 and said
so; a call whose id or name cannot be kept is invalid (a model format error, never executed).
The model is never asked again for the same turn, whether its answer came through the real
client (the openai client builds it without validating) or a scripted ModelTurn."""

import json

import pytest
from openai._models import construct_type
from openai.types.chat import ChatCompletion

from audit.models import AuditRecord
from runs.agent_models import AgentTurn
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import ErrorClass, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db

LONG = "x" * 300


def _call(id="c0", name="write-note", arguments='{"text": "a"}'):
    return {"id": id, "name": name, "arguments": arguments}


def _invalid(*words):
    def check(turn, calls):
        (call,) = calls
        assert call.status == "invalid" and call.error_class == ErrorClass.MODEL_FORMAT
        for word in words:
            assert word in call.error_message, call.error_message
    return check


def _is(field, value):
    def check(turn, calls):
        assert getattr(turn, field) == value
    return check


def _noted(words):
    def check(turn, calls):
        notes = AuditRecord.objects.get(run=turn.step.run, action="agent_turn_stored",
                                        data__turn=0).data["stored_otherwise"]
        assert any(words in n for n in notes), notes
    return check


def _all(*checks):
    def check(turn, calls):
        for c in checks:
            c(turn, calls)
    return check


def _raw_arguments_are_text(turn, calls):
    (raw,) = turn.tool_calls
    assert isinstance(raw["arguments"], str) and "NaN" in raw["arguments"]
    _invalid("NaN")(turn, calls)


def _id_cut_alike(turn, calls):
    # Cut to its column, the same in the raw call the conversation is rebuilt from.
    assert len(calls[0].call_id) == 200 and turn.tool_calls[0]["id"] == calls[0].call_id


CASES = {
    "content with NUL": (dict(content="half\x00written"),
                         _is("content", "half\\x00written")),
    "content a number": (dict(content=5), _all(_is("content", "5"), _noted("JSON text"))),
    "content an object": (dict(content={"a": [1]}), _is("content", '{"a": [1]}')),
    "call name with NUL": (dict(tool_calls=[_call(name="write\x00note")]),
                           _invalid("NUL", "no tool named")),
    "call id with NUL": (dict(tool_calls=[_call(id="c\x000")]), _invalid("the call's id", "NUL")),
    "call id too long": (dict(tool_calls=[_call(id=LONG)]),
                         _all(_invalid("300 characters"), _id_cut_alike)),
    "model_ref too long": (dict(model_ref=LONG),
                           _all(_is("model_ref", LONG[:200]), _noted("model_ref of 300"))),
    "finish_reason too long": (dict(finish_reason=LONG), _is("finish_reason", LONG[:40])),
    "tokens negative": (dict(prompt_tokens=-5), _all(_is("prompt_tokens", 0),
                                                     _noted("prompt_tokens"))),
    "tokens past the column": (dict(completion_tokens=2**31), _is("completion_tokens", 0)),
    "tokens null": (dict(prompt_tokens=None, completion_tokens=None),
                    _all(_is("prompt_tokens", 0), _is("completion_tokens", 0))),
    "arguments an object holding NaN": (
        dict(tool_calls=[_call(arguments={"text": float("nan")})]), _raw_arguments_are_text),
    "arguments an object holding NUL": (
        dict(tool_calls=[_call(arguments={"text": "a\x00b"})]), _invalid("NUL")),
}


def _turn(fields: dict) -> ModelTurn:
    return ModelTurn(**{"content": "", "tool_calls": [], **fields})


def _completion(turn: ModelTurn) -> ChatCompletion:
    """The endpoint's answer as the openai client reads it: built without validation."""
    calls = [{"id": c["id"], "type": "function",
              "function": {"name": c["name"], "arguments": c["arguments"]}}
             for c in turn.tool_calls]
    return construct_type(type_=ChatCompletion, value={
        "id": turn.model_ref, "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": turn.finish_reason,
                     "message": {"role": "assistant", "content": turn.content,
                                 **({"tool_calls": calls} if calls else {})}}],
        "usage": {"prompt_tokens": turn.prompt_tokens,
                  "completion_tokens": turn.completion_tokens, "total_tokens": 0}})


class _Endpoint:
    """A client whose endpoint answers `first` once, then a final answer."""

    def __init__(self, first: ModelTurn):
        self.answers = [_completion(first)]
        self.asked = []
        self.chat = self.completions = self

    def create(self, **kw):
        self.asked.append(kw)
        return self.answers.pop(0) if self.answers else _completion(_turn({"content": "done"}))

    def close(self):
        pass


def _start():
    run, _ = transitions.start_run(workflow="test-agent", business_key="odd-answer",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    return run


def _assert_stored_once(run, asks: int, check):
    turns = list(AgentTurn.objects.filter(step__run=run).order_by("index"))
    # Every answer the model gave is stored once; none is asked for again.
    assert asks == len(turns) >= 1
    first = turns[0]
    calls = list(ToolCall.objects.filter(step__run=run, turn=0))
    check(first, calls)
    stored = json.dumps([first.content, first.model_ref, first.finish_reason,
                         first.tool_calls] + [[c.call_id, c.tool, c.arguments,
                                               c.error_message] for c in calls],
                        ensure_ascii=False)
    assert "\x00" not in stored


@pytest.mark.parametrize("fields, check", CASES.values(), ids=CASES.keys())
def test_a_scripted_answer_is_stored_once(script, monkeypatch, fields, check):
    script.reset()
    answers, asked = [_turn(fields)], []

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return answers.pop(0) if answers else _turn({"content": "done"})

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run = _start()
    assert executor.advance_run(run.pk, worker="w1") is not None
    _assert_stored_once(run, len(asked), check)
    assert not [name for name, *_ in script.calls if name.startswith("write-note")]


@pytest.mark.parametrize("fields, check", CASES.values(), ids=CASES.keys())
def test_an_endpoints_answer_is_stored_once(script, monkeypatch, fields, check):
    script.reset()
    endpoint = _Endpoint(_turn({"model_ref": "cmpl-1", "finish_reason": "stop",
                                "prompt_tokens": 1, "completion_tokens": 1, **fields}))
    monkeypatch.setattr(agent_loop, "model_client", lambda: endpoint)
    run = _start()
    assert executor.advance_run(run.pk, worker="w1") is not None
    _assert_stored_once(run, len(endpoint.asked), check)
    assert not [name for name, *_ in script.calls if name.startswith("write-note")]
