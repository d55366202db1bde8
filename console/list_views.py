"""The pages around the runs list: saved views, the workers page."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from runs.reads import workers

from . import run_list, saved_views
from .models import SavedView
from .permissions import VIEW, grant_for
from .views import login_required, require_POST


def visible_workflows(user):
    """The workflows whose runs `user` may see (None: all), or 403 when none."""
    grant = grant_for(user, VIEW)
    if not grant.everywhere and not grant.workflow_ids:
        raise PermissionDenied("You may not view runs.")
    return None if grant.everywhere else grant.workflow_ids


@require_POST
@login_required
def save_view(request):
    visible_workflows(request.user)
    query = request.POST.get("query", "")
    try:
        view = saved_views.save_view(user=request.user, name=request.POST.get("name", ""),
                                     query=query, shared=request.POST.get("shared") == "on")
    except saved_views.SavedViewError as exc:
        messages.error(request, f"The view was not saved: {exc}")
        return redirect(run_list.list_url(query))
    messages.success(request, f"Saved the view {view.name!r}"
                              f"{' (shared with everyone)' if view.shared else ''}.")
    return redirect(run_list.list_url(view.query))


@require_POST
@login_required
def delete_view(request, view_id: int):
    visible_workflows(request.user)
    try:
        view = saved_views.delete_view(user=request.user, view_id=view_id)
    except SavedView.DoesNotExist as exc:
        raise Http404(str(exc)) from None
    except PermissionError as exc:
        raise PermissionDenied(str(exc)) from None
    messages.success(request, f"Deleted the view {view.name!r}.")
    return redirect("console:runs")


@require_GET
@login_required
def workers_page(request):
    page = workers.workers_page(workflow_ids=visible_workflows(request.user))
    return render(request, "console/workers.html", {"page": page})
