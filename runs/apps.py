import os
from importlib import import_module

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.db.models.signals import post_migrate


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Workflow runs"

    def ready(self):
        from django.conf import settings

        from audit.chain import register_chain_heads

        from . import checks, store  # noqa: F401 - checks registers the system checks
        from .definitions.registry import registry
        from .machine import tracing
        from .reads.chain_heads import chain_heads
        from .waiting import schedule_input, schedules

        register_chain_heads(chain_heads, snapshot=lambda: store.current().snapshot())
        tracing.configure()  # OTLP export when an endpoint is configured; off otherwise
        # Importing a workflow module registers its workflows.
        known, known_schedules = registry.keys(), schedules.registry.keys()
        for module in settings.RUNS_WORKFLOW_MODULES:
            _import_workflow_module(module)
        # A module declares a workflow's steps after the workflow: only once the modules are
        # imported can one that declares none be refused, before a worker or a page uses it.
        registry.check_declared(known=known)
        # So too a schedule's fixed input against the waits of the version its ticks start,
        # declared after the schedule or after that version (runs.waiting.schedule_input).
        schedule_input.check_fixed_inputs(
            schedule for schedule in schedules.registry.all()
            if (schedule.workflow_name, schedule.name) not in known_schedules)
        # A row for each workflow once the database is migrated: what grants attach to.
        from .definitions.workflow_rows import after_migrate
        post_migrate.connect(after_migrate, sender=self)
        _shift_clock_for_tests()


def _import_workflow_module(module: str) -> None:
    """Import `module`; one that does not exist (a typo in RUNS_EXTRA_WORKFLOW_MODULES) is
    ImproperlyConfigured naming the variable, which manage.py says in one line. A module the
    workflow module itself imports keeps its traceback: that is its author's to read."""
    try:
        import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not f"{module}.".startswith(f"{exc.name}."):
            raise
        raise ImproperlyConfigured(
            f"RUNS_EXTRA_WORKFLOW_MODULES names {module}, which cannot be imported: "
            f"{exc}") from None


def _shift_clock_for_tests() -> None:
    """RUNS_TEST_CLOCK_OFFSET_SECONDS moves this process's clock (tests only): the lease tests
    start a worker whose clock runs ahead of the database's, as a drifting host's would."""
    offset = float(os.environ.get("RUNS_TEST_CLOCK_OFFSET_SECONDS") or 0)
    if not offset:
        return
    import time
    from datetime import UTC, datetime, timedelta

    from django.utils import timezone

    def shifted_now():
        return datetime.fromtimestamp(time.time(), tz=UTC) + timedelta(seconds=offset)

    timezone.now = shifted_now
