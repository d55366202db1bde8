from django.apps import AppConfig


class SandboxConfig(AppConfig):
    """The simulated external systems, served over HTTP under /sandbox/ by this project.

    A separate app (not part of demo) so that its tables stand apart as other companies'
    databases would, and so that a deployment can leave its URLs out (SANDBOX_ENABLED).
    """

    name = "demo.sandbox"
    label = "sandbox"
    verbose_name = "Sandbox: simulated external systems"
