"""A pause refused for a system no step reaches, or a workflow no one declared, names what
was given cut to a readable length, by the console, the API and the CLI alike: it repeated
a 10,000-character --system whole. Nothing is paused."""

import pytest

from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("given", [{"workflow": "test-orders", "system": "s" * 10_000},
                                   {"workflow": "w" * 10_000}])
def test_a_refused_name_is_quoted_cut_and_nothing_is_paused(given):
    with pytest.raises(dispatch.DispatchError) as refused:
        dispatch.pause_dispatch(actor=SYSTEM, reason="vendor outage", **given)
    said = str(refused.value)
    assert len(said) < 400
    assert "(10000 characters)" in said
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()
