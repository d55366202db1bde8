"""What the model is told of a tool call's result kept apart as an artifact stays within
RUNS_RESULT_INLINE_BYTES once written as the tool's message, whatever the result holds:
quotes and characters outside ASCII grow when written as JSON, and the start shown is cut
until the message fits. An artifact that cannot be read is said so, with its size and
sha256, rather than failing the conversation."""

import json

from runs.agent_models import ToolCall
from runs.agents import agent_loop, tool_results
from runs.machine import artifacts

INLINE = 64 * 1024


def _told(reference) -> str:
    return agent_loop.tool_message(ToolCall(status="succeeded", result=reference))


def test_a_result_full_of_escapes_is_cut_until_its_message_fits(settings):
    settings.RUNS_RESULT_INLINE_BYTES = INLINE
    value = {"quotes": '"' * 50_000, "accents": "é" * 50_000, "lines": "\n" * 50_000}
    reference = artifacts.write(1, "escapes-test", value)
    message = _told(reference)
    assert len(message.encode()) <= INLINE
    shown = json.loads(message)
    assert shown["result_kept_apart"]["size_bytes"] == reference["size"]
    assert shown["result_kept_apart"]["sha256"] == reference["sha256"]
    text = artifacts.encoded(value).decode()
    assert text.startswith(shown["result_start"]) and len(shown["result_start"]) > 1000


def test_an_artifact_that_cannot_be_read_is_said_so_with_its_size_and_sha256(settings):
    settings.RUNS_RESULT_INLINE_BYTES = INLINE
    missing = {artifacts.ARTIFACT: "runs/1/missing-test-0.json", "size": 123_456,
               "sha256": "0" * 64}
    shown = tool_results.told(missing)
    assert shown["result_kept_apart"]["size_bytes"] == 123_456
    assert shown["result_kept_apart"]["sha256"] == "0" * 64
    assert "cannot be read" in shown["result_kept_apart"]["unreadable"]
