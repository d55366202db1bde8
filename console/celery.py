import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # the tasks module of every installed app


@app.on_after_finalize.connect
def schedule_sweeper(sender, **kwargs):
    from django.conf import settings

    sender.add_periodic_task(settings.SWEEP_INTERVAL_SECONDS, sender.signature("runs.sweep"))
    sender.add_periodic_task(settings.SCHEDULES_INTERVAL_SECONDS,
                             sender.signature("runs.fire_schedules"))
    sender.add_periodic_task(settings.APPROVALS_SWEEP_INTERVAL_SECONDS,
                             sender.signature("approvals.sweep"))
    sender.add_periodic_task(settings.WEBHOOK_PUBLISH_INTERVAL_SECONDS,
                             sender.signature("api.publish_webhooks"))
    sender.add_periodic_task(settings.ARCHIVE_INTERVAL_SECONDS,
                             sender.signature("archive.archive_runs"))


def keep_healthy_connections(sender=None, **kwargs):
    """Around every task, what Django does around every request: close the connections that
    outlived DB_CONN_MAX_AGE or broke during the task, and have the others checked before
    their next use. A connection the server killed while the worker waited (a
    pg_terminate_backend, a restart, a failover) is so replaced before the task uses it,
    instead of failing the task's first statement.

    A task marked replaces_broken_connection (runs.tasks.advance_run, the hot path) skips
    that check: it tries its work once more at once on a new connection when the first one
    turns out dead, instead of paying a "SELECT 1" (a round trip and a transaction) per run.

    Celery's Django fixup would close them all instead (see CELERY_DB_REUSE_MAX): a new
    session, with its authentication and catalog warm-up, for every task."""
    if getattr(getattr(sender, "request", None), "is_eager", False):
        return  # run inline by its caller, inside the caller's task or transaction
    from django.db import connections

    check = not getattr(sender, "replaces_broken_connection", False)
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close_if_unusable_or_obsolete()
            if not check and conn.connection is not None:
                conn.health_check_done = True


@worker_init.connect
def _connect_connection_checks(**kwargs):
    # Workers only: the web server has Django's own request signals for this.
    task_prerun.connect(keep_healthy_connections, weak=False, dispatch_uid="db-prerun")
    task_postrun.connect(keep_healthy_connections, weak=False, dispatch_uid="db-postrun")
