"""What the approvals app keeps of a run in an archive file (its approval requests and
their notifications), and how those rows leave the hot tables (see archive.parts)."""

from runs.archival import row_values

from .models import (
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
    Notification,
)

ORDER = 20
ARCHIVED = (ApprovalRequest, Notification)
TRANSIENT = {
    ApprovalRequestUserObjectPermission: "who may decide; the request keeps who decided",
    ApprovalRequestGroupObjectPermission: "who may decide; the request keeps who decided",
}


def rows(run_ids: list[int]) -> dict[int, dict]:
    out = {run_id: {"approvals": [], "notifications": []} for run_id in run_ids}
    for request in row_values(ApprovalRequest.objects.filter(run_id__in=run_ids)
                              .order_by("run_id", "id")):
        out[request["run_id"]]["approvals"].append(request)
    for note in row_values(Notification.objects.filter(request__run_id__in=run_ids)
                           .order_by("request__run_id", "request_id", "id"),
                           ("archived_run_id", "request__run_id")):
        out[note.pop("archived_run_id")]["notifications"].append(note)
    return out


def remove(run_ids: list[int]) -> None:
    Notification.objects.filter(request__run_id__in=run_ids).delete()
    requests = ApprovalRequest.objects.filter(run_id__in=run_ids)
    ApprovalRequestUserObjectPermission.objects.filter(content_object__in=requests).delete()
    ApprovalRequestGroupObjectPermission.objects.filter(content_object__in=requests).delete()
    # Requests point at the requests they superseded (PROTECT): unlink them, then one
    # DELETE for the batch rather than one per request while the runs are locked.
    requests.exclude(superseded_by=None).update(superseded_by=None)
    requests.delete()
