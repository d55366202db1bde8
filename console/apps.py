from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Operator console"

    def ready(self):
        # Every process (web and workers) must know what an approved four-eyes request does.
        from . import four_eyes  # noqa: F401
