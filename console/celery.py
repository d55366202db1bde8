import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # the tasks module of every installed app


@app.on_after_finalize.connect
def schedule_sweeper(sender, **kwargs):
    from django.conf import settings

    sender.add_periodic_task(settings.SWEEP_INTERVAL_SECONDS, sender.signature("runs.sweep"))
    sender.add_periodic_task(settings.APPROVALS_SWEEP_INTERVAL_SECONDS,
                             sender.signature("approvals.sweep"))
    sender.add_periodic_task(settings.WEBHOOK_PUBLISH_INTERVAL_SECONDS,
                             sender.signature("api.publish_webhooks"))
