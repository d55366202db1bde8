from celery import shared_task

from runs.execution.database_outage import beat_pass

from . import webhooks


@shared_task(name="api.publish_webhooks")
@beat_pass("api.publish_webhooks")
def publish_webhooks() -> dict:
    return webhooks.publish().__dict__
