"""start_run refuses a business key of blanks like an empty one, in its one validation (so
the command, the API and every other caller refuse it too); the command refuses input
nested too deeply to read with a message, not a traceback."""

import pytest
from django.core.management import CommandError, call_command

from runs.machine.errors import InvalidInput
from runs.machine.transitions import start_run
from runs.models import Run
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db

ORDER = {"order": "o-1", "amount": 5}


@pytest.mark.parametrize("key", ["   ", "\u3000", " \u00a0 "])
def test_a_business_key_of_blanks_is_refused_naming_the_field(key):
    with pytest.raises(InvalidInput, match="business key must be a non-empty string") as info:
        start_run(workflow="test-orders", business_key=key, input=ORDER, actor=SYSTEM)
    assert info.value.errors[0]["loc"] == ["business_key"]
    assert not Run.objects.exists()


def test_the_command_refuses_a_business_key_of_spaces():
    with pytest.raises(CommandError, match="business key must be a non-empty string"):
        call_command("start_run", "test-orders", "   ", "--input", '{"order": "o-1"}')
    assert not Run.objects.exists()


def test_the_command_refuses_input_nested_too_deeply_with_a_message():
    deep = "[" * 20000 + "]" * 20000
    with pytest.raises(CommandError, match="--input is nested too deeply"):
        call_command("start_run", "test-orders", "k-1", "--input", deep)
    assert not Run.objects.exists()
