"""A saved view's name (shared ones are shown to everyone) is held to the rule of every
person's text: a bidirectional override or a terminal control character is refused with
what is wrong, and nothing is saved."""

import pytest
from django.urls import reverse

from console import saved_views
from console.models import SavedView

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["\u202eevil", "\x1b[31mred", "a\u2066b", "bell\x07",
                                  "del\x7f", "csi\x9b31m", "nul\x00"])
@pytest.mark.parametrize("shared", ["on", ""])
def test_a_name_with_a_control_character_is_refused_and_nothing_is_saved(
        client_for, operator, name, shared):
    response = client_for(operator).post(reverse("console:save_view"), {
        "name": name, "query": "status=attention", "shared": shared}, follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "The view was not saved: A view&#x27;s name:" in page
    assert "control character" in page or "NUL" in page
    assert not SavedView.objects.exists()


def test_the_function_refuses_it_too(operator):
    with pytest.raises(saved_views.SavedViewError, match="U\\+202E"):
        saved_views.save_view(user=operator, name="\u202eevil", query="", shared=True)
    assert not SavedView.objects.exists()


@pytest.mark.parametrize(("given", "kept"), [("  on\tcall\nview ", "on call view"),
                                             ("👩‍💻 team", "👩‍💻 team"),
                                             ("stuck runs", "stuck runs")])
def test_a_name_of_ordinary_text_is_saved(operator, given, kept):
    view = saved_views.save_view(user=operator, name=given, query="status=attention",
                                 shared=True)
    assert SavedView.objects.get(pk=view.pk).name == kept
