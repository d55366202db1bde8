"""Limits are checked as they are declared, naming the workflow: a concurrency key that no
field of the workflow's input holds limited nothing (every run's value was missing alike,
and the claim's count matched none), and numbers given as text failed later with a bare
TypeError, or were taken (a priority of "high", 2.5 calls a second)."""

import pytest

from runs.definitions.validation import DefinitionError
from runs.machine import limits
from tests.workflows import orders


@pytest.fixture(autouse=True)
def nothing_left_declared():
    yield
    limits.forget(workflow="test-orders", system="ledgr")


def test_a_concurrency_key_that_is_no_field_of_the_input_is_refused_naming_the_fields():
    with pytest.raises(DefinitionError, match=(
            r"^workflow test-orders v1: concurrency_key 'vendor' is no field of its input "
            r"\(its fields: .*order.*\)$")):
        limits.limit_workflow(orders, concurrency_key="vendor")
    # By name too, read from the versions registered.
    with pytest.raises(DefinitionError, match="concurrency_key 'vendor' is no field"):
        limits.limit_workflow("test-orders", concurrency_key="vendor")
    assert limits.workflow_limits("test-orders") is None


@pytest.mark.parametrize(("options", "why"), [
    ({"max_in_flight": "5"}, r"max_in_flight must be a whole number at least 1, not '5'"),
    ({"max_in_flight": 0}, r"max_in_flight must be a whole number at least 1, not 0"),
    ({"per_key": 1.5}, r"per_key must be a whole number at least 1, not 1.5"),
    ({"priority": "high"}, r"priority must be a whole number, not 'high'"),
])
def test_numbers_that_are_none_are_refused_naming_the_option(options, why):
    with pytest.raises(DefinitionError, match=f"^workflow test-orders v1: {why}$"):
        limits.limit_workflow(orders, **options)
    assert limits.workflow_limits("test-orders") is None


@pytest.mark.parametrize("per_second", ["5", 2.5, 0])
def test_a_rate_limit_of_no_whole_number_of_calls_is_refused(per_second):
    with pytest.raises(DefinitionError, match=r"a whole number of calls per second"):
        limits.rate_limit("ledgr", per_second=per_second)


def test_a_key_the_input_has_is_kept():
    declared = limits.limit_workflow(orders, concurrency_key="order", max_in_flight=2)
    assert limits.workflow_limits("test-orders") == declared
