"""A start whose input a wait's until(input) or correlate(input) fails with is refused by the
API with 422, as any input the start refuses, its detail and its error naming the step and
what is wrong; `manage.py start_run` says the same in one line, without a traceback. Nothing
is written either way. Before, both started the run, held weeks later at the wait."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from api.tokens import token_create
from audit.models import AuditRecord
from runs.models import Run
from tests.api.conftest import post_run
from tests.runs.supplier_waits import (
    NAME,
    AwareIn,
    NaiveIn,
    declaring,
)

pytestmark = pytest.mark.django_db
declare = pytest.fixture(declaring, name="declare")
NAIVE = {"order_number": "ON-7", "delivery_date": "2099-12-24T10:00:00"}
CORRELATE = "step 'supplier-confirmation': its correlate(input) raised KeyError: 'po_number'"
UNTIL = ("step 'until-delivery': its until(input) returned a datetime without a time zone "
         "(2099-12-24T10:00:00): declare the input field as AwareDatetime or give it a zone")


@pytest.fixture
def erp(client):
    _, plaintext = token_create(name="erp", workflows=[NAME])
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    return client


def test_the_api_answers_422_naming_each_step_and_writes_nothing(erp, declare):
    declare(NaiveIn)
    response = post_run(erp, {"workflow": NAME, "business_key": "so-1", "input": NAIVE})

    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_input"
    assert answer["detail"] == f"input for {NAME} is refused: {CORRELATE}; {UNTIL}"
    assert [(e["loc"], e["msg"]) for e in answer["errors"]] == [(["input"], CORRELATE),
                                                                (["input"], UNTIL)]
    assert not Run.objects.exists() and not AuditRecord.objects.exists()


def test_the_command_says_it_in_one_line_and_writes_nothing(declare):
    declare(NaiveIn)
    with pytest.raises(CommandError) as refused:
        call_command("start_run", NAME, "so-1", "--input", json.dumps(NAIVE))
    message = str(refused.value)
    assert message == f"input for {NAME} is refused: {CORRELATE}; {UNTIL}"
    assert "\n" not in message and "Traceback" not in message
    assert not Run.objects.exists() and not AuditRecord.objects.exists()


def test_an_input_its_waits_take_is_started_by_both(erp, declare):
    declare(AwareIn)
    good = {"po_number": "PO-7", "delivery_date": "2099-12-24T10:00:00+01:00"}
    assert post_run(erp, {"workflow": NAME, "business_key": "so-1",
                          "input": good}).status_code == 201
    call_command("start_run", NAME, "so-2", "--input", json.dumps(good))
    assert sorted(Run.objects.values_list("business_key", flat=True)) == ["so-1", "so-2"]
