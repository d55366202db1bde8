"""receive_event refuses an event whose id, correlation key or source holds text the
database cannot store (runs.machine.storable), naming the field, before it looks anything
up or keeps anything: whoever calls it gets a refusal, not a database error."""

import pytest

from audit.chain import Actor
from runs.models import ExternalEvent
from runs.waiting import events
from runs.waiting.payloads import EventRefused

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("field", "given"), [
    ("event_id", {"event_id": "evt\x001"}),
    ("correlation_key", {"key": "order\x001"}),
    ("source", {"source": "psp\x00"}),
])
def test_an_event_with_a_nul_in_a_field_is_refused_naming_it_and_nothing_is_kept(field,
                                                                                  given):
    sent = {"workflow": "test-payment-wait", "event": "payment.settled", "key": "order-1",
            "event_id": "evt-1", "source": "psp",
            "payload": {"amount": 1, "reference": "r"}, **given}
    with pytest.raises(EventRefused) as refused:
        events.receive_event(**sent, actor=Actor.system("psp"))
    assert [e["loc"] for e in refused.value.errors] == [[field]]
    assert field in str(refused.value)
    assert not ExternalEvent.objects.exists()
