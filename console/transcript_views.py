"""The artifact an agent's turn keeps, downloaded from the run page: a summary turn's
transcript (the turns the summary covers, in full: runs.agents.agent_history), or a final
answer longer than RUNS_AGENT_TEXT_MAX_CHARS whole (its turn keeps only its start:
runs.agents.turn_bounds). Whoever may view the run may download it; the artifact is
checked against its sha256 before it is served, and one missing or damaged is refused with
the reason (410), never served."""

import logging

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET

from runs.machine import artifacts
from runs.reads.agent_selectors import turn_with_artifact

from .permissions import VIEW, grant_for
from .views import login_required

logger = logging.getLogger(__name__)


@require_GET
@login_required
def turn_artifact(request, run_id: int, turn_id: int):
    found = turn_with_artifact(run_id, turn_id)
    if found is None:
        raise Http404(f"No transcript or whole answer of turn {turn_id} in run {run_id}.")
    run, turn = found
    what = "transcript" if turn.summarises else "answer"
    if not grant_for(request.user, VIEW).covers(run.workflow_id):
        raise PermissionDenied("You may not view this run.")
    try:
        body = artifacts.read(turn.transcript)
    except artifacts.ArtifactUnreadable as exc:
        # Never served in place of the turns it should hold; the operator learns why, and
        # the sha256 the run keeps is what a restored file must match.
        logger.error("run %s, turn %s's %s: %s", run.pk, turn.pk, what, exc)
        return HttpResponse(
            f"The {what} of turn {turn.index} of step {turn.step.name} is not served: "
            f"{exc}. Restore the file from a backup; the run keeps the sha256 it must "
            "match.\n", status=410, content_type="text/plain; charset=utf-8",
            headers={"X-Content-Type-Options": "nosniff"})
    response = HttpResponse(body, content_type="application/json")
    # An attachment: the model wrote this text, and a browser is not to render it.
    response["Content-Disposition"] = content_disposition_header(
        True, f"run-{run.pk}-{turn.step.name}-turn-{turn.index}-{what}.json")
    response["X-Content-Type-Options"] = "nosniff"
    return response
