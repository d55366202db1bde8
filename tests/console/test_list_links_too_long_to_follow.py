"""A runs list query too long for a link (Django refuses to redirect to a URL over
MAX_URL_REDIRECT_LENGTH characters) never turns a change into an error page: a saved view
holding one is refused before anything is written, and the way back to the list after a
change that was made drops the query it cannot carry."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils.http import MAX_URL_REDIRECT_LENGTH

from console.models import SavedView
from runs.models import Run, RunStatus
from tests.factories import drawn

pytestmark = pytest.mark.django_db

TOO_LONG = MAX_URL_REDIRECT_LENGTH + 1


def _errors(response) -> list[str]:
    return [m.message for m in get_messages(response.wsgi_request) if m.level_tag == "error"]


def _filters_as_long_as(length: int) -> str:
    """A valid query of `length` characters: a search is at most 300 characters
    (runs.reads.filter_problems), so the length is made of a filter given again and again
    (the form reads the last), the search making up the rest."""
    repeats = (length - 3) // len("&status=attention")
    query = "q=" + "b" * (length - 2 - repeats * len("&status=attention"))
    return query + "&status=attention" * repeats


def test_a_view_whose_query_is_too_long_for_a_link_is_refused_and_not_saved(client_for,
                                                                            operator):
    response = client_for(operator).post(reverse("console:save_view"), {
        "name": "long2", "query": _filters_as_long_as(MAX_URL_REDIRECT_LENGTH)})
    assert response.status_code == 302 and response.url == reverse("console:runs")
    [error] = _errors(response)
    assert error.startswith("The view was not saved: Its filters are too long for a link")
    assert not SavedView.objects.exists()


def test_a_view_whose_search_is_longer_than_any_key_is_refused_by_the_search_rule(
        client_for, operator):
    response = client_for(operator).post(reverse("console:save_view"), {
        "name": "long3", "query": "q=" + "b" * TOO_LONG})
    [error] = _errors(response)
    assert error.startswith("The view was not saved: These filters are not valid: q: search: "
                            "at most 300 characters")
    assert not SavedView.objects.exists()


def test_a_view_whose_link_just_fits_is_saved_and_opened(client_for, operator):
    runs = reverse("console:runs")
    query = _filters_as_long_as(MAX_URL_REDIRECT_LENGTH - len(runs) - len("?"))
    response = client_for(operator).post(reverse("console:save_view"),
                                         {"name": "long1", "query": query})
    assert response.status_code == 302 and response.url == f"{runs}?{query}"
    assert SavedView.objects.get().query == query


def test_a_bulk_action_done_with_an_overlong_query_goes_back_to_the_list_without_it(
        client_for, operator, stuck_run):
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "resume", "run": [stuck_run.pk], "reason": "receiver fixed",
        "query": "q=" + "a" * TOO_LONG, **drawn(stuck_run)})
    assert response.status_code == 302 and response.url == reverse("console:runs")
    assert Run.objects.get(pk=stuck_run.pk).status != RunStatus.ATTENTION


def test_a_bulk_action_goes_back_to_the_list_it_was_taken_on(client_for, operator,
                                                            stuck_run):
    response = client_for(operator).post(reverse("console:bulk"), {
        "action": "resume", "run": [stuck_run.pk], "reason": "receiver fixed",
        "query": "status=attention&sort=created", **drawn(stuck_run)})
    assert response.url == f"{reverse('console:runs')}?status=attention&sort=created"
