"""What the API app keeps of a run in an archive file (the webhook deliveries of its
events: who was told what, and whether it arrived), and how those rows leave the hot
tables (see archive.parts).

A run stays in the hot tables while an active subscriber has not been told all of it
(pending): removing it would delete its deliveries unsent, and the subscriber would never get
them. A deactivated subscriber holds no run: deactivating is how an admin stops a subscriber,
and a receiver switched off for good must not keep every run of its workflows hot for ever.
What was queued for it leaves with its run (the file keeps it, still "pending"); the rest
waits for it, as before, while its runs are hot."""

from django.db.models import Exists, OuterRef
from django.db.models.functions import Coalesce

from runs.archival import row_values

from . import webhook_cursors
from .models import WebhookDelivery, WebhookSubscriber
from .selectors import deliveries_of

# Before audit (10): a delivery of a step outcome points at its audit record.
ORDER = 5
ARCHIVED = (WebhookDelivery,)
TRANSIENT: dict = {}


def _of(run_ids: list[int]):
    # A delivery of a status change points at its event, one of a step's outcome at its
    # audit record: either way at the run.
    return deliveries_of(run_ids)


def rows(run_ids: list[int]) -> dict[int, dict]:
    out = {run_id: {"webhook_deliveries": []} for run_id in run_ids}
    for delivery in row_values(_of(run_ids)
                               .annotate(of_run=Coalesce("event__run_id", "record__run_id"))
                               .order_by("of_run", "event_id", "record_id", "id"),
                               ("archived_run_id", "of_run")):
        out[delivery.pop("archived_run_id")]["webhook_deliveries"].append(delivery)
    return out


def remove(run_ids: list[int]) -> None:
    _of(run_ids).delete()


def pending(run_ids: list[int]) -> set[int]:
    """The runs of `run_ids` that an active subscriber taking their workflow has not yet
    been told all of: a delivery still pending (its receiver is down and it is retried), or
    a status change or step outcome its cursors have not reached (not queued yet). A
    delivery delivered or given up (webhooks.RETRY, withdrawn) holds nothing. Each query
    reads the rows of these runs only, whatever the size of the tables."""
    subscribers = list(WebhookSubscriber.objects.filter(active=True))
    if not run_ids or not subscribers:
        return set()
    held = set()
    waiting = (_of(run_ids).filter(status=WebhookDelivery.Status.PENDING,
                                   subscriber__active=True)
               .annotate(of_run=Coalesce("event__run_id", "record__run_id"),
                         workflow=Coalesce("event__run__workflow_name",
                                           "record__run__workflow_name"))
               .values_list("subscriber_id", "of_run", "workflow").distinct())
    takes = {s.pk: set(s.workflows or []) for s in subscribers}
    for subscriber_id, run_id, workflow in waiting:
        # One of a workflow its subscriber no longer takes is withdrawn, never sent.
        if subscriber_id in takes and (not takes[subscriber_id]
                                       or workflow in takes[subscriber_id]):
            held.add(run_id)
    for subscriber in subscribers:
        events, records = webhook_cursors.news_for(subscriber)
        # Rows past a cursor may have their delivery already (queued past a hole): those
        # count as the deliveries they are, above.
        unqueued_events = events.filter(
            run_id__in=run_ids, pk__gt=subscriber.last_event_id).exclude(
            Exists(WebhookDelivery.objects.filter(subscriber=subscriber,
                                                  event_id=OuterRef("pk"))))
        unqueued_records = records.filter(
            run_id__in=run_ids, pk__gt=subscriber.last_record_id).exclude(
            Exists(WebhookDelivery.objects.filter(subscriber=subscriber,
                                                  record_id=OuterRef("pk"))))
        held.update(unqueued_events.values_list("run_id", flat=True).distinct())
        held.update(unqueued_records.values_list("run_id", flat=True).distinct())
    return held
