"""A drill run is a drill run from its first instant: start_run's `drill` writes the flag in
the one statement that creates the run, so no list, count, webhook subscriber or fleet
worker ever sees it as real work in between. The drill kit starts its runs so; it used to
flag each one by a second statement after start_run had committed."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.chain import Actor
from runs.machine.transitions import start_run
from runs.models import Run

pytestmark = pytest.mark.django_db


def test_the_flag_is_in_the_creating_statement_and_nothing_sets_it_after():
    with CaptureQueriesContext(connection) as queries:
        run, created = start_run(workflow="test-unsafe", business_key="drill:first-instant",
                                 input={"order": "drill"}, actor=Actor.system("drill"),
                                 wake=False, drill=True)
    assert created and run.drill and Run.objects.get(pk=run.pk).drill
    statements = [q["sql"] for q in queries.captured_queries]
    assert not [s for s in statements if s.lstrip().upper().startswith("UPDATE")], statements


def test_a_run_started_for_real_is_no_drill_run():
    run, _ = start_run(workflow="test-unsafe", business_key="real-work",
                       input={"order": "real"}, actor=Actor.system("api"), wake=False)
    assert not Run.objects.get(pk=run.pk).drill
