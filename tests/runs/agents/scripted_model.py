"""A model that answers from a script, for the tests that need an answer the sandbox's
model never gives: the demo's triage agent asks it instead of the endpoint, and every
conversation it was sent is kept."""

from runs.agents import agent_loop


def scripted(monkeypatch, *answers) -> list[list[dict]]:
    """Make agent_loop ask no endpoint but answer `answers` (ModelTurns) in order; returns
    the list the conversations it is sent are appended to."""
    left = iter(answers)
    seen: list[list[dict]] = []

    def ask(client, spec, conversation, **kwargs):
        seen.append(conversation)
        return next(left)

    monkeypatch.setattr(agent_loop, "ask_model", ask)
    return seen
