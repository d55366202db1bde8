from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Integration API"

    def ready(self):
        # Registers the webhook publisher task in every process, for beat's schedule.
        from . import tasks  # noqa: F401
        from .metrics import metric_families

        # Read by observability's collector at scrape time (it does not import the API).
        self.metric_families = metric_families
