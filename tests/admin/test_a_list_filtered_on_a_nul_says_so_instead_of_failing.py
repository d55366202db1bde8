"""Django admin takes any field of a model as a filter from the address; PostgreSQL holds no
NUL in text. A hand-edited address with one gets every list back, unfiltered, with a message
saying why: never a server error."""

import pytest
from django.contrib import admin
from django.contrib.messages import get_messages
from django.db import models

from audit.admin import NUL_FILTER_REFUSED

from .test_admin_lists import admin_client, grow  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def text_field(model) -> str:
    return next(f.name for f in model._meta.concrete_fields
                if isinstance(f, (models.CharField, models.TextField)))


LISTS = sorted(((m._meta.app_label, m._meta.model_name, text_field(m))
                for m in admin.site._registry), key=str)


@pytest.mark.parametrize(("app", "model", "field"), LISTS,
                         ids=lambda v: v if isinstance(v, str) else None)
def test_a_filter_holding_a_nul_shows_the_list_unfiltered_with_a_message(
        admin_client, app, model, field):  # noqa: F811
    grow(1)
    admin_client.raise_request_exception = False
    base = f"/admin/{app}/{model}/"
    response = admin_client.get(base, {field: "a\x00b"})
    assert response.status_code == 302, response.status_code
    assert response["Location"] == base
    assert [str(m) for m in get_messages(response.wsgi_request)] == [NUL_FILTER_REFUSED]
    listed = admin_client.get(base)
    assert listed.status_code == 200
    assert NUL_FILTER_REFUSED in listed.text


def test_a_filter_without_a_nul_and_a_search_with_one_still_answer(admin_client):  # noqa: F811
    run, *_ = grow(2)
    filtered = admin_client.get("/admin/runs/run/", {"status": "attention"})
    assert filtered.status_code == 200 and NUL_FILTER_REFUSED not in filtered.text
    assert f"/admin/runs/run/{run.pk}/change/" in filtered.text
    # A search holding a NUL is the search's own to answer.
    searched = admin_client.get("/admin/runs/run/", {"q": "order\x00"})
    assert searched.status_code == 200 and NUL_FILTER_REFUSED not in searched.text
