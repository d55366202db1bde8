"""Django's system checks pass for the project: the URL configuration, the admin, the models
and the templates. The suite's worker processes start without them (CELERY_SKIP_CHECKS,
tests/processes.py), as each would spend about 0.3 s of CPU loading the URL configuration;
this test runs them once, every tag a production worker or `manage.py check` runs."""

from django.core.checks import Tags, run_checks
from django.core.checks.registry import registry


def test_the_project_passes_every_system_check_a_worker_runs_at_its_start():
    tags = registry.tags_available()
    assert {Tags.urls, Tags.admin, Tags.models, Tags.templates} <= tags

    messages = run_checks()

    assert messages == [], "\n".join(str(m) for m in messages)
