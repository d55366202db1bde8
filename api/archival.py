"""What the API app keeps of a run in an archive file (the webhook deliveries of its
events: who was told what, and whether it arrived), and how those rows leave the hot
tables (see archive.parts)."""

from runs.archival import row_values

from .models import WebhookDelivery

ORDER = 30
ARCHIVED = (WebhookDelivery,)
TRANSIENT: dict = {}


def rows(run_ids: list[int]) -> dict[int, dict]:
    out = {run_id: {"webhook_deliveries": []} for run_id in run_ids}
    for delivery in row_values(WebhookDelivery.objects.filter(event__run_id__in=run_ids)
                               .order_by("event__run_id", "event_id", "id"),
                               ("archived_run_id", "event__run_id")):
        out[delivery.pop("archived_run_id")]["webhook_deliveries"].append(delivery)
    return out


def remove(run_ids: list[int]) -> None:
    WebhookDelivery.objects.filter(event__run_id__in=run_ids).delete()
