from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "observability"
    verbose_name = "Observability"

    def ready(self):
        from . import tasklogs

        tasklogs.connect()
