"""Settings, read from the environment.

With nothing set, the project runs on the embedded default: a SQLite file in var/ and a
Celery broker on the local filesystem, so `make demo` needs no server. Set DATABASE_URL to a
postgres:// URL and CELERY_BROKER_URL to a redis:// or amqp:// URL for a real deployment, and
use console.production as the settings module there.
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEVELOPMENT_SECRET_KEY = "development-only-secret-key-never-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY", DEVELOPMENT_SECRET_KEY)


def env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_flag("DEBUG", True)
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")
    if h.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "guardian",
    "audit",
    "runs",
    "approvals",
    "demo",
    "demo.sandbox",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def database_from_url(url: str | None) -> dict:
    if not url:
        url = f"sqlite:///{VAR_DIR / 'durable.sqlite3'}"
    config = dj_database_url.parse(url, conn_max_age=0)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # IMMEDIATE takes the write lock when a transaction begins, so two writers queue on
        # the busy timeout instead of failing with "database is locked" half way through.
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return config


DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns about a missing root
STATICFILES_DIRS = [BASE_DIR / "static"]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/runs/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Celery. The embedded default broker keeps messages in files under var/, so the web
# server, a worker and beat can talk without a broker server. Messages are only wake-up
# hints: the database decides what work exists.
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://localhost/")
if CELERY_BROKER_URL.startswith("filesystem://"):
    BROKER_DIR.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR),
        "data_folder_out": str(BROKER_DIR),
    }
else:
    # On Redis an unacknowledged message comes back after the visibility timeout; no task
    # of ours runs anywhere near an hour, and retries are never scheduled as countdowns.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
SWEEP_INTERVAL_SECONDS = float(os.environ.get("SWEEP_INTERVAL_SECONDS", "2"))

# The runtime.
RUNS_LEASE_SECONDS = float(os.environ.get("RUNS_LEASE_SECONDS", "30"))
# A queued run that no worker picked up within this many seconds is enqueued again by the
# sweeper (its broker message was lost).
RUNS_REQUEUE_AFTER_SECONDS = float(os.environ.get("RUNS_REQUEUE_AFTER_SECONDS", "10"))
# Modules that define workflows; importing them registers the workflows.
RUNS_WORKFLOW_MODULES = ["demo.workflows"] + [
    m.strip() for m in os.environ.get("RUNS_EXTRA_WORKFLOW_MODULES", "").split(",") if m.strip()
]

# The sandbox: simulated external systems (invoices, task tracker, messenger, ledger,
# customers, payments, an OpenAI-compatible model) served by this project under /sandbox/,
# with fault injection. Workflows call them over real HTTP, like any remote system.
SANDBOX_ENABLED = env_flag("SANDBOX_ENABLED", True)
SANDBOX_BASE_URL = os.environ.get("SANDBOX_BASE_URL", "http://127.0.0.1:8000/sandbox")
# How long the commit_then_timeout and slow faults hold a response.
SANDBOX_HOLD_SECONDS = float(os.environ.get("SANDBOX_HOLD_SECONDS", "5"))
MODEL_BASE_URL = os.environ.get("MODEL_BASE_URL", SANDBOX_BASE_URL + "/model/v1")
MODEL_API_KEY = os.environ.get("MODEL_API_KEY", "sandbox-key")
MODEL_NAME = os.environ.get("MODEL_NAME", "sandbox-classifier")
# The timeout of every outbound call a workflow makes (connect, read, write, pool).
EXTERNAL_TIMEOUT_SECONDS = float(os.environ.get("EXTERNAL_TIMEOUT_SECONDS", "3"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
