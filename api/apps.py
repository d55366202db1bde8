from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "Integration API"

    def ready(self):
        from runs.operator.field_keys import register_sealed_values

        # Registers the webhook publisher task in every process, for beat's schedule.
        from . import tasks  # noqa: F401
        from .metrics import metric_families
        from .subscribers import secrets_sealed_with

        # Read by observability's collector at scrape time (it does not import the API).
        self.metric_families = metric_families
        # Their secrets are sealed with the field keys: a key's retirement reaches them.
        register_sealed_values("webhook subscribers", secrets_sealed_with)
