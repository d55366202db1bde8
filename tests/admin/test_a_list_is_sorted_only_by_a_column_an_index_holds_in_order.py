"""The lists of tables that grow are sorted only by a column an index holds in order: a
sort by any other column read and sorted the whole table (a million runs sorted by status
at each page), and Django sorts by any column an address names, linked or not."""

import pytest
from django.contrib import admin

from audit.admin import FastListAdmin

from .test_admin_lists import admin_client  # noqa: F401 - the fixture
from .test_admin_searches_compare_the_column_itself_along_an_index import indexes_on

pytestmark = pytest.mark.django_db

GROWING = sorted(((model, model_admin) for model, model_admin in admin.site._registry.items()
                  if isinstance(model_admin, FastListAdmin)
                  and model_admin.sortable_by is not None),
                 key=lambda pair: pair[0]._meta.label)


def url_of(model) -> str:
    return f"/admin/{model._meta.app_label}/{model._meta.model_name}/"


def order_of(page) -> list:
    # Django repeats the admin's ordering in its own list's query: the same order.
    return list(dict.fromkeys(page.context["cl"].queryset.query.order_by))


@pytest.mark.parametrize(("model", "model_admin"), GROWING,
                         ids=[model._meta.label for model, _ in GROWING])
def test_an_address_asking_for_a_sort_by_another_column_gets_the_lists_own_order(
        admin_client, model, model_admin):  # noqa: F811
    own = admin_client.get(url_of(model))
    for index, column in enumerate(own.context["cl"].list_display):
        if column in model_admin.sortable_by:
            continue
        for order in (str(index), f"-{index}"):
            page = admin_client.get(url_of(model), {"o": order})
            assert page.status_code == 200
            assert order_of(page) == order_of(own), (column, order)


@pytest.mark.parametrize(("model", "model_admin"), GROWING,
                         ids=[model._meta.label for model, _ in GROWING])
def test_each_column_a_list_may_be_sorted_by_leads_an_index(model, model_admin):
    table = model._meta.db_table
    for column in model_admin.sortable_by:
        assert indexes_on(table, model._meta.get_field(column).column), (table, column)
