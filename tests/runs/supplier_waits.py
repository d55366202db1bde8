"""A workflow whose waits compute from the run's input, as a workflow author writes them: an
event wait for the supplier's confirmation correlated by a field of the input, then a sleep
until a date of the input. Declared by the tests that start it, for the length of a test:
a test module's `declare = pytest.fixture(declaring)` gives its tests
declare(input_model, correlate=..., until=...), which registers "test-supplier-order"."""

from datetime import datetime

from pydantic import AwareDatetime, BaseModel

from runs.definitions.definition import Workflow, registry

NAME = "test-supplier-order"
WAIT, SLEEP = "supplier-confirmation", "until-delivery"
EVENT = "supplier.confirmed"


class AwareIn(BaseModel):
    """The input as the authoring guide has it: the date a sleep waits until has a zone."""

    po_number: str
    delivery_date: AwareDatetime
    amount: int = 100


class NaiveIn(BaseModel):
    """The input of the probe: an order number, not a po_number, and a date with no zone."""

    order_number: str
    delivery_date: datetime


def by_po_number(data):
    return data["po_number"]


def at_delivery(data):
    return datetime.fromisoformat(data["delivery_date"])


def declaring():
    declared = []

    def declare(input_model, *, correlate=by_po_number, until=at_delivery) -> Workflow:
        flow = Workflow(NAME, version=1, input=input_model)
        flow.wait_for_event(WAIT, event=EVENT, correlate=correlate)
        flow.sleep(SLEEP, until=until)
        declared.append(flow)
        return flow

    yield declare
    for flow in declared:
        registry.unregister(flow)
