"""Bulk by filter in the console: preview what a filter matches, start the job with one
reason, follow its progress and per-run outcomes, cancel it. The job is approvals.bulk's;
these views parse, check and render."""

import uuid

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from approvals.bulk import (
    BulkRefused,
    bulk_preview,
    bulk_progress,
    cancel_bulk_job,
    forbidden_in_bulk,
    may_follow,
    may_watch,
    nothing_to_start,
    start_bulk_job,
)
from approvals.bulk_outcomes import outcomes_page
from approvals.models import BulkJob
from runs.machine.storable import whole_number
from runs.operator.actions import ACTIONS
from runs.reads.selectors import RunFilters

from .forms import RunFilterForm
from .run_list import BULK_BY_FILTER, fits_in_link
from .views import login_required, require_POST


def _filters(data) -> tuple[RunFilterForm, RunFilters | None]:
    """The filter a bulk action acts on, or None where the form refuses it. The one way
    the preview and the start read it: an invalid filter is refused, never read as no
    filter, which would be every run the person may see."""
    form = RunFilterForm(data)
    return form, (form.filters() if form.is_valid() else None)


def _invalid_filter(request, spec, form: RunFilterForm):
    """The preview page saying which filter fields are wrong and why, with nothing to
    start (400)."""
    query = QueryDict(mutable=True)
    for name in form.fields:
        if name in form.data:
            query.setlist(name, form.data.getlist(name))
    return render(request, "console/bulk_preview.html", {
        "action": spec, "actions": BULK_BY_FILTER, "form": form, "query": query.urlencode(),
        "problems": form.problems()}, status=400)


def _action(name: str):
    if name not in {a.name for a in BULK_BY_FILTER}:
        raise Http404(f"No bulk action {name!r}.")
    return ACTIONS[name]


@require_GET
@login_required
def bulk_preview_page(request):
    spec = _action(request.GET.get("action", ""))
    form, filters = _filters(request.GET)
    if filters is None:
        return _invalid_filter(request, spec, form)
    query = request.GET.copy()
    query.pop("action", None)
    preview = bulk_preview(spec.name, filters, user=request.user)
    return render(request, "console/bulk_preview.html", {
        "action": spec, "actions": BULK_BY_FILTER, "form": form, "query": query.urlencode(),
        "preview": preview, "filters": form.given(), "start_key": uuid.uuid4().hex,
        # A start would be refused (start_bulk_job): the page offers none.
        "forbidden": forbidden_in_bulk(spec, request.user) or "",
        "nothing_to_start": nothing_to_start(spec, filters, preview) or ""})


@require_POST
@login_required
def bulk_start(request):
    spec = _action(request.POST.get("action", ""))
    form, filters = _filters(request.POST)
    if filters is None:
        return _invalid_filter(request, spec, form)
    # The count on the preview's button; a form drawn before the preview carried it has none.
    given = request.POST.get("previewed")
    previewed = whole_number(given) if given is not None else None
    if given is not None and previewed is None:
        messages.error(request, "Nothing was started: the form did not say how many runs its "
                                "preview counted (its 'previewed' field). Start the job from "
                                "its preview.")
        return _back_to_preview(request, spec)
    try:
        job, _ = start_bulk_job(spec.name, filters, user=request.user,
                                reason=request.POST.get("reason", ""), previewed=previewed,
                                start_key=request.POST.get("start_key", ""))
    except BulkRefused as exc:
        messages.error(request, f"Nothing was started: {exc}")
        return _back_to_preview(request, spec)
    return redirect("console:bulk_job", job_id=job.pk)


def _back_to_preview(request, spec):
    # The preview of the same filter, unless its query cannot be a link.
    query = f"{request.POST.get('query', '')}&action={spec.name}"
    if not fits_in_link(query, page="console:bulk_preview"):
        query = f"action={spec.name}"
    return redirect(f"{reverse('console:bulk_preview')}?{query}")


def _visible_job(request, job_id: int, *, rule=may_follow) -> BulkJob:
    job = BulkJob.objects.filter(pk=job_id).first()
    if job is None:
        raise Http404(f"No bulk job {job_id}.")
    if not rule(request.user, job):
        raise PermissionDenied("This bulk job is another person's.")
    return job


@require_GET
@login_required
def bulk_job_page(request, job_id: int):
    job = _visible_job(request, job_id, rule=may_watch)
    progress = bulk_progress(job_id)
    # Its outcomes a page at a time (a number that is none starts at the first), the rest
    # counted; the page polled stays the page shown.
    outcomes = outcomes_page(progress, whole_number(request.GET.get("outcomes_page", "")))
    template = "console/_bulk_progress.html" if request.htmx else "console/bulk_job.html"
    return render(request, template, {
        "job": progress.job, "counts": progress.counts, "handled": progress.handled,
        "skipped": progress.skipped,
        "outcomes": outcomes, "label": ACTIONS[progress.job.action].label,
        "live": progress.job.status == "running",
        # The approver follows the approval's progress; the job stays its starter's to cancel.
        "may_cancel": may_follow(request.user, job)})


@require_POST
@login_required
def bulk_cancel(request, job_id: int):
    _visible_job(request, job_id)
    if cancel_bulk_job(job_id, user=request.user):
        messages.success(request, "Cancelled: no further run is acted on; what was done "
                                  "stays done.")
    else:
        messages.error(request, "The job had already finished.")
    return redirect("console:bulk_job", job_id=job_id)
