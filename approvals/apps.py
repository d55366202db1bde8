from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self):
        # Registers the approvals.sweep task in every process at start, not only once
        # console.celery's autodiscovery has run, so beat's schedule finds it.
        # The drill kit (runs.operator.drills) approves what its runs wait for through the approval
        # requests of this app, the path a person's approval takes.
        from runs.operator.drills import register_approver

        from . import tasks  # noqa: F401
        from .drill import approve_for_drill

        register_approver(approve_for_drill)
