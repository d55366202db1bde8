"""A person's reason may hold line breaks. The commands that list pauses, a run's history
and a run write it on its own entry's line, with each line break written out (\\u000a):
printed as it is, a reason could forge the next line, e.g. a pause by someone else."""

import io

import pytest
from django.core.management import call_command

from runs.machine import dispatch, transitions
from tests.factories import SYSTEM, new_run

pytestmark = pytest.mark.django_db

FORGED = "maintenance\ntest-orders (the ledger): paused by ceo at 2026-12-04 18:26: audit"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def test_dispatch_status_prints_one_line_a_pause_whatever_its_reason_holds():
    dispatch.pause_dispatch(workflow="test-orders", system="", actor=SYSTEM, reason=FORGED)
    out = io.StringIO()
    call_command("dispatch", "status", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("test-orders: paused by ")
    assert lines[0].endswith("maintenance\\u000atest-orders (the ledger): paused by ceo at "
                             "2026-12-04 18:26: audit")
    assert not any(line.startswith("test-orders (the ledger)") for line in lines)


def test_run_history_and_show_run_print_a_reason_on_its_own_line():
    run = new_run(wake=False)
    transitions.terminate(run.pk, actor=SYSTEM, reason="duplicate\n    9 forged entry")
    out = io.StringIO()
    call_command("run_history", str(run.pk), stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[1].endswith("reason: duplicate\\u000a    9 forged entry")
    shown = io.StringIO()
    call_command("show_run", str(run.pk), stdout=shown)
    assert not any(line.startswith("    9 forged") for line in shown.getvalue().splitlines())
    assert "duplicate\\u000a    9 forged entry" in shown.getvalue()
