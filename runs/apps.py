from importlib import import_module

from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Workflow runs"

    def ready(self):
        from django.conf import settings

        from . import tracing

        tracing.configure()  # OTLP export when an endpoint is configured; off otherwise
        # Importing a workflow module registers its workflows.
        for module in settings.RUNS_WORKFLOW_MODULES:
            import_module(module)
