"""The API's metrics: the webhook outbox and API tokens close to expiry. ApiConfig.ready()
hands `metric_families` to observability's collector, which calls it at scrape time."""

from django.conf import settings
from django.db.models import Count, Min
from django.db.models.functions import Coalesce
from prometheus_client.core import GaugeMetricFamily

from .models import WebhookDelivery
from .tokens import tokens_expiring_soon
from .webhook_cursors import unqueued_age


def metric_families(now):
    """The API's metric families at `now` (read from the database when scraped)."""
    yield from _webhooks(now)
    yield _api_tokens(now)


def _api_tokens(now):
    family = GaugeMetricFamily(
        "durable_api_tokens_expiring_soon",
        f"Usable API tokens that expire within {settings.API_TOKEN_EXPIRY_WARNING_DAYS} "
        f"days (API_TOKEN_EXPIRY_WARNING_DAYS): their callers get 401 after that.")
    family.add_metric([], tokens_expiring_soon(now))
    return family


def _webhooks(now):
    # An inactive subscriber's deliveries wait on purpose (api.webhooks.send_due): counted,
    # they would grow the backlog's age until an alert fired on a choice an admin made.
    # A delivery tells a status change (event) or a step outcome (record): the oldest of
    # either, where the events' alone left a backlog of outcomes ageless.
    backlog = WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING, subscriber__active=True).aggregate(
        n=Count("id"), oldest=Min(Coalesce("event__created_at", "record__created_at")))
    family = GaugeMetricFamily("durable_webhook_backlog",
                               "Progress events not yet delivered to an active subscriber.")
    family.add_metric([], backlog["n"])
    yield family
    family = GaugeMetricFamily("durable_webhook_oldest_seconds",
                               "Age of the oldest progress event not yet delivered to an "
                               "active subscriber (0 if none).")
    family.add_metric([], (now - backlog["oldest"]).total_seconds()
                      if backlog["oldest"] else 0)
    yield family
    family = GaugeMetricFamily(
        "durable_webhook_unqueued_seconds",
        "Age of the oldest status change or step outcome written that an active subscriber's "
        "cursor has not yet queued or passed (0 if none): grows while the publisher does not "
        "run, or holds rows back behind more holes than it keeps (api.webhook_cursors).")
    family.add_metric([], unqueued_age(now))
    yield family
    family = GaugeMetricFamily("durable_webhook_failed",
                               "Deliveries given up after their last attempt.")
    family.add_metric([], WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.FAILED).count())
    yield family
