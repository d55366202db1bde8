"""console.production refuses a variable that looks like one of ours but is not declared,
naming the closest declared one, "so a typo is never silently replaced by a default"
(docs/operations.md, Settings). That holds for every family of our variables, not only the
first ones declared: a misspelt BULK_JOB_LEASE_SECONDS or AUDIT_CHECKPOINT_INTERVAL_SECONDS
would otherwise start the process on the default, unsaid."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from console.env import VARIABLES, check_environment

# Names other software reads too, or families shared with it (Django's, Celery's,
# OpenTelemetry's, a platform's LOG_*): a prefix of theirs would refuse their variables.
SHARED = {"DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "VAR_DIR",
          "SECURE_SSL_REDIRECT", "DATA_UPLOAD_MAX_MEMORY_SIZE", "DATABASE_URL",
          "CELERY_BROKER_URL", "CELERY_DB_REUSE_MAX", "LOG_LEVEL", "LOG_FORMAT",
          "DEFAULT_FROM_EMAIL", "OTEL_EXPORTER_OTLP_ENDPOINT",
          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SERVICE_NAME"}
OURS = [variable.name for variable in VARIABLES if variable.name not in SHARED]


@pytest.mark.parametrize("name", OURS)
def test_a_misspelt_variable_is_refused_naming_the_one_meant(name):
    typo = name[:-1] if name.endswith("S") else name + "S"
    with pytest.raises(ImproperlyConfigured) as refused:
        check_environment({typo: "1", "PATH": "/bin"})
    assert f"unknown environment variable {typo} (did you mean {name}?)" in str(refused.value)


def test_variables_of_other_software_are_left_alone():
    check_environment({"LOG_DIR": "/var/log", "CELERY_RDB_PORT": "6900", "PATH": "/bin",
                       "OTEL_RESOURCE_ATTRIBUTES": "team=finance", "DJANGO_COLORS": "dark"})
