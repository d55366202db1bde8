"""The runs list's rows refresh themselves every few seconds (htmx, ?rows=ids) while one can
still change. The refresh drew them newest change first, whatever the person sorted the list
by: a list sorted by creation, oldest first, was reordered by its own poll, against its sort
arrow and the cursor its next page goes on from. The rows come back in the page's order."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def shown(body: str) -> list[int]:
    return list(dict.fromkeys(int(pk) for pk in re.findall(r"#(\d+)<", body)))


@pytest.mark.parametrize("sort", ["created", "-created"])
def test_the_rows_poll_keeps_the_order_the_list_is_sorted_by(client_for, operator, sort):
    older, newer = new_run(wake=False), new_run(wake=False)
    client = client_for(operator)
    page = client.get(reverse("console:runs"), {"sort": sort}).content.decode()
    order = shown(page)
    assert sorted(order) == [older.pk, newer.pk]
    poll = re.search(r'hx-get="([^"]*\?rows=[^"]*)"', page).group(1)
    # The run shown first changes least recently: a refresh by change time would swap them.
    place(older if order[0] == newer.pk else newer, status=RunStatus.WAITING,
          updated_at=timezone.now())

    rows = client.get(poll, HTTP_HX_REQUEST="true").content.decode()

    assert shown(rows) == order
