"""A workflow the code registers that has neither a run nor a row yet (a release added it
and `migrate`, which makes its row, has not run since): `list_runs --workflow NAME`
answers "no run matches", as it will until the first run starts, instead of refusing NAME
as "part of no workflow's name (workflows: none)". A name part of no workflow, registered
or run, is still refused, naming the registered ones close to it."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run, Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_row_yet():
    Workflow.objects.all().delete()


def _call(*args) -> str:
    out = io.StringIO()
    call_command("list_runs", *args, stdout=out)
    return out.getvalue()


def test_a_registered_workflow_with_no_run_yet_lists_no_run():
    assert not Workflow.objects.exists() and not Run.objects.exists()
    assert _call("--workflow", "test-orders").strip() == "no run matches"
    assert _call("--workflow", "orders").strip() == "no run matches"
    assert _call("--workflow", "test-orders", "--json").strip() == \
        '{"next_cursor": null, "runs": []}'


def test_a_name_part_of_no_workflow_is_refused_naming_the_registered_ones():
    with pytest.raises(CommandError) as refused:
        _call("--workflow", "test-ordres")
    message = str(refused.value)
    assert message.startswith("--workflow: no workflow's name contains 'test-ordres' "
                              "(close names: test-orders")
    assert not Workflow.objects.exists()
