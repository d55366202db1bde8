from celery import shared_task

from . import webhooks


@shared_task(name="api.publish_webhooks")
def publish_webhooks() -> dict:
    return webhooks.publish().__dict__
