import os

from celery import Celery
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

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


# The worker registry (runs.workers): the process that runs tasks beats, the one whose pid
# its leases carry. The prefork and solo pools announce it with worker_process_init (each
# child; the worker itself for solo); the thread pools do not, so the worker registers
# itself once ready.
_heartbeat = None


def _consumed_queues(app) -> str:
    try:
        return ",".join(sorted(app.amqp.queues.consume_from or app.amqp.queues))
    except Exception:  # the registry must never keep a worker from starting
        return ""


def _start_heartbeat(app) -> None:
    global _heartbeat
    from runs.workers import Heartbeat

    _heartbeat = Heartbeat(queues=_consumed_queues(app)).start()


def _stop_heartbeat() -> None:
    global _heartbeat
    if _heartbeat is not None:
        _heartbeat.stop()
        _heartbeat = None


@worker_ready.connect
def _register_worker(sender=None, **kwargs):
    pool = getattr(sender, "pool", None)
    if _heartbeat is None and "prefork" not in type(pool).__module__:
        _start_heartbeat(sender.app)


@worker_process_init.connect
def _register_pool_process(**kwargs):
    _start_heartbeat(app)


@worker_shutdown.connect
@worker_process_shutdown.connect
def _unregister(**kwargs):
    _stop_heartbeat()
