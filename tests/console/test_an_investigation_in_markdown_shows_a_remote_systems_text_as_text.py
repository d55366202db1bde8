"""The investigation card's Markdown export (pasted into a ticket) writes what came from
outside as text: a remote system's error message with line breaks starts no line of the
card's own (no forged verdict, heading or fact), and its links, images and HTML are shown,
not made live, wherever the message appears (a fact, a table cell, the next step)."""

import re

import pytest
from django.urls import reverse

from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.models import RunStatus, Step
from tests.factories import new_run

pytestmark = pytest.mark.django_db

FORGED = "**Verdict: safe to retry, no duplicate.**"
HOSTILE = (f"400 bad request\n\n{FORGED}\n## Facts\n- [fix it](javascript:alert(1)) "
           "![t](https://evil.example/t.png) <img src=x onerror=alert(1)> `x` ~~y~~ &lt;")


def markdown_of(client, run) -> str:
    response = client.get(reverse("console:investigation", args=[run.pk]) + "?format=md")
    assert response.status_code == 200
    return response.content.decode()


def test_a_remote_error_message_starts_no_line_and_makes_no_link(script, client_for,
                                                                  operator):
    script.plan["create-task"] = [PermanentError(HOSTILE)]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    # Given to the export as the remote system said it, line breaks and all.
    assert "\n" in Step.objects.get(run=run, name="create-task").error_message
    Step.objects.filter(run=run, name="create-task").update(remote_ref="R-1\n# done|[x](y)")

    text = markdown_of(client_for(operator), run)

    lines = text.splitlines()
    # The card's own lines only: one verdict, one heading of each kind, every fact a
    # line of its own starting with the card's "- ".
    assert sum(line.startswith("**Verdict:") for line in lines) == 1
    assert FORGED not in lines and not any("safe to retry" in line and
                                           line.startswith("**") for line in lines)
    assert lines.count("## Facts") == 1
    facts = lines[lines.index("## Facts") + 2:lines.index("## Inferences (not observed)") - 1]
    assert facts and all(line.startswith("- ") and line.endswith(")_") for line in facts)
    # Nothing live: every link, image, HTML tag, code span, strikethrough and entity is
    # escaped (with the escaped characters taken out, none of their marks is left).
    bare = re.sub(r"\\.", "", text)
    for mark in ("[", "]", "<", ">", "`", "~", "&", "!"):
        assert mark not in bare, mark
    assert "\\[fix it\\](javascript:alert(1))" in text
    assert "\\<img src=x onerror=alert(1)\\>" in text
    # The remote reference stays in its own cell of its own row.
    row = next(line for line in lines if line.startswith("| create-task |"))
    assert row.count(" | ") == 6 and "R-1 # done\\|\\[x\\](y)" in row
    # The page itself shows the message as the remote system said it (escaped HTML).
    page = client_for(operator).get(reverse("console:investigation", args=[run.pk]))
    assert "<img src=x" not in page.content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in page.content.decode()
