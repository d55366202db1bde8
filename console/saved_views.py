"""Saved views of the runs list: a person's own, and those shared with everyone."""

from django.db.models import Q
from django.http import QueryDict

from runs.machine.storable import person_text_problem

from . import run_list
from .forms import RunFilterForm
from .models import SavedView

NAME_MAX = 100
# The list's parameters a view keeps (the page cursor and the poll's stamp are not views).
KEPT = tuple(RunFilterForm.base_fields)


class SavedViewError(ValueError):
    """A view that cannot be saved, with what is wrong, for the person who tried."""


def _seen_by(user):
    """The views `user` may see: their own and those shared."""
    return SavedView.objects.filter(Q(owner=user) | Q(shared=True)).select_related("owner")


def visible_to(user) -> list[SavedView]:
    """The person's own views, then those others share, by name: one query."""
    return sorted(_seen_by(user), key=lambda v: (v.owner_id != user.pk, v.name.lower()))


def clean_query(raw: str) -> str:
    """The list's query string `raw` cut to the parameters of a view, each checked as the
    list's filter form checks it."""
    given = QueryDict(raw)
    kept = QueryDict(mutable=True)
    for name in KEPT:
        for value in given.getlist(name):
            if value != "":
                kept.appendlist(name, value)
    form = RunFilterForm(kept)
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(errors)}" if field != "__all__"
                             else " ".join(errors) for field, errors in form.errors.items())
        raise SavedViewError(f"These filters are not valid: {problems}")
    return kept.urlencode()


def save_view(*, user, name: str, query: str, shared: bool) -> SavedView:
    """Save (or replace) the person's view called `name`."""
    name = " ".join(name.split())
    if not name:
        raise SavedViewError("A saved view needs a name.")
    if len(name) > NAME_MAX:
        raise SavedViewError(f"A view's name has at most {NAME_MAX} characters "
                             f"({len(name)} given).")
    # Others read a shared view's name: held to the rule of every person's text, which
    # refuses what would make it read as other text (bidi overrides, terminal escapes).
    if (problem := person_text_problem(name)) is not None:
        raise SavedViewError(f"A view's name: {problem}.")
    query = clean_query(query)
    if not run_list.fits_in_link(query):
        # A view is opened by its link: one too long to follow would be saved for nothing.
        raise SavedViewError(f"Its filters are too long for a link ({len(query)} "
                             "characters); shorten the search.")
    view, _ = SavedView.objects.update_or_create(
        owner=user, name=name, defaults={"query": query, "shared": shared})
    return view


def delete_view(*, user, view_id: int) -> SavedView:
    """Delete the person's own view `view_id`; a shared view is deleted by its owner only.
    Another's private view does not exist for the person (DoesNotExist, as for no view):
    refusing it by name would tell them what others keep and who they are."""
    view = _seen_by(user).filter(pk=view_id).first()
    if view is None:
        raise SavedView.DoesNotExist(f"No saved view {view_id}.")
    if view.owner_id != user.pk:
        raise PermissionError(f"The view {view.name!r} is {view.owner.get_username()}'s: "
                              f"only they may delete it.")
    view.delete()
    return view
