"""A workflow's name is declared in code and may hold any character: a "/", markup, a dot
segment. Each console page that shows a run of it answers 200 with the name escaped and a
link to the workflow's page that leads there; one such workflow never takes the runs list
down for everyone (its link failed to reverse: a 500 for every page that showed a run)."""

from urllib.parse import unquote

import pytest
from django.urls import resolve, reverse
from pydantic import BaseModel

from runs.definitions import definition
from runs.definitions.definition import StepResult, Workflow
from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.machine.transitions import start_run
from tests.factories import SYSTEM, new_run

pytestmark = pytest.mark.django_db

NAME = '</script><img src=x onerror=alert(1)>/billing'


class In(BaseModel):
    order: str


@pytest.fixture
def hostile_workflow():
    workflow = Workflow(NAME, version=1, input=In)

    @workflow.write("charge<b>", honours_key=True)
    def charge(ctx):
        return StepResult({}, remote_ref='javascript:alert(2)"><script>x</script>')

    @workflow.write("notify")
    def notify(ctx):
        raise PermanentError('rejected: "><img src=x onerror=alert(3)>')

    yield workflow
    definition.registry.unregister(workflow)


def test_the_pages_that_show_a_run_of_a_workflow_with_a_slash_in_its_name_answer_200_escaped(
        client_for, operator, hostile_workflow):
    run, _ = start_run(workflow=NAME, business_key="<svg onload=alert(4)>", input={"order": "1"},
                       actor=SYSTEM, wake=False)
    executor.advance_run(run.pk, worker="w1")
    other = new_run()
    client = client_for(operator)
    detail = reverse("console:run", args=[run.pk])
    for url, headers in [(reverse("console:runs"), {}), (reverse("console:attention"), {}),
                         (detail, {}), (f"{detail}?part=live", {"HTTP_HX_REQUEST": "true"}),
                         (reverse("console:investigation", args=[run.pk]), {})]:
        response = client.get(url, **headers)
        body = response.content.decode()
        assert response.status_code == 200, url
        for markup in ("<img", "<script>x", "<svg", "<b>", 'href="javascript'):
            assert markup not in body, (url, markup)
    listed = client.get(reverse("console:runs")).content.decode()
    # The rest of the list is still there.
    assert f"#{other.pk}<" in listed and f"#{run.pk}<" in listed


def test_the_link_to_such_a_workflow_leads_to_its_own_page(client_for, operator,
                                                          hostile_workflow):
    link = reverse("console:workflow", args=[NAME])
    assert resolve(unquote(link)).kwargs == {"name": NAME}
    page = client_for(operator).get(link)
    assert page.status_code == 200
    assert "&lt;/script&gt;&lt;img" in page.content.decode()


@pytest.mark.parametrize("name", ["a/b", "a~2Fb", "~", "..", ".", "a.b", "x/dispatch", "%2F"])
def test_each_workflow_name_has_a_path_of_its_own_that_reads_back_as_that_name(name):
    # The server matches a path as the browser sends it, percent-decoded.
    path = unquote(reverse("console:workflow", args=[name]))
    assert resolve(path).kwargs == {"name": name}
    assert resolve(unquote(reverse("console:dispatch_pause", args=[name]))).kwargs == {
        "workflow": name}
    assert resolve(unquote(reverse("console:schedule_pause", args=[name, name]))).kwargs == {
        "workflow": name, "name": name}
    # A segment a browser would read as "here" or "up" is never one of its paths.
    assert "/./" not in path and "/../" not in path


def test_a_path_with_an_escape_that_stands_for_no_character_is_no_workflows_page(
        client_for, operator):
    assert client_for(operator).get("/workflows/test~ZZorders/").status_code == 404
