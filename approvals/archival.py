"""What the approvals app keeps of a run in an archive file (its approval requests and
their notifications), and how those rows leave the hot tables (see archive.parts)."""

from runs.archival import row_values

from .models import (
    BULK_JOB_REQUESTS,
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
    BulkJob,
    BulkJobPhase,
    BulkJobStatus,
    BulkOutcome,
    Notification,
)

ORDER = 20
ARCHIVED = (ApprovalRequest, Notification)
TRANSIENT = {
    ApprovalRequestUserObjectPermission: "who may decide; the request keeps who decided",
    ApprovalRequestGroupObjectPermission: "who may decide; the request keeps who decided",
    # A bulk job spans many runs and outlives them: what it did to each run is in that
    # run's audit records, which are archived with it.
    BulkJob: "a job over many runs; each run's audit records say what it did there",
    BulkOutcome: "a job's per-run outcome; the run's audit records are archived with it",
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


def pending(run_ids: list[int]) -> set[int]:
    """The runs of `run_ids` that a bulk job's four-eyes request not settled yet hangs on:
    it still decides the job's other runs after its own ended (withdrawal.no_longer_awaited),
    and archived with it, it would be gone, and with it their wait for a second person.
    So, while a job applies its approval (approvals.bulk_approved), do the runs it has yet
    to reach, and the run its approved request hangs on: the worker names the approver
    and the decision from that request."""
    applying = BulkJob.objects.filter(status=BulkJobStatus.RUNNING,
                                      phase=BulkJobPhase.APPLYING)
    unsettled = ApprovalRequest.objects.filter(BULK_JOB_REQUESTS, run_id__in=run_ids,
                                               settled_at__isnull=True)
    approved = ApprovalRequest.objects.filter(run_id__in=run_ids,
                                              pk__in=applying.values("approval_id"))
    unreached = BulkOutcome.objects.filter(job__in=applying, run_id__in=run_ids,
                                           outcome=BulkOutcome.Outcome.SECOND_PERSON)
    return {*unsettled.values_list("run_id", flat=True),
            *approved.values_list("run_id", flat=True),
            *unreached.values_list("run_id", flat=True)}


def remove(run_ids: list[int]) -> None:
    Notification.objects.filter(request__run_id__in=run_ids).delete()
    requests = ApprovalRequest.objects.filter(run_id__in=run_ids)
    # A bulk job's four-eyes request may hang on one of these runs: the job keeps its
    # history, the request goes to the archive with its run.
    BulkJob.objects.filter(approval__in=requests).update(approval=None)
    ApprovalRequestUserObjectPermission.objects.filter(content_object__in=requests).delete()
    ApprovalRequestGroupObjectPermission.objects.filter(content_object__in=requests).delete()
    # Requests point at the requests they superseded (PROTECT): unlink them, then one
    # DELETE for the batch rather than one per request while the runs are locked.
    requests.exclude(superseded_by=None).update(superseded_by=None)
    requests.delete()
