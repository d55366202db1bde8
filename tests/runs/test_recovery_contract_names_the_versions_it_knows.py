"""recovery_contract WORKFLOW --workflow-version N is how the definition_missing runbook asks
a worker machine whether it knows a run's version: a version it lacks of a workflow it knows
is answered with the versions it does know, not with the names of other workflows."""

import pytest
from django.core.management import CommandError, call_command


def test_a_version_the_process_lacks_is_answered_with_the_versions_it_has():
    with pytest.raises(CommandError) as refused:
        call_command("recovery_contract", "invoice-approval", "--workflow-version", "7")
    assert str(refused.value) == ("unknown workflow 'invoice-approval' v7; invoice-approval "
                                  "versions registered here: 1")


def test_a_workflow_the_process_lacks_is_answered_with_the_workflows_it_has():
    with pytest.raises(CommandError, match="^unknown workflow 'nope'; registered: .*"
                                           "invoice-approval"):
        call_command("recovery_contract", "nope")
