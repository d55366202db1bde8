"""recovery_contract --workflow-version names one version: 0, like any other number no
version has, is refused as unknown rather than read as "the latest"."""

import pytest
from django.core.management import CommandError, call_command


def test_version_0_is_refused_as_unknown_like_any_version_the_workflow_lacks(capsys):
    with pytest.raises(CommandError, match="unknown workflow 'invoice-approval' v0;"):
        call_command("recovery_contract", "invoice-approval", "--workflow-version", "0")
    assert "invoice-approval v1" not in capsys.readouterr().out
