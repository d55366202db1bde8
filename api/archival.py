"""What the API app keeps of a run in an archive file (the webhook deliveries of its
events: who was told what, and whether it arrived), and how those rows leave the hot
tables (see archive.parts)."""

from django.db.models import Q
from django.db.models.functions import Coalesce

from runs.archival import row_values

from .models import WebhookDelivery

# Before audit (10): a delivery of a step outcome points at its audit record.
ORDER = 5
ARCHIVED = (WebhookDelivery,)
TRANSIENT: dict = {}


def _of(run_ids: list[int]):
    # A delivery of a status change points at its event, one of a step's outcome at its
    # audit record: either way at the run.
    return WebhookDelivery.objects.filter(Q(event__run_id__in=run_ids)
                                          | Q(record__run_id__in=run_ids))


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
