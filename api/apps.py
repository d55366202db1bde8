from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Integration API"

    def ready(self):
        # Registers the webhook publisher task in every process, for beat's schedule.
        from . import tasks  # noqa: F401
