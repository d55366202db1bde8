"""A summary's transcript (runs.agents.agent_history): when the conversation passes the
agent's context budget, the turns the summary covers are written once, in full, as an
artifact (runs.machine.artifacts) before the model is asked, and the summary turn keeps its
reference. Sensitive fields stay sealed in it. A worker killed between the write and the
turn's commit leaves the same one artifact, which the rescuer's summary turn references; a
worker killed after the turn was stored leaves a turn the rescuer reuses, writing nothing
and asking nothing again. The invoice-triage agent with a small budget
(tests.workflows.summarised_triage) against the sandbox's model over real HTTP."""

import hashlib
import json
from pathlib import Path

import pytest

from audit.models import AuditRecord
from demo.sandbox.models import ModelCall
from runs.agents import agent_history
from runs.machine import artifacts, sensitive
from runs.models import AgentTurn, Run, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_summarised
from tests.processes import kill_hard, until_status, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def var_dir(settings, tmp_path):
    """This test's own artifact storage (VAR_DIR/artifacts), to count what is written."""
    settings.VAR_DIR = tmp_path / "var"
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "artifacts"}
    return settings.VAR_DIR


def summarised_run(key: str = "tenant-42:transcript") -> Run:
    """A completed run whose agent summarised turns 0-2 in turn 4 (take live_sandbox)."""
    run = advance(start_summarised(key), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert AgentTurn.objects.get(step__run=run, index=4).summarises == 3
    return run


def transcripts(var_dir: Path) -> list[Path]:
    root = Path(var_dir) / "artifacts"
    return sorted(root.rglob("*-transcript-*.json")) if root.exists() else []


def summary_requests() -> int:
    return sum(json.loads(c.prompt)[0]["content"] == agent_history.SUMMARY_INSTRUCTIONS
               for c in ModelCall.objects.all())


def assert_holds_the_covered_turns(run: Run, var_dir: Path) -> dict:
    """The summary turn's artifact is the one file written, and holds turns 0-2 as their
    rows hold them; returns the transcript."""
    turns = list(AgentTurn.objects.filter(step__run=run).order_by("index"))
    summary = turns[4]
    reference = summary.transcript
    (path,) = transcripts(var_dir)
    body = path.read_bytes()
    assert reference[artifacts.ARTIFACT] == path.relative_to(
        Path(var_dir) / "artifacts").as_posix()
    assert reference["size"] == len(body)
    assert reference["sha256"] == hashlib.sha256(body).hexdigest()
    assert reference[artifacts.ARTIFACT] == f"runs/{run.pk}/triage-transcript-" \
                                            f"{reference['sha256'][:32]}.json"
    assert [t.transcript for t in turns if t.index != 4] == [None] * 5
    document = artifacts.load(reference)
    assert (document["step"], document["covers"]) == ("triage", "0-2")
    assert [t["index"] for t in document["turns"]] == [0, 1, 2]
    for entry, turn in zip(document["turns"], turns[:3], strict=True):
        assert (entry["content"], entry["tool_calls"], entry["summarises"]) == (
            turn.content, turn.tool_calls, 0)
        assert (entry["prompt_tokens"], entry["completion_tokens"], entry["model_ref"]) == (
            turn.prompt_tokens, turn.completion_tokens, turn.model_ref)
        assert entry["created_at"] == turn.created_at.isoformat()
        rows = list(ToolCall.objects.filter(step__run=run, turn=turn.index).order_by("index"))
        assert len(entry["calls"]) == len(rows) == 1
        for call, row in zip(entry["calls"], rows, strict=True):
            assert call["ref"] == row.ref
            for name in ("call_id", "tool", "status", "arguments", "args_hash", "result",
                         "idempotency_key", "remote_ref", "attempt", "error_message"):
                assert call[name] == getattr(row, name), name
    # The audit record of the summary turn vouches for the artifact's hash.
    (stored,) = AuditRecord.objects.filter(run=run, action="agent_turn_stored", data__turn=4)
    assert stored.data["transcript_sha256"] == reference["sha256"]
    return document


def test_a_summary_keeps_every_turn_it_covers_in_full_as_one_artifact(live_sandbox, var_dir,
                                                                       settings):
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    run = summarised_run()
    document = assert_holds_the_covered_turns(run, var_dir)
    assert [t["calls"][0]["tool"] for t in document["turns"]] == [
        "read-invoice", "lookup-vendor", "open-approval-task"]
    assert summary_requests() == 1

    # The vendor's IBAN, which lookup-vendor declares sensitive, is sealed in the artifact
    # exactly as in the row: never in clear, and still opened by the key.
    vendor = ToolCall.objects.get(step__run=run, tool="lookup-vendor")
    assert sensitive.is_sealed(vendor.result["iban"])
    iban = sensitive.opened(vendor.result)["iban"]
    assert iban.startswith("DE")
    body = next(iter(transcripts(var_dir))).read_bytes().decode()
    assert iban not in body
    (entry,) = document["turns"][1]["calls"]
    assert entry["result"]["iban"] == vendor.result["iban"]
    assert sensitive.is_sealed(document["turns"][1]["tool_calls"][0]["arguments"])


def test_writing_the_same_transcript_again_makes_no_second_artifact(live_sandbox, var_dir,
                                                                    settings):
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    run = summarised_run("tenant-42:transcript-again")
    summary = AgentTurn.objects.get(step__run=run, index=4)
    step = Step.objects.get(run=run, name="triage")
    turns = list(AgentTurn.objects.filter(step=step).order_by("index"))
    calls = list(ToolCall.objects.filter(step=step).order_by("turn", "index"))
    # What a worker that took the run over before the turn was stored would write.
    assert agent_history.keep_transcript(step, turns, calls, 3) == summary.transcript
    (path,) = transcripts(var_dir)
    # A write cut short by a crash is written again under the same name.
    path.write_bytes(path.read_bytes()[:100])
    assert agent_history.keep_transcript(step, turns, calls, 3) == summary.transcript
    assert transcripts(var_dir) == [path]
    assert artifacts.load(summary.transcript)["covers"] == "0-2"


@pytest.mark.parametrize("crash_at", [agent_history.BEFORE_SUMMARY,
                                      agent_history.AFTER_SUMMARY])
def test_a_worker_killed_around_the_summary_leaves_one_artifact_for_its_turn(
        crash_at, sandbox_and_broker, settings, worker, var_dir, tmp_path):
    """Killed after the transcript was written and the summary asked, before the turn was
    stored: the rescuer asks for the summary again (nothing was stored) and its turn
    references the same artifact. Killed after the turn was stored: the rescuer reuses it,
    writes nothing and asks nothing again."""
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    run = start_summarised(f"tenant-42:transcript-{crash_at}", wake=True)
    marker = tmp_path / "crashed"
    doomed = worker("doomed", VAR_DIR=var_dir, RUNS_CRASH_AT=f"{crash_at}:triage",
                    RUNS_CRASH_MARKER=marker)
    try:
        wait_for(marker.exists, timeout=90, what=f"the worker to reach {crash_at}")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9
    (written,) = transcripts(var_dir)
    first = written.read_bytes()
    stored = AgentTurn.objects.filter(step__run=run, summarises=3).count()
    assert stored == (0 if crash_at == agent_history.BEFORE_SUMMARY else 1)
    assert summary_requests() == 1

    worker("rescuer", VAR_DIR=var_dir)
    run = until_status(run, RunStatus.COMPLETED, timeout=120)
    assert_holds_the_covered_turns(run, var_dir)
    assert transcripts(var_dir) == [written] and written.read_bytes() == first
    assert summary_requests() == (2 if crash_at == agent_history.BEFORE_SUMMARY else 1)


def test_what_looks_like_a_credential_is_masked_and_sealed_values_stay_sealed(db):
    from tests.console.test_agent_conversation_page import agent_run

    run = agent_run(2, content="calling with Authorization: Bearer abc.def-123",
                    note="api_key=sk-live-0123456789")
    step = Step.objects.get(run=run, name="triage")
    sealed = sensitive.encrypt("DE89370400440532013000")
    ToolCall.objects.filter(step=step).update(result={"iban": sealed, "token": "t-1"})
    document = agent_history.transcript(
        step, list(AgentTurn.objects.filter(step=step).order_by("index")),
        list(ToolCall.objects.filter(step=step).order_by("turn", "index")), 2)
    body = json.dumps(document)
    assert "abc.def-123" not in body and "sk-live-0123456789" not in body and "t-1" not in body
    (call,) = document["turns"][0]["calls"]
    assert call["result"] == {"iban": sealed, "token": "[redacted]"}
    assert document["turns"][0]["content"] == "calling with Authorization: Bearer [redacted]"
    # The turns' own figures are not mistaken for secrets.
    assert document["turns"][1]["prompt_tokens"] == 101
