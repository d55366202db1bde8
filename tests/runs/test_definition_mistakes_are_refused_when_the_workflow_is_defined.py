"""A mistake in a workflow's definition fails when its module is imported, with an error
naming the workflow, the step and what is wrong, and declares nothing: the step is not
added, the workflow is not registered. Left to run time, each of these would fail in a
worker, or never (a coroutine stored as a result, a field named by one letter of its name
kept in clear)."""

import functools
from datetime import timedelta

import pytest
from pydantic import BaseModel

from runs.definitions.declarations import tool_approval
from runs.definitions.definition import Contract, Workflow, registry
from runs.definitions.retry import RetryPolicy
from runs.definitions.validation import NAME_MAX, VERSION_MAX, DefinitionError
from runs.models import Run, Step
from tests.workflows import OrderIn


def fetch(ctx):
    return {"ok": True}


async def fetch_async(ctx):
    return {"ok": True}


def fetch_lines(ctx):
    yield {"line": 1}


class AsyncClient:
    async def __call__(self, ctx):
        return {"ok": True}


def unregistered(name="test-mistakes", version=1):
    return Workflow(name, version=version, input=OrderIn, register=False)


def test_the_limits_are_those_of_the_columns_that_hold_names_and_versions():
    assert NAME_MAX == Step._meta.get_field("name").max_length
    assert NAME_MAX == Run._meta.get_field("workflow_name").max_length
    assert VERSION_MAX == 2**31 - 1  # PositiveIntegerField on PostgreSQL: a 4-byte integer


def test_two_steps_with_one_name_are_refused_when_the_workflow_is_defined():
    workflow = unregistered()
    first = workflow.read("fetch")(fetch)
    with pytest.raises(DefinitionError) as refused:
        workflow.write("fetch")(fetch)
    assert str(refused.value) == ("workflow test-mistakes v1, step 'fetch': declared twice "
                                  "(step names are unique within a workflow)")
    assert workflow.steps == [first]


def test_an_agent_step_is_held_to_the_same_unique_name():
    workflow = unregistered()
    workflow.read("triage")(fetch)
    with pytest.raises(DefinitionError, match="step 'triage': declared twice"):
        workflow.agent("triage", system_prompt="sort the invoices")
    assert [s.kind for s in workflow.steps] == ["read"]


