from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self):
        # Registers the approvals.sweep task in every process at start, not only once
        # console.celery's autodiscovery has run, so beat's schedule finds it.
        from . import tasks  # noqa: F401
