"""A start is idempotent on (workflow, business key, input) across a release. Sent again
after a new version gave the input a field with a default, the same request was read by the
new version with that field filled in, hashed otherwise, and refused as a business key used
with another input: the client's retry of its own start was told 409. It is compared as the
run's own version reads it; another input is still refused, and nothing is written."""

import pytest
from pydantic import BaseModel

from audit.models import AuditRecord
from runs.definitions.definition import Workflow, registry
from runs.machine.errors import BusinessKeyConflict
from runs.machine.transitions import start_run
from runs.models import Run
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db
NAME = "test-invoices-across-a-release"


class InvoiceV1(BaseModel):
    invoice: str


class InvoiceV2(InvoiceV1):
    currency: str = "EUR"


@pytest.fixture
def run_of_v1_then_v2():
    v1 = Workflow(NAME, version=1, input=InvoiceV1)
    v1.read("fetch")(lambda ctx: {})
    declared = [v1]
    try:
        run, created = start_run(workflow=NAME, business_key="inv-1",
                                 input={"invoice": "INV-1"}, actor=SYSTEM)
        assert created and run.workflow_version == 1
        v2 = Workflow(NAME, version=2, input=InvoiceV2)
        v2.read("fetch")(lambda ctx: {})
        declared.append(v2)
        yield run
    finally:
        for flow in declared:
            registry.unregister(flow)


def counts():
    return Run.objects.filter(workflow_name=NAME).count(), AuditRecord.objects.count()


def test_the_same_start_sent_again_after_the_release_finds_its_run(run_of_v1_then_v2):
    before = counts()

    again, created = start_run(workflow=NAME, business_key="inv-1",
                               input={"invoice": "INV-1"}, actor=SYSTEM)

    assert (again.pk, created) == (run_of_v1_then_v2.pk, False)
    assert counts() == before


def test_another_input_under_the_key_is_still_refused(run_of_v1_then_v2):
    before = counts()

    with pytest.raises(BusinessKeyConflict, match=f"already used by run {run_of_v1_then_v2.pk}"):
        start_run(workflow=NAME, business_key="inv-1", input={"invoice": "INV-2"},
                  actor=SYSTEM)
    with pytest.raises(BusinessKeyConflict):
        start_run(workflow=NAME, business_key="inv-1",
                  input={"invoice": "INV-1", "currency": "USD"}, actor=SYSTEM)
    assert counts() == before