@pytest.mark.parametrize("name, why", [
    ("", "its name is empty"),
    ("   ", "its name is empty"),
    (" fetch", "its name starts or ends with spaces"),
    ("s" * (NAME_MAX + 1), f"its name is {NAME_MAX + 1} characters long, at most {NAME_MAX}"),
    ("fetch/lines", "may not hold ':' or '/'"),
    ("charge:compensate", "may not hold ':' or '/'"),
    ("fetch\nlines", "control character U+000A"),
    ("fetch\x00", "control character U+0000"),
    ("fetch\u202e", "control character U+202E"),
    (None, "its name must be text, not NoneType"),
])
def test_a_step_name_the_runtime_cannot_hold_is_refused_naming_the_workflow(name, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.read(name)(fetch)
    assert str(refused.value).startswith("workflow test-mistakes v1, step ")
    assert why in str(refused.value)
    assert workflow.steps == []


def test_a_step_name_as_long_as_its_column_is_declared():
    workflow = unregistered()
    assert workflow.read("s" * NAME_MAX)(fetch).name == "s" * NAME_MAX


def test_a_step_named_as_another_steps_undo_key_would_be_is_refused():
    # "charge:compensate" v1 would send workflow:key:charge:compensate:v1, the key of the
    # undo of "charge": the receiver would take one for the other.
    workflow = unregistered()
    workflow.write("charge")(fetch)
    with pytest.raises(DefinitionError, match="step 'charge:compensate'"):
        workflow.write("charge:compensate")(fetch)
    assert [s.name for s in workflow.steps] == ["charge"]


@pytest.mark.parametrize("version, why", [
    (0, "its version must be from 1 to"),
    (-1, "its version must be from 1 to"),
    (True, "must be a whole number, not bool"),
    (1.0, "must be a whole number, not float"),
    ("2", "must be a whole number, not str"),
    (2**31, "its version must be from 1 to 2147483647, not 2147483648"),
])
def test_a_workflow_version_that_is_not_a_positive_int_is_refused_and_not_registered(
        version, why):
    with pytest.raises(DefinitionError) as refused:
        Workflow("test-bad-version", version=version, input=OrderIn)
    assert str(refused.value).startswith("workflow test-bad-version")
    assert why in str(refused.value)
    assert registry.versions("test-bad-version") == []


@pytest.mark.parametrize("version", [0, True, "2", 2**31])
def test_a_step_version_that_is_not_a_positive_int_is_refused(version):
    workflow = unregistered()
    with pytest.raises(DefinitionError, match="workflow test-mistakes v1, step 'post'"):
        workflow.write("post", version=version)(fetch)
    assert workflow.steps == []


@pytest.mark.parametrize("name, why", [
    ("", "its name is empty"),
    ("w" * (NAME_MAX + 1), "at most 200"),
    ("orders\r\nBcc: x", "control character U+000D"),
    (42, "its name must be text, not int"),
    # Its keys would be another workflow's: "a:b" with business key "c" is "a" with "b:c".
    ("billing:eu", "its name holds ':'"),
])
def test_a_workflow_name_the_runtime_cannot_hold_is_refused(name, why):
    with pytest.raises(DefinitionError) as refused:
        Workflow(name, version=1, input=OrderIn)
    assert str(refused.value).startswith("workflow ") and why in str(refused.value)
    assert registry.get(name, 1) is None


@pytest.mark.parametrize("schema", [dict, OrderIn(order="o-1"), None, "OrderIn"])
def test_an_input_that_is_not_a_pydantic_model_is_refused_and_not_registered(schema):
    with pytest.raises(DefinitionError, match="workflow test-bad-input v1: its input must "
                                              "be a pydantic model class"):
        Workflow("test-bad-input", version=1, input=schema)
    assert registry.get("test-bad-input", 1) is None


def test_the_same_name_and_version_registered_twice_is_refused():
    first = Workflow("test-twice", version=1, input=OrderIn)
    try:
        first.read("fetch")(fetch)
        with pytest.raises(ValueError, match="test-twice v1 registered twice"):
            Workflow("test-twice", version=1, input=OrderIn)
        assert registry.get("test-twice", 1) is first
    finally:
        registry.unregister(first)


@pytest.mark.parametrize("function, why", [
    (lambda: None, "its function () cannot be called as (ctx)"),
    (lambda ctx, extra: None, "its function (ctx, extra) cannot be called as (ctx)"),
    (fetch_async, "its function is async"),
    (AsyncClient(), "its function is async"),
    (functools.partial(fetch_async), "its function is async"),
    (fetch_lines, "its function is a generator"),
    ("fetch", "its function must be callable, not str"),
])
def test_a_step_function_the_worker_cannot_call_is_refused_when_decorated(function, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.read("fetch")(function)
    assert str(refused.value).startswith("workflow test-mistakes v1, step 'fetch': ")
    assert why in str(refused.value)
    assert workflow.steps == []


def test_a_lambda_or_a_function_with_defaults_taking_ctx_is_a_step_function():
    workflow = unregistered()
    workflow.read("a")(lambda ctx: 1)
    workflow.read("b")(lambda ctx, extra=None: 2)
    workflow.read("c")(functools.partial(lambda ctx, n: n, n=3))
    assert [s(None) for s in workflow.steps] == [1, 2, 3]


@pytest.mark.parametrize("declare, role", [
    (lambda step: step.reconcile(fetch_async), "its reconcile function is async"),
    (lambda step: step.compensate(lambda: None), "its compensate function () cannot"),
    (lambda step: step.describe(fetch_lines), "its describe function is a generator"),
    (lambda step: step.compensation_preview(lambda a, b: 1), "its compensation preview (a, b)"),
])
def test_a_recovery_function_the_worker_cannot_call_is_refused(declare, role):
    workflow = unregistered()
    post = workflow.write("post")(fetch)
    with pytest.raises(DefinitionError, match=r"workflow test-mistakes v1, step 'post': "):
        declare(post)
    with pytest.raises(DefinitionError, match=role.replace("(", r"\(").replace(")", r"\)")):
        declare(post)
    assert (post.reconcile_fn, post.compensate_fn, post.describe_fn,
            post.compensation_preview_fn) == (None, None, None, None)


class Verdict(BaseModel):
    ok: bool


@pytest.mark.parametrize("declare, why", [
    (lambda w: w.decision("ask", schema=dict)(fetch), "its schema must be a pydantic model"),
    (lambda w: w.decision("ask", schema=Verdict, format_failure_budget=-1)(fetch),
     "format_failure_budget must be a whole number >= 0"),
    (lambda w: w.wait_for_event("ask", event="paid", schema=dict),
     "its schema must be a pydantic model"),
    (lambda w: w.wait_for_event("ask", event="paid", correlate="po"),
     "correlate must be a function"),
    (lambda w: w.write("ask", lookup_delay=float("nan"))(fetch),
     "lookup_delay must be a finite number of seconds >= 0"),
    (lambda w: w.write("ask", lookup_delay=-5)(fetch), "lookup_delay must be a finite"),
    (lambda w: w.write("ask", lookup_attempts=0)(fetch), "lookup_attempts must be a whole"),
    (lambda w: w.write("ask", lookup_attempts=2.5)(fetch), "lookup_attempts must be a whole"),
    (lambda w: w.write("ask", impact="HIGH")(fetch), "impact must be one of low, high"),
    (lambda w: w.write("ask", retry={"maximum_attempts": 3})(fetch),
     "retry must be a RetryPolicy, not dict"),
    (lambda w: w.write("ask", contract={"owner": "finance"})(fetch),
     "contract must be a Contract, not dict"),
    (lambda w: w.write("ask", sensitive="iban")(fetch), "sensitive=('iban',)"),
])
def test_an_option_the_runtime_cannot_apply_is_refused_naming_the_step(declare, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        declare(workflow)
    assert str(refused.value).startswith("workflow test-mistakes v1, step 'ask': ")
    assert why in str(refused.value)
    assert workflow.steps == []


def test_sensitive_fields_given_as_a_list_are_kept_as_named():
    workflow = unregistered()
    step = workflow.write("post", sensitive=["iban", "card"],
                          contract=Contract(owner="finance"))(fetch)
    assert step.sensitive == ("iban", "card")


def test_a_correct_definition_of_every_kind_is_declared():
    workflow = unregistered()
    workflow.read("fetch", retry=RetryPolicy(maximum_attempts=3))(fetch)
    workflow.decision("classify", schema=Verdict)(fetch)
    post = workflow.write("post", version=2, honours_key=True, lookup_delay=0)(fetch)
    post.reconcile(lambda ctx: None)
    post.compensate(fetch)
    workflow.wait_for_event("paid", event="payment.settled", correlate=lambda data: "k",
                            timeout=timedelta(days=1))
    assert [s.name for s in workflow.steps] == ["fetch", "classify", "post", "paid"]


# Who approves and how long they have, for an approval step and an agent's tool approval
# alike: one rule (approval_checks.check_approvers).
APPROVERS = [
    ({"approvers": ("user:",)}, "'user:' is neither 'user:<name>' nor 'group:<name>'"),
    ({"approvers": ("group:  ",)}, "neither 'user:<name>' nor 'group:<name>'"),
    ({"approvers": ("team:ops",)}, "neither 'user:<name>' nor 'group:<name>'"),
    ({"approvers": "group:finance"}, "approvers and escalate_to are tuples"),
    ({"approvers": ()}, "name at least one approver"),
    ({"remind_every": timedelta(0)}, "remind_every must be a positive timedelta"),
    ({"timeout": timedelta(hours=-1)}, "timeout must be a positive timedelta"),
    ({"timeout": 3600}, "timeout must be a positive timedelta, not 3600"),
    ({"on_timeout": "ignore"}, "on_timeout must be one of"),
]


@pytest.mark.parametrize("given, why", APPROVERS)
def test_an_approval_step_its_approvers_cannot_decide_is_refused_naming_the_step(given, why):
    workflow = unregistered()
    options = {"approvers": ("group:finance",), "on_timeout": "reject", **given}
    with pytest.raises(DefinitionError, match="workflow test-mistakes v1, step 'sign-off'"):
        try:
            workflow.approval("sign-off", **options)(fetch)
        except DefinitionError as refused:
            assert why in str(refused)
            raise
    assert workflow.steps == []


@pytest.mark.parametrize("given, why", APPROVERS)
def test_a_tool_approval_its_approvers_cannot_decide_is_refused(given, why):
    options = {"approvers": ("group:finance",), **given}
    with pytest.raises(DefinitionError, match="tool approval: ") as refused:
        tool_approval(**options)
    assert why in str(refused.value)
