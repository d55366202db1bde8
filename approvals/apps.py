from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self):
        # Registers the approvals.sweep task in every process (console.celery discovers
        # only runs' tasks by itself), so beat's schedule finds it in the worker.
        from . import tasks  # noqa: F401
