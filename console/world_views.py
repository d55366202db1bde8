"""The console's pages for waiting on the world: the schedules list, pausing and resuming
a schedule or a workflow's dispatch, and the banner a paused workflow shows on each of its
pages. Thin, like console.views: pausing and resuming go through
approvals.operator_actions.act_on_workflow (the permission and the change), then redirect."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, Subquery
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.views.decorators.http import require_GET

from approvals.operator_actions import (
    ActionForbidden,
    NoSuchWorkflow,
    act_on_workflow,
    refuse_workflow_action,
)
from runs.definitions import definition
from runs.machine import dispatch
from runs.machine.storable import text_problem
from runs.models import DispatchPause, Run, Workflow
from runs.reads.schedule_list import schedule_rows
from runs.waiting import schedules

from .permissions import VIEW, grant_for
from .views import login_required, require_POST


def _visible_names(user) -> set[str] | None:
    grant = grant_for(user, VIEW)
    if grant.everywhere:
        return None
    if not grant.workflow_ids:
        raise PermissionDenied("You may not view runs.")
    return set(Workflow.objects.filter(pk__in=grant.workflow_ids)
               .values_list("name", flat=True))


@require_GET
@login_required
def schedules_page(request):
    names = _visible_names(request.user)
    rows = schedule_rows(workflows=names)
    pause_grant = grant_for(request.user, dispatch.PERMISSION)
    ids = dict(Workflow.objects.filter(name__in={r.schedule.workflow_name for r in rows})
               .values_list("name", "pk"))
    for row in rows:
        row.may_pause = row.schedule.workflow_name in ids and pause_grant.covers(
            ids[row.schedule.workflow_name])
    return render(request, "console/schedules.html", {"rows": rows})


# The form's `paused` field: which of the two actions it asks for. Any other value, or
# none, is refused: read as "not 1", a form that lost the field would resume what was
# paused for an incident.
PAUSED = {"1": True, "0": False}


def _paused(request) -> bool | None:
    """What the form's `paused` field asks for (PAUSED), or None. Sent more than once it
    asks for nothing: the last value alone would count, and paused=1&paused=0 would resume
    what the person meant to keep paused."""
    sent = request.POST.getlist("paused")
    return PAUSED.get(sent[0]) if len(sent) == 1 else None


@require_POST
@login_required
def schedule_pause(request, workflow: str, name: str):
    paused = _paused(request)
    if _acted(request, ("resume_schedule", "pause_schedule"), paused, workflow,
              what="this schedule", refused=schedules.ScheduleError, schedule=name):
        messages.success(request, f"Schedule {name} {'paused' if paused else 'resumed'}.")
    return redirect("console:schedules")


def _acted(request, actions: tuple[str, str], paused: bool | None, workflow: str, *,
           what: str, refused: type[Exception], **params) -> bool:
    """Of `actions`, the (resume, pause) pair, the one `paused` asks for, through
    act_on_workflow, with its refusals as the console shows them: 403 without the permission
    (whether the workflow exists or not), 404 for an unknown workflow, then a message for a
    refusal of the input (no valid `paused`, text the database cannot store, the action's
    own: `refused`). True if it was done."""
    try:
        if paused is None:
            # The permission and the names first, as act_on_workflow checks them.
            refuse_workflow_action(actions[True], workflow, user=request.user,
                                   schedule=params.get("schedule", ""))
            messages.error(request, "Nothing was changed: paused: the form must say 1 (pause) "
                                    "or 0 (resume).")
            return False
        act_on_workflow(actions[paused], workflow, user=request.user,
                        reason=request.POST.get("reason", ""), **params)
    except ActionForbidden:
        raise PermissionDenied(f"You may not pause or resume {what}.") from None
    except NoSuchWorkflow as exc:
        raise Http404(str(exc)) from None
    except refused as exc:
        messages.error(request, f"Nothing was changed: {exc}")
        return False
    return True


@require_POST
@login_required
def dispatch_pause(request, workflow: str):
    pause = _paused(request)
    system = request.POST.get("system", "").strip()
    if _acted(request, ("resume_dispatch", "pause_dispatch"), pause, workflow,
              what="this workflow", refused=dispatch.DispatchError, system=system):
        where = f" towards {system}" if system else ""
        messages.success(request, f"Dispatch of {workflow}{where} "
                                  f"{'paused' if pause else 'resumed'}.")
    return redirect(reverse("console:workflow", args=[workflow]))


def dispatch_banner(request) -> dict:
    """Context processor: the pauses of the workflow a page is about (a run's page, the
    workflow's page, the runs list filtered to it, the schedules list), for the banner of
    base.html; none on other pages.

    Only pauses of workflows the person may view (runs.permissions' rule): a pause names
    its workflow, who paused it and why, and on a run's page which workflow the run id is.
    Read lazily, when a template draws them: the error pages (400, 403, 404, 413) leave the
    banner out, so a page the person was refused tells nothing and reads nothing. Then one
    query (read here, not through runs.machine.dispatch's per-process cache, so a page
    always tells the truth), and the person's grant only when something is paused."""
    match = getattr(request, "resolver_match", None)
    user = getattr(request, "user", None)
    if match is None or match.namespace != "console" or user is None or \
            not user.is_authenticated:
        return {}
    pauses = DispatchPause.objects.order_by("workflow_name", "system").annotate(
        workflow_pk=Subquery(Workflow.objects.filter(name=OuterRef("workflow_name"))
                             .values("pk")[:1]))
    extra = {}
    if match.url_name == "workflow":
        name = match.kwargs.get("name", "")
        pauses = pauses.filter(workflow_name=name)
        # The workflow's page offers pause and resume to those who may.
        extra = {"may_pause_dispatch": SimpleLazyObject(lambda: dispatch.may_pause(user, name)),
                 "dispatch_systems": sorted({s.system for wf in definition.registry.versions(name)
                                             for s in wf.steps if s.system})}
    elif match.url_name in ("run", "investigation") and "run_id" in match.kwargs:
        pauses = pauses.filter(workflow_name=Subquery(
            Run.objects.filter(pk=match.kwargs["run_id"]).values("workflow_name")[:1]))
    elif match.url_name == "runs" and request.GET.get("workflow"):
        name = request.GET["workflow"]
        if text_problem(name) is not None:
            # No workflow has it as its name; the database would refuse to compare it.
            return {}
        pauses = pauses.filter(workflow_name=name)
    elif match.url_name != "schedules":
        return {}
    shown = SimpleLazyObject(lambda: _viewable(user, pauses))
    if extra:
        extra["workflow_pauses"] = shown
    return {"dispatch_pauses": shown, **extra}


def _viewable(user, pauses) -> list[DispatchPause]:
    rows = list(pauses)
    if not rows:
        return []
    # Asked only now: while nothing is paused (nearly always), a page pays one query.
    grant = grant_for(user, VIEW)
    return [pause for pause in rows if grant.covers(pause.workflow_pk)]
