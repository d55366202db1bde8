"""`manage.py bulk_action preview|start --workflow NAME` refuses a NAME that is part of no
workflow's name in one line: it names NAME, in the words a bulk job's start uses for it
(approvals.bulk.refuse_bulk_request: "no workflow's name contains ..."), and at most a few
workflows whose names are close to it. It named every workflow known: a line of hundreds of
names in a big install, with the one that was meant somewhere inside. Only the workflows
the person may see are asked and named, and no password is asked for a misspelt name.
Nothing is started."""

import io

import pytest
from django.core.management import CommandError, call_command

from approvals.bulk import BulkRefused, refuse_bulk_request
from approvals.models import BulkJob
from console.cli import CLOSE_NAMES
from runs.models import Workflow
from runs.reads.selectors import RunFilters
from tests.factories import new_run

pytestmark = pytest.mark.django_db

MANY = 60


@pytest.fixture
def big_install(operator):
    """A run of test-orders, and MANY more workflows, each with its row."""
    new_run()
    Workflow.objects.bulk_create([Workflow(name=f"billing-sync-{n}") for n in range(MANY)])


def refusal(verb: str, workflow: str, user: str = "olga") -> str:
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("bulk_action", verb, "terminate", "--user", user, "--workflow", workflow,
                     *(["--reason", "cleanup"] if verb == "start" else []), stdout=out)
    assert out.getvalue() == ""
    return str(refused.value)


@pytest.mark.parametrize("verb", ["preview", "start"])
def test_a_name_close_to_none_is_refused_naming_it_alone(big_install, operator, verb,
                                                         monkeypatch):
    # No password is given: the name is refused before one is asked for.
    monkeypatch.delenv("CLI_PASSWORD")
    message = refusal(verb, "nope")

    with pytest.raises(BulkRefused) as the_jobs:
        refuse_bulk_request("terminate", RunFilters(workflow="nope"), user=operator,
                            reason="cleanup")
    assert message == f"--workflow: {the_jobs.value}" == \
        "--workflow: no workflow's name contains 'nope'"
    assert not BulkJob.objects.exists()


@pytest.mark.parametrize("verb", ["preview", "start"])
def test_a_misspelt_name_is_refused_with_a_few_close_names_not_every_one(big_install, verb):
    message = refusal(verb, "test-ordres")

    assert message.startswith("--workflow: no workflow's name contains 'test-ordres' "
                              "(close names: test-orders")
    assert "\n" not in message and message.count("billing-sync-") == 0
    assert len(message.split("(close names: ")[1].split(", ")) <= CLOSE_NAMES
    assert not BulkJob.objects.exists()


def test_a_person_is_told_only_of_the_workflows_whose_runs_they_may_see(big_install,
                                                                        finance_operator):
    message = refusal("preview", "billing-sync-7", user="fin")

    assert message == ("--workflow: no workflow whose runs user 'fin' may see has a name "
                       "containing 'billing-sync-7'")
    assert refusal("preview", "test-ordres", user="fin").endswith(
        "containing 'test-ordres' (close names: test-orders)")
