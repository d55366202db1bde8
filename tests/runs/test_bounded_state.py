"""Bounded state: a large step result becomes an artifact (reference, size, sha256 on the
step), a result over the hard limit is a permanent error naming the limit and the size (of
a write, whose effect has happened by then, an unclassified one: the effect may stand), and
an input over its limit is refused before anything is written."""

import hashlib
import json

import pytest

from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.machine import artifacts, transitions
from runs.machine.errors import InvalidInput
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, Step, StepStatus
from tests.factories import SYSTEM
from tests.workflows import BlobIn

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def artifact_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path / "artifacts"


def _run(size: int) -> Run:
    run, _ = transitions.start_run(workflow="test-big-result", business_key=f"b-{size}",
                                   input={"order": "o", "size": size}, actor=SYSTEM)
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def test_a_ten_megabyte_result_is_stored_once_as_an_artifact_and_read_by_the_next_step(
        artifact_dir):
    size = 10 * 1024 * 1024
    run = _run(size)
    assert run.status == RunStatus.COMPLETED
    produced = Step.objects.get(run=run, name="produce").result
    body = json.dumps({"blob": "x" * size}, separators=(",", ":")).encode()
    assert produced["size"] == len(body)
    assert produced["sha256"] == hashlib.sha256(body).hexdigest()
    assert (artifact_dir / produced[artifacts.ARTIFACT]).read_bytes() == body
    # The row holds the reference only; the next step read the whole value.
    assert len(json.dumps(produced)) < 300
    assert Step.objects.get(run=run, name="consume").result == {"length": size}


def test_a_small_result_stays_inline(artifact_dir):
    run = _run(100)
    assert Step.objects.get(run=run, name="produce").result == {"blob": "x" * 100}
    assert not artifact_dir.exists()


def test_a_result_over_the_hard_limit_stops_the_run_naming_the_limit_and_the_size(
        settings, artifact_dir):
    settings.RUNS_RESULT_MAX_BYTES = 1024 * 1024
    run = _run(2 * 1024 * 1024)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    assert "over the limit of 1,048,576 bytes (RUNS_RESULT_MAX_BYTES)" in run.status_message
    assert "2,097,1" in run.status_message  # the size, with the JSON around it
    step = Step.objects.get(run=run, name="produce")
    assert step.result is None and step.attempt == 1  # not retried: it would be the same
    assert not artifact_dir.exists()


@pytest.fixture
def big_write():
    """A workflow whose write step posts, then returns what it was given to return."""
    flow = Workflow("test-big-write", version=1, input=BlobIn)
    posted = []

    @flow.write("post")
    def post(ctx):
        posted.append(ctx.key)
        return {"blob": "x" * ctx.input.size}

    @post.compensate
    def unpost(ctx):
        return {"undone": True}

    yield posted
    registry.unregister(flow)


def test_a_write_whose_result_is_over_the_limit_is_held_as_an_effect_that_may_stand(
        settings, artifact_dir, big_write):
    settings.RUNS_RESULT_MAX_BYTES = 1024 * 1024
    run, _ = transitions.start_run(workflow="test-big-write", business_key="w-1",
                                   input={"order": "o", "size": 2 * 1024 * 1024}, actor=SYSTEM)
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert "over the limit of 1,048,576 bytes (RUNS_RESULT_MAX_BYTES)" in run.status_message
    step = Step.objects.get(run=run, name="post")
    # Posted once, and not labelled "failed, nothing changed": it may stand.
    assert len(big_write) == 1
    assert step.status == StepStatus.UNKNOWN and step.error_class == ErrorClass.UNCLASSIFIED


def test_an_input_over_its_limit_is_refused_before_anything_is_written(settings):
    settings.RUNS_INPUT_MAX_BYTES = 1000
    with pytest.raises(InvalidInput, match="over the limit of 1,000 bytes"):
        transitions.start_run(workflow="test-orders", business_key="big-input",
                              input={"order": "y" * 2000}, actor=SYSTEM)
    assert not Run.objects.filter(business_key="big-input").exists()
