"""Another person's private saved view does not exist for you: asking to delete it is
answered as for a view that does not exist (404), naming neither the view nor its owner,
and the view stays. A view shared with everyone is seen by all and deleted by its owner
only (403)."""

import pytest
from django.urls import reverse

from console.models import SavedView
from console.saved_views import save_view

pytestmark = pytest.mark.django_db

PRIVATE = "op private: layoff-tenant-42"


def test_deleting_anothers_private_view_is_not_found_and_names_nothing(
        client_for, operator, finance_operator):
    view = save_view(user=operator, name=PRIVATE, query="status=attention", shared=False)
    response = client_for(finance_operator).post(reverse("console:delete_view",
                                                         args=[view.pk]))
    assert response.status_code == 404
    body = response.content.decode()
    assert "layoff-tenant-42" not in body and operator.username not in body
    assert SavedView.objects.filter(pk=view.pk, owner=operator).exists()
    # The same answer as for an id no view has.
    missing = client_for(finance_operator).post(reverse("console:delete_view",
                                                        args=[view.pk + 1000]))
    assert missing.status_code == 404


def test_a_shared_view_is_still_deleted_by_its_owner_only(client_for, operator,
                                                          finance_operator):
    shared = save_view(user=operator, name="stuck payments", query="status=attention",
                       shared=True)
    refused = client_for(finance_operator).post(reverse("console:delete_view",
                                                        args=[shared.pk]))
    assert refused.status_code == 403
    assert SavedView.objects.filter(pk=shared.pk).exists()


def test_the_owner_deletes_their_private_view(client_for, operator):
    view = save_view(user=operator, name=PRIVATE, query="status=attention", shared=False)
    response = client_for(operator).post(reverse("console:delete_view", args=[view.pk]))
    assert response.status_code == 302
    assert not SavedView.objects.filter(pk=view.pk).exists()
