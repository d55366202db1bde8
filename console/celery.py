import os
import sys
import warnings

from celery import Celery
from celery.exceptions import CPendingDeprecationWarning
from celery.signals import (
    celeryd_after_setup,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from .broker import use_shared_client_transport
from .env import load_settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
use_shared_client_transport()

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # the tasks module of every installed app


@app.on_configure.connect
def settings_or_exit(sender, **kwargs):
    # Celery reads its configuration from Django's settings when it first needs it: in a
    # worker or beat started by `celery -A console`, before anything else. A setting the
    # environment gives wrong stops it in one line, as manage.py and the WSGI server do; a
    # process that loaded the settings already (the web server, manage.py) passes through.
    load_settings_or_exit("celery")


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
    if settings.AUDIT_CHECKPOINT_INTERVAL_SECONDS > 0:
        sender.add_periodic_task(settings.AUDIT_CHECKPOINT_INTERVAL_SECONDS,
                                 sender.signature("audit.write_checkpoint"))


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


@celeryd_after_setup.connect
def _quiet_the_warning_for_a_choice_made(**kwargs):
    # console.settings sets CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS on
    # purpose (False: a task whose broker link breaks runs on to its checkpointed outcome),
    # and Celery warns at every reconnection all the same: seven lines each time an outage
    # makes the worker reconnect. Added here, after Celery's logging setup turned its
    # deprecation warnings to "always".
    warnings.filterwarnings("ignore", category=CPendingDeprecationWarning,
                            message=r"\s*In Celery 5\.1 we introduced an optional breaking")


@worker_init.connect
def time_limit_or_exit(sender=None, **kwargs):
    # A hard time limit that cuts the calls the runtime lets run stops the worker at start,
    # in one line, as a wrong setting does (console.env.load_settings_or_exit).
    from runs.machine.deadline import hard_limit_problem

    problem = hard_limit_problem(getattr(sender, "time_limit", None))
    if problem:
        print(f"celery: {problem}", file=sys.stderr)
        raise SystemExit(2)


@worker_init.connect
def _import_the_model_client(**kwargs):
    # A worker asks models: it imports the openai package (most of a second) at its start,
    # before a pool forks, not inside its first agent step, where that second would be spent
    # from the run's lease. Commands import it only if they ask a model.
    import openai  # noqa: F401


@worker_init.connect
def _connect_connection_checks(**kwargs):
    # Workers only: the web server has Django's own request signals for this.
    task_prerun.connect(keep_healthy_connections, weak=False, dispatch_uid="db-prerun")
    task_postrun.connect(keep_healthy_connections, weak=False, dispatch_uid="db-postrun")


# The worker registry (runs.reads.workers). A worker beats on the database session its tasks
# use, so it keeps one session: after a task, a due beat rides along its next transition's
# transaction (no commit of its own), and on its timer while idle it writes one itself (the
# event loop's timer, on the thread that runs tasks with the solo pool). With the prefork
# pool each pool process beats along its own tasks and the worker beats for those that
# have not beaten within an interval (the idle ones).
_heartbeat = None
_pool_names = None  # the prefork pool's process names, None when the worker runs tasks


def _consumed_queues(app) -> str:
    try:
        return ",".join(sorted(app.amqp.queues.consume_from or app.amqp.queues))
    except Exception:  # the registry must never keep a worker from starting
        return ""


def _new_heartbeat():
    from runs.reads.workers import Heartbeat

    return Heartbeat(queues=_consumed_queues(app))


def _prefork_processes(pool):
    """The names (host:pid, as in their leases) of a prefork pool's processes, or None
    for a pool whose tasks run in the worker's own process."""
    if "prefork" not in type(pool).__module__:
        return None
    # The one naming rule of leases (imported here: the executor's module reads models).
    from runs.execution.executor import worker_name

    processes = getattr(getattr(pool, "_pool", None), "_pool", None) or []
    return [worker_name(process.pid) for process in processes if process.pid]


@worker_process_init.connect
def _pool_process_beats(**kwargs):
    # No database access here: a forked process first drops the connections it inherited.
    global _heartbeat
    _heartbeat = _new_heartbeat()


@worker_ready.connect
def _worker_beats(sender=None, **kwargs):
    from django.conf import settings

    global _heartbeat, _pool_names
    if _heartbeat is None:  # a thread pool: no worker_process_init
        _heartbeat = _new_heartbeat()
    heartbeat = _heartbeat
    _pool_names = _prefork_processes(getattr(sender, "pool", None))

    def idle_beat():
        global _pool_names
        if _pool_names is not None:  # processes come and go (max-tasks-per-child, crashes)
            _pool_names = _prefork_processes(sender.pool)
        heartbeat(_pool_names)

    heartbeat(_pool_names, force=True)
    sender.timer.call_repeatedly(settings.WORKER_HEARTBEAT_SECONDS, idle_beat)


@worker_ready.connect
def _release_check(**kwargs):
    # A release that changed a workflow without a new version is said at the deploy, not
    # weeks later when a waiting run wakes (runs.operator.release_check).
    from runs.operator.release_check import log_unworkable_versions

    log_unworkable_versions()


@task_postrun.connect
def _beat_after_task(sender=None, **kwargs):
    if _heartbeat is not None and not getattr(getattr(sender, "request", None), "is_eager",
                                              False):
        _heartbeat.after_task()


@worker_process_shutdown.connect
def _pool_process_stops(**kwargs):
    if _heartbeat is not None:
        _heartbeat.stop()


@worker_shutdown.connect
def _worker_stops(**kwargs):
    # For the prefork pool, its processes as last seen (they may be gone by now).
    if _heartbeat is not None:
        _heartbeat.stop(_pool_names)
