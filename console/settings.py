"""Settings, read from the environment.

With nothing set, the project runs on the embedded default: a SQLite file in var/ and a
Celery broker on the local filesystem, so `make demo` needs no server. Set DATABASE_URL to a
postgres:// URL and CELERY_BROKER_URL to a redis:// or amqp:// URL for a real deployment, and
use console.production as the settings module there. Every environment variable is declared
once, with its type, default and meaning, in console.env, and read here through env().
"""

import base64
import hashlib
import json
import math
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from audit.quoting import file_name
from runs.machine.storable import whole_number

from .content_security import POLICY as CSP_POLICY
from .env import KEY_ID, KEY_ID_RULE, env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env("VAR_DIR", BASE_DIR / "var")


def var_directory(path: Path) -> Path:
    """`path`, in VAR_DIR, made if missing; ImproperlyConfigured naming VAR_DIR when it
    cannot be a directory (a file of that name, a part of it a file, no permission)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # Named as every command names a path: a control character in it (a terminal's
        # escape, a line break) would recolour the terminal or forge a second line.
        problem = (f"{file_name(path)} is a file, not a directory" if path.is_file()
                   else f"cannot make the directory {file_name(path)} ({exc.strerror})")
        raise ImproperlyConfigured(
            f"VAR_DIR={file_name(VAR_DIR)} cannot hold the project's files: "
            f"{problem}") from None
    return path


var_directory(VAR_DIR)

DEVELOPMENT_SECRET_KEY = "development-only-secret-key-never-use-in-production"
SECRET_KEY = env("SECRET_KEY", DEVELOPMENT_SECRET_KEY)
# The keys SECRET_KEY replaced, while a rotation is under way (docs/operations.md, "Rotating
# SECRET_KEY"): Django still reads sessions and signed values made with them, approvals.tokens
# the links mailed under them, approvals.snapshots the payload a pending request was asked
# with. The first key alone signs anything new.
SECRET_KEY_FALLBACKS = env("SECRET_KEY_FALLBACKS")


def key_ring(name: str, raw: str | None, purpose: str) -> dict[str, str]:
    """Keys by id from `raw`, the value of variable `name` ("id:secret,id:secret", the first one in
    use, the others kept to read what they signed or encrypted), else one development key
    derived from SECRET_KEY for `purpose` (console.production refuses it)."""
    raw = (raw or "").strip()
    if not raw:
        derived = hashlib.sha256(f"{SECRET_KEY}:{purpose}".encode()).digest()
        return {DEVELOPMENT_KEY_ID: base64.urlsafe_b64encode(derived).decode()}
    ring = {}
    # A malformed entry is named by its position, never its text: the text may be a secret.
    for position, entry in enumerate(raw.split(","), start=1):
        key_id, sep, secret = entry.strip().partition(":")
        if not entry.strip():
            problem = "is empty (a stray comma?)"
        elif not sep:
            problem = "has no ':' between its id and its secret"
        elif not key_id.strip():
            problem = "has an empty id"
        elif not secret.strip():
            problem = "has an empty secret"
        elif not KEY_ID.fullmatch(key_id.strip()):
            # "k 2:..." was taken as a key named "k 2", written beside all it sealed. An id
            # that is not plain may be part of a secret pasted before it ("A k1:B"): it is
            # named by position too.
            problem = f"has an id that is not a plain id ({KEY_ID_RULE})"
        elif any(char.isspace() or char == ";" for char in secret.strip()):
            # "k2:A k1:B" (or "k2:A;k1:B") read as one key k2 whose secret was "A k1:B": the
            # process started, and k1 was found missing only when what it sealed was checked.
            # No secret of a ring holds either (random characters, or a Fernet key's
            # url-safe base64).
            problem = ("has whitespace or a ';' in its secret: entries are separated by "
                       "commas")
        elif key_id.strip() in ring:
            # Read as one, the later secret would silently replace the one in use.
            problem = f"repeats the id {key_id.strip()!r} of an earlier entry"
        else:
            ring[key_id.strip()] = secret.strip()
            continue
        raise ImproperlyConfigured(
            f"{name}: entry {position} (of {len(raw.split(','))}, comma-separated) {problem};"
            " each entry is id:secret")
    return ring


DEVELOPMENT_KEY_ID = "dev"


# Off unless DEBUG=1 is set (bin/demo sets it for the local demo): Django's debug pages show
# tracebacks and settings to anyone who can make a request fail.
DEBUG = env("DEBUG")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")

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
    "axes",
    "csp",
    "audit",
    "runs",
    "approvals",
    "archive",
    "demo",
    "demo.sandbox",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads them: the headers the failed-login log keeps, without a NUL.
    "console.client_headers.StorableClientHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Every error under /api/ is JSON, whatever produced it.
    "api.middleware.JsonErrorsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Within the session's: a change's commit is answered when its connection is lost, the
    # session's save (after it) is not (console.answered_commits).
    "console.answered_commits.AnsweredCommitsMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: turns a login refused for too many failures into the lockout page (429).
    "axes.middleware.AxesMiddleware",
]

# The Content-Security-Policy (console.content_security) is enforced everywhere, so the
# demo and the tests run under the same policy as production. django-csp leaves it off
# Django's debug pages (404 and 500 with DEBUG on), which need inline styles and scripts.
CONTENT_SECURITY_POLICY = CSP_POLICY

# Database sessions whose save, failing on the database, is answered 503 (console.sessions).
SESSION_ENGINE = "console.sessions"

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
                # The banner of a workflow whose dispatch is paused (runs.machine.dispatch).
                "console.world_views.dispatch_banner",
            ],
        },
    },
]


# Connections are kept and reused (by web requests and by Celery tasks alike, see
# console.celery) for up to DB_CONN_MAX_AGE seconds, and checked before their first use in
# each request or task: one that the server killed, or that a failover left pointing at a
# dead primary, is replaced instead of failing the work. 0 closes them after every request
# and task (a new session for each).
# Django's development server (runserver, what `make demo` runs) serves each request on a
# new thread: a connection kept past the request belongs to a thread that is gone, and
# PostgreSQL soon refuses every other process ("too many clients"). There the default is 0.
RUNSERVER = sys.argv[1:2] == ["runserver"]
DB_CONN_MAX_AGE = env("DB_CONN_MAX_AGE", 0) if RUNSERVER else env("DB_CONN_MAX_AGE")

# Server-side prepared statements for the statements that ask for them (the runtime's
# one-statement checkpoints and start_run, runs.store.postgres): parsed and planned once per
# connection instead of at every step. Django's psycopg backend turns them off unless
# prepare_threshold is set (it defaults to None, which makes psycopg ignore prepare=True);
# the ORM's own queries stay unprepared (client-side binding). A new connection prepares
# its statements again by itself. Set DB_PREPARED_STATEMENTS=0 behind a pooler that cannot
# keep them (PgBouncer in transaction mode before 1.21, which the sweeps' advisory locks
# rule out anyway: see docs/operations.md).
DB_PREPARED_STATEMENTS = env("DB_PREPARED_STATEMENTS")


# The threads mode of a worker (docs/operations.md, "Many calls in flight"): with
# DB_POOL_MAX_SIZE set, each process keeps a pool of at most that many PostgreSQL
# connections (Django's psycopg pool), shared by all its threads. The executor gives its
# connection back to the pool while a step waits on a remote system, so hundreds of steps in
# flight need only as many connections as are checkpointing at once. Pooled connections are
# not persistent ones: DB_CONN_MAX_AGE does not apply (Django requires it to be 0). A
# thread waits at most DB_POOL_TIMEOUT seconds for a free connection. 0 (the default) keeps
# one persistent connection per process, the right choice for the prefork pool.
DB_POOL_MAX_SIZE = env("DB_POOL_MAX_SIZE")
DB_POOL_MIN_SIZE = env("DB_POOL_MIN_SIZE")
DB_POOL_TIMEOUT = env("DB_POOL_TIMEOUT")


# Seconds a new PostgreSQL connection may take to be established (libpq's connect_timeout).
DB_CONNECT_TIMEOUT = 5


# Seconds a request of a person (a console page, an API call, an approver's decision) waits
# for a row another session holds: PostgreSQL's lock_timeout, on the web server's
# connections only (console.lock_waits, from console.wsgi). Without it, a run row held by a
# session left idle in a transaction (a psql prompt, a stuck script) held every action on
# that run until the web server killed its worker, with no answer; now the request ends
# with nothing written and is answered 503 with Retry-After (console.errors, api.routes).
# Workers and beat's passes keep waiting: their waits are nobody's page, and a bulk job's
# worker tries the run again.
# Under a web server's own timeout (gunicorn's is 30 s).
DB_LOCK_TIMEOUT = env("DB_LOCK_TIMEOUT")


def database_from_url(url: str | None) -> dict:
    if not url:
        url = f"sqlite:///{VAR_DIR / 'durable.sqlite3'}"
    config = dj_database_url.parse(url, conn_max_age=DB_CONN_MAX_AGE, conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.postgresql":
        # libpq waits for a server's answer without limit by default: a database that
        # accepts connections and does not answer (hung, a failover under way, a dead
        # proxy) would hold every web request, worker and sweep forever instead of failing
        # them. A connect_timeout given in DATABASE_URL's query wins.
        config.setdefault("OPTIONS", {}).setdefault("connect_timeout", DB_CONNECT_TIMEOUT)
    if config["ENGINE"] == "django.db.backends.postgresql" and DB_PREPARED_STATEMENTS:
        # psycopg's default threshold; only statements run through psycopg's own
        # (server-binding) cursor can be prepared, and the hot ones say prepare=True.
        config.setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)
    if config["ENGINE"] == "django.db.backends.postgresql" and DB_POOL_MAX_SIZE > 0:
        config["CONN_MAX_AGE"] = 0
        # No "SELECT 1" round trip each time a connection is lent (two or three times a
        # step): a connection the server killed fails its first statement, the task tries
        # once more on a new one (runs.tasks), and the pool drops a broken one given back.
        config["CONN_HEALTH_CHECKS"] = False
        config.setdefault("OPTIONS", {})["pool"] = {
            "min_size": min(DB_POOL_MIN_SIZE, DB_POOL_MAX_SIZE), "max_size": DB_POOL_MAX_SIZE,
            "timeout": DB_POOL_TIMEOUT,
        }
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # IMMEDIATE takes the write lock when a transaction begins, so two writers queue on
        # the busy timeout instead of failing with "database is locked" half way through.
        config["OPTIONS"] = {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return config


DATABASES = {"default": database_from_url(env("DATABASE_URL"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    # First: refuses every login (console and admin alike) while its user and address are
    # locked out, before a password is even checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
ANONYMOUS_USER_NAME = None

# Login throttling (django-axes): after AXES_FAILURE_LIMIT failed logins for one username
# from one address, that pair is refused for AXES_COOLOFF_MINUTES. Attempts and lockouts are
# listed in Django admin (Axes -> Access attempts; delete one to lift its lockout) and
# `manage.py axes_reset` clears them all. A successful login clears its pair's failures.
# The address is found as TRUSTED_PROXY_COUNT says (console.client_address): 0, clients
# connect directly (REMOTE_ADDR); N, behind N proxies that each append to X-Forwarded-For.
# console.production requires it to be set.
PROXY_COUNT_RULE = ("TRUSTED_PROXY_COUNT must state how the client's address is found: 0 when "
                    "clients connect directly, N (1-10) behind N proxies that each append to "
                    "X-Forwarded-For")


def proxy_count(raw: str) -> int:
    count = whole_number(raw)
    if count is None or count > 10:
        raise ImproperlyConfigured(f"{PROXY_COUNT_RULE} (got {raw!r}).")
    return count


TRUSTED_PROXY_COUNT = proxy_count((env("TRUSTED_PROXY_COUNT") or "0").strip())
AXES_CLIENT_IP_CALLABLE = "console.client_address.client_ip"
AXES_FAILURE_LIMIT = env("AXES_FAILURE_LIMIT")
AXES_COOLOFF_TIME = timedelta(minutes=env("AXES_COOLOFF_MINUTES"))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# The largest request body read (Django's default, made explicit): larger ones get 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = env("DATA_UPLOAD_MAX_MEMORY_SIZE")

STATIC_URL = "static/"
STATIC_ROOT = var_directory(VAR_DIR / "staticfiles")  # whitenoise warns about a missing root
STATICFILES_DIRS = [BASE_DIR / "static"]
# Whitenoise serves static files straight from the apps and static/ (no collectstatic) when
# DEBUG is off too; console.production serves only what collectstatic gathered.
WHITENOISE_USE_FINDERS = True
# Files browsers ask for at the site's root (/favicon.ico), served by whitenoise as they are.
WHITENOISE_ROOT = BASE_DIR / "static" / "root"

LOGIN_URL = "/accounts/login/"
# The home page sends each person to a page they may see (console.views.home).
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Celery. The embedded default broker keeps messages in files under var/, so the web
# server, a worker and beat can talk without a broker server. Messages are only wake-up
# hints: the database decides what work exists.
BROKER_DIR = VAR_DIR / "broker"
# Seconds a broker connection may take to connect or to answer one command (Redis; AMQP has
# broker_connection_timeout, 4 s by default).
BROKER_SOCKET_TIMEOUT = 3
CELERY_BROKER_URL = env("CELERY_BROKER_URL")
if CELERY_BROKER_URL.startswith("filesystem://"):
    var_directory(BROKER_DIR)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR),
        "data_folder_out": str(BROKER_DIR),
        "control_folder": str(BROKER_DIR / "control"),
    }
else:
    # On Redis an unacknowledged message comes back after the visibility timeout; no task
    # of ours runs anywhere near an hour, and retries are never scheduled as countdowns.
    # Without socket timeouts a Redis that accepts connections but does not answer (hung,
    # a failover, a half-open connection behind NAT) blocks every publish forever: a start
    # request, a decision or a sweep would hang on a wake-up hint the sweeper makes up for
    # anyway. Bounded, a hint is given up after about two tries of BROKER_SOCKET_TIMEOUT.
    # It stays above kombu's one-second BRPOP wait, which a worker's consumer reads.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600,
                                       "socket_timeout": BROKER_SOCKET_TIMEOUT,
                                       "socket_connect_timeout": BROKER_SOCKET_TIMEOUT}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# A task whose broker link breaks runs on: its effects are checkpointed in PostgreSQL, and the
# copy the broker hands out again finds its run advanced or leased. Cancelling it (Celery 6's
# announced default) would stop a call mid-flight and leave its outcome unknown for nothing.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# RabbitMQ closes a channel that holds a message unacknowledged past its consumer_timeout
# (30 minutes by default): a task acknowledged late that runs longer (a run of many steps, a
# step that heartbeats) closes its worker's channel. Celery counts a channel's error as
# unrecoverable unless this is set, and the worker shut down once its tasks ended; now it
# connects again. The broker hands the task's message out again, a hint the run's lease
# refuses while the task goes on.
CELERY_BROKER_CHANNEL_ERROR_RETRY = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Celery's Django fixup closes every database connection before and after each task unless
# this is set; then it closes them only once every CELERY_DB_REUSE_MAX tasks. Between those,
# console.celery hands the connections to Django's own age and health checks.
CELERY_DB_REUSE_MAX = env("CELERY_DB_REUSE_MAX")
SWEEP_INTERVAL_SECONDS = env("SWEEP_INTERVAL_SECONDS")
# Where the rate limits of remote systems (runs.machine.limits) keep their shared windows: Redis,
# by default the broker's when it is Redis; empty: in each process (the demo's one worker).
RUNS_LIMITS_REDIS_URL = env(
    "RUNS_LIMITS_REDIS_URL",
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else "")
# A rate limit's window is one second plus this margin: what may lie between a call's
# admission and its arrival at the receiver (scheduling, network).
RUNS_RATE_MARGIN_MS = env("RUNS_RATE_MARGIN_MS")
# The URL path's longest source name (api.event_routes).
EVENT_SOURCE_NAME_MAX = 100
EVENT_SOURCE_SHAPE = '{"payments": {"secret": "...", "workflows": ["order-fulfilment"]}}'
# The shortest secret a source signs with: a signature made with a shorter one proves nothing,
# since whoever wants to forge an event tries every secret that short. The subscribers' own
# least (api.subscribers.SECRET_MIN_LENGTH), for the same reason, written here rather than
# imported: api.subscribers loads its models, which cannot be loaded while the settings are
# read. A test keeps the two equal.
EVENT_SOURCE_SECRET_MIN_LENGTH = 16


def event_sources(raw: str) -> dict:
    """RUNS_EVENT_SOURCES read, if each source is an object with a secret and, if it says
    which workflows it may send to, a list of their names; ImproperlyConfigured naming the
    source and what is wrong otherwise, never a secret. Read as it came, a list of workflows
    written as one name was a substring test (a source for "order-fulfilment" could send to
    "order"), "workflow" misspelt let a source send to every workflow, and a source that
    was no object answered its every webhook with a server error."""
    try:
        sources = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        # The position only: the text holds the secrets.
        raise ImproperlyConfigured(f"RUNS_EVENT_SOURCES is not JSON (line {exc.lineno}, "
                                   f"column {exc.colno}); write {EVENT_SOURCE_SHAPE}") from None
    if not isinstance(sources, dict):
        raise ImproperlyConfigured(f"RUNS_EVENT_SOURCES must be a JSON object of sources, "
                                   f"{EVENT_SOURCE_SHAPE}")
    for name, config in sources.items():
        problem = None
        if not name.strip() or len(name) > EVENT_SOURCE_NAME_MAX or "/" in name:
            problem = (f"a source's name must be 1 to {EVENT_SOURCE_NAME_MAX} characters "
                       "without '/' (it is a part of the webhook's path)")
        elif not isinstance(config, dict):
            problem = "must be an object with a \"secret\""
        elif unknown := sorted(set(config) - {"secret", "previous_secret", "workflows"}):
            problem = (f"has the unknown setting(s) {', '.join(map(repr, unknown))}; a source "
                       "takes \"secret\", \"previous_secret\" and \"workflows\"")
        elif not isinstance(config.get("secret"), str) or not config["secret"].strip():
            problem = "has no \"secret\" (a non-empty string)"
        elif "previous_secret" in config and not (
                isinstance(config["previous_secret"], str) and config["previous_secret"].strip()
                and config["previous_secret"] != config["secret"]):
            # Not the secret itself: a rotation left half done would look finished.
            problem = ("has a \"previous_secret\" that is not a non-empty string other than "
                       "its \"secret\"")
        elif short := [field for field in ("secret", "previous_secret") if field in config
                       and len(config[field]) < EVENT_SOURCE_SECRET_MIN_LENGTH]:
            # The old secret too: it is accepted as the new one is, until it is removed.
            problem = (f"has a \"{short[0]}\" shorter than {EVENT_SOURCE_SECRET_MIN_LENGTH} "
                       "characters: a signature made with it proves nothing, anyone can try "
                       f"every secret that short; give {EVENT_SOURCE_SECRET_MIN_LENGTH} or more "
                       "random characters")
        elif "workflows" in config and not (
                isinstance(config["workflows"], list)
                and all(isinstance(w, str) and w for w in config["workflows"])):
            problem = "has \"workflows\" that is not a list of workflow names"
        if problem:
            raise ImproperlyConfigured(f"RUNS_EVENT_SOURCES: source {name[:100]!r} {problem}")
    return sources


# The sources that may send external events as signed webhooks (runs.waiting.events).
RUNS_EVENT_SOURCES = event_sources(env("RUNS_EVENT_SOURCES"))
# The longest RUNS_EVENT_KEEP_SECONDS: ten years, past which a keep time is a mistake (and a
# far larger one overflows the dates it is added to).
EVENT_KEEP_MAX_SECONDS = 3650 * 24 * 3600


def event_keep_seconds(value: float) -> float:
    """RUNS_EVENT_KEEP_SECONDS, if it is a keep time; ImproperlyConfigured naming it otherwise.
    Zero or less would expire every early event as it is kept, and NaN compares false with
    every time, so that nothing would ever expire."""
    if not math.isfinite(value) or not 0 < value <= EVENT_KEEP_MAX_SECONDS:
        raise ImproperlyConfigured(
            f"RUNS_EVENT_KEEP_SECONDS={value!r} must be a positive number of seconds, at most "
            f"{EVENT_KEEP_MAX_SECONDS} (ten years): how long an event no run waits for yet is "
            "kept (default 604800, seven days)")
    return value


# How long an event that no run waits for yet is kept for the run that will
# (runs.waiting.kept_expiry); past it, the event expires and no path delivers it.
RUNS_EVENT_KEEP_SECONDS = event_keep_seconds(env("RUNS_EVENT_KEEP_SECONDS"))
# How often beat looks for due schedule slots (runs.waiting.schedules); a slot starts within this.
SCHEDULES_INTERVAL_SECONDS = env("SCHEDULES_INTERVAL_SECONDS")

# The runtime.
RUNS_LEASE_SECONDS = env("RUNS_LEASE_SECONDS")
# A run whose workers keep stopping at the same point (a checkpoint the database refuses, a
# step that kills its process) waits for a person after this many take-backs in a row.
RUNS_TAKE_BACKS_BEFORE_ATTENTION = env("RUNS_TAKE_BACKS_BEFORE_ATTENTION")
# How long a worker holds a bulk job (approvals.bulk) between batches.
BULK_JOB_LEASE_SECONDS = env("BULK_JOB_LEASE_SECONDS")
# How often a worker writes its heartbeat row (runs.reads.workers); silent past a lease, it is
# marked on the workers page.
WORKER_HEARTBEAT_SECONDS = env("WORKER_HEARTBEAT_SECONDS")
# The threads mode of a worker: one transaction each this many seconds extends the leases
# of all the steps the process holds in their remote call (runs.machine.heartbeats); 0: off.
RUNS_HEARTBEAT_SECONDS = env("RUNS_HEARTBEAT_SECONDS")
# ...but no longer than this for one call that does not heartbeat itself: a call that never
# ends gives its run back to the sweeper (runs.machine.heartbeats).
RUNS_CALL_LIMIT_SECONDS = env("RUNS_CALL_LIMIT_SECONDS")
# A queued run that no worker picked up within this many seconds is enqueued again by the
# sweeper (its broker message was lost).
RUNS_REQUEUE_AFTER_SECONDS = env("RUNS_REQUEUE_AFTER_SECONDS")
# Bounded state (runs.machine.artifacts): results past the first are stored once as artifacts,
# past the second fail their step; inputs past the third are refused at start.
RUNS_RESULT_INLINE_BYTES = env("RUNS_RESULT_INLINE_BYTES")
RUNS_RESULT_MAX_BYTES = env("RUNS_RESULT_MAX_BYTES")
RUNS_INPUT_MAX_BYTES = env("RUNS_INPUT_MAX_BYTES")
# What a model proposes as a tool call's arguments (as JSON) past this is never executed: it
# is a schema error, and the model is told. The arguments are kept in the turn and the call's
# row and sent back to the model at every later turn; a tool is told what to do in far less,
# and anything larger is passed by reference. As large as a result kept inline.
RUNS_TOOL_ARGUMENTS_MAX_BYTES = env("RUNS_TOOL_ARGUMENTS_MAX_BYTES")
# What one model turn may hand over (runs.agents.turn_bounds): its text is kept cut past the
# first (a final answer kept whole apart, as a result is), and a turn asking for more tool
# calls than the second is refused whole, the model told: a hostile or broken model's
# megabytes or thousands of calls are never stored, nor sent back to it at every turn.
RUNS_AGENT_TEXT_MAX_CHARS = env("RUNS_AGENT_TEXT_MAX_CHARS")
RUNS_AGENT_TURN_MAX_TOOL_CALLS = env("RUNS_AGENT_TURN_MAX_TOOL_CALLS")
# Modules that define workflows; importing them registers the workflows.
RUNS_WORKFLOW_MODULES = ["demo.workflows", *env("RUNS_EXTRA_WORKFLOW_MODULES")]

# The sandbox: simulated external systems (invoices, task tracker, messenger, ledger,
# customers, payments, an OpenAI-compatible model) served by this project under /sandbox/,
# with fault injection. Workflows call them over real HTTP, like any remote system.
SANDBOX_ENABLED = env("SANDBOX_ENABLED")
SANDBOX_BASE_URL = env("SANDBOX_BASE_URL")
# How long the commit_then_timeout and slow faults hold a response.
SANDBOX_HOLD_SECONDS = env("SANDBOX_HOLD_SECONDS")
MODEL_BASE_URL = env("MODEL_BASE_URL", SANDBOX_BASE_URL + "/model/v1")
MODEL_API_KEY = env("MODEL_API_KEY")
MODEL_NAME = env("MODEL_NAME")
# The timeout of every outbound call a workflow makes (connect, read, write, pool).
EXTERNAL_TIMEOUT_SECONDS = env("EXTERNAL_TIMEOUT_SECONDS")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL")},
    # httpx logs each request at INFO with its whole URL: a query string may carry a token
    # (no secret in logs), and on a worker with hundreds of calls in flight the line costs
    # as much CPU as the runtime's own checkpoint. Its warnings and errors still show.
    "loggers": {
        # httpx2 and httpcore2: the same library under the names the openai client uses.
        **{name: {"level": env("HTTP_CLIENT_LOG_LEVEL")}
           for name in ("httpx", "httpcore", "httpx2", "httpcore2")},
        # Celery's "Received task" and "Task ... succeeded" lines: two per wake-up hint,
        # which say less than the runtime's own lines about the run. A task's failure is
        # logged at ERROR and still shows.
        **{name: {"level": env("WORKER_TASK_LOG_LEVEL")}
           for name in ("celery.worker.strategy", "celery.app.trace")},
        # django-axes says "AXES: BEGIN version ..." at INFO in every process, each command
        # included, above what the command prints; its login failures and lockouts are
        # warnings and still show.
        "axes": {"level": "WARNING"},
    },
}

# --- Approvals (approvals app): notification email, signed links, four eyes ---------------
# The demo writes every email to a file under var/mail (open it to find the approval link);
# set EMAIL_HOST (and EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS or
# EMAIL_USE_SSL) to send through SMTP instead.
EMAIL_HOST = env("EMAIL_HOST")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env("EMAIL_PORT")
    EMAIL_HOST_USER = env("EMAIL_HOST_USER")
    EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD")
    EMAIL_USE_SSL = env("EMAIL_USE_SSL")
    EMAIL_USE_TLS = env("EMAIL_USE_TLS", not EMAIL_USE_SSL)
    EMAIL_TIMEOUT = env("EMAIL_TIMEOUT")
else:
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    EMAIL_FILE_PATH = VAR_DIR / "mail"
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL")
# Links in emails point here (the scheme, host and port people reach the console on).
APPROVALS_BASE_URL = env("APPROVALS_BASE_URL")
# How long an approval link works, in seconds (it also dies once the request is decided).
APPROVAL_LINK_MAX_AGE = env("APPROVAL_LINK_MAX_AGE")
APPROVALS_SWEEP_INTERVAL_SECONDS = env("APPROVALS_SWEEP_INTERVAL_SECONDS", SWEEP_INTERVAL_SECONDS)
# A notification is tried this many times (with exponential backoff) before it is failed.
APPROVALS_NOTIFICATION_MAX_ATTEMPTS = env("APPROVALS_NOTIFICATION_MAX_ATTEMPTS")
# A claimed decision not yet applied to its run is tried again after this many seconds.
APPROVALS_SETTLE_RETRY_SECONDS = env("APPROVALS_SETTLE_RETRY_SECONDS")
# Four eyes: who approves an operator's compensate or terminate of a run with a succeeded
# high-impact step (never the operator who asked), and how long they have.
APPROVALS_FOUR_EYES_APPROVERS = env("APPROVALS_FOUR_EYES_APPROVERS")
APPROVALS_FOUR_EYES_TIMEOUT_SECONDS = env("APPROVALS_FOUR_EYES_TIMEOUT_SECONDS")
APPROVALS_FOUR_EYES_REMIND_SECONDS = env("APPROVALS_FOUR_EYES_REMIND_SECONDS")

# --- Integration API and observability (api, observability apps) -------------------------
# "ninja" serves the API docs page (Swagger UI) from our static files rather than a CDN.
INSTALLED_APPS += ["ninja", "api", "observability"]
# Requests per API token per window (a token's own rate_limit, set in admin, overrides it).
API_RATE_LIMIT = env("API_RATE_LIMIT")
API_RATE_LIMIT_WINDOW_SECONDS = env("API_RATE_LIMIT_WINDOW_SECONDS")
# A token's last_used_at is written at most this often, so reads do not each write.
API_TOKEN_LAST_USED_PRECISION_SECONDS = env("API_TOKEN_LAST_USED_PRECISION_SECONDS")
# New API tokens expire after this many days unless the admin sets another expiry (or
# none); API_TOKEN_DEFAULT_DAYS=none makes new tokens never expire by default.
API_TOKEN_DEFAULT_DAYS = env("API_TOKEN_DEFAULT_DAYS")
# The metric durable_api_tokens_expiring_soon counts tokens expiring within this many days.
API_TOKEN_EXPIRY_WARNING_DAYS = env("API_TOKEN_EXPIRY_WARNING_DAYS")
# The rate-limit counters live in the "api" cache: Redis when API_CACHE_URL is set (needed
# when several web processes serve the API, so that they share the counts), otherwise this
# process's memory, which is enough for the one-process demo and needs no server.
API_CACHE_URL = env("API_CACHE_URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "api": ({"BACKEND": "django.core.cache.backends.redis.RedisCache",
             "LOCATION": API_CACHE_URL, "KEY_PREFIX": "dwf",
             "OPTIONS": {"socket_timeout": 0.5, "socket_connect_timeout": 0.5}}
            if API_CACHE_URL else
            {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "api"}),
}
API_RATE_LIMIT_CACHE = "api"
# /metrics answers requests from this machine (without a forwarding header), and anyone who
# sends "Authorization: Bearer $METRICS_TOKEN" when it is set.
METRICS_TOKEN = env("METRICS_TOKEN")
METRICS_ALLOW_LOCALHOST = env("METRICS_ALLOW_LOCALHOST")
# The step duration histogram covers steps that finished within this many seconds.
METRICS_STEP_WINDOW_SECONDS = env("METRICS_STEP_WINDOW_SECONDS")
# Runs that finished (completed, compensated, terminated) and audit records written more than
# a minute ago are counted once per this many seconds by each web process, the newer ones at
# every scrape (see observability.metrics). 0 counts them all at every scrape.
METRICS_FINISHED_RECOUNT_SECONDS = env("METRICS_FINISHED_RECOUNT_SECONDS")
# Logs: every line carries the run it is about (observability.logs); LOG_FORMAT=json writes
# one JSON object per line (the default of console.production).
LOGGING["filters"] = {"run_context": {"()": "observability.logs.ContextFilter"},
                      "link_tokens": {"()": "observability.logs.LinkTokenFilter"},
                      "outage_lines": {"()": "console.request_log.OutageLines"},
                      "client_errors": {"()": "console.request_log.ClientErrorLines"}}
# The loggers that write request paths, where an approval link's token would be; a request
# answered 503 for the database, or refused (4xx), is said in one line without a traceback
# (console.request_log), then masked too.
LOGGING["loggers"].update({"django.request": {"filters": ["outage_lines", "client_errors",
                                                          "link_tokens"]},
                           "django.server": {"filters": ["link_tokens"]}})
# A request Django refuses as suspicious (400: a Host not allowed, a form too large) is
# logged by django.security.<the exception's class> with its traceback, a client's
# condition too. A logger's filters apply to its own records only, not to its children's:
# each is named.
LOGGING["loggers"].update({
    f"django.security.{name}": {"filters": ["client_errors", "link_tokens"]}
    for name in ("SuspiciousOperation", "DisallowedHost", "DisallowedRedirect",
                 "RequestDataTooBig", "SuspiciousFileOperation", "SuspiciousMultipartForm",
                 "TooManyFieldsSent", "TooManyFilesSent")})
LOGGING["formatters"]["json"] = {"()": "observability.logs.JsonFormatter"}
# Plain lines are masked as the JSON ones are: a deployment may choose either.
LOGGING["formatters"]["plain"] = {"()": "observability.logs.PlainFormatter",
                                  "fmt": LOGGING["formatters"]["plain"]["format"]}
LOGGING["handlers"]["console"]["filters"] = ["run_context"]
if env("LOG_FORMAT") == "json":
    LOGGING["handlers"]["console"]["formatter"] = "json"

# --- Progress events to webhook subscribers (api.webhooks) --------------------------------
# How often beat checkpoints every audit chain's head outside the database (audit.checkpoints):
# what tells a chain set back with its genuine seal; 0: never.
AUDIT_CHECKPOINT_INTERVAL_SECONDS = env("AUDIT_CHECKPOINT_INTERVAL_SECONDS")
WEBHOOK_PUBLISH_INTERVAL_SECONDS = env("WEBHOOK_PUBLISH_INTERVAL_SECONDS")
WEBHOOK_TIMEOUT_SECONDS = env("WEBHOOK_TIMEOUT_SECONDS")
WEBHOOK_PRIVATE_ADDRESSES = env("WEBHOOK_PRIVATE_ADDRESSES")
# A subscriber's replaced secret signs beside the new one this long (api.subscribers).
WEBHOOK_SECRET_OVERLAP_HOURS = env("WEBHOOK_SECRET_OVERLAP_HOURS")

# --- Retention and archival (archive app) --------------------------------------------------
# Finished runs (completed, compensated, terminated) stay in the hot tables this many days
# after they finished, then a beat job moves them to gzip JSON Lines archive files (a
# workflow may say otherwise: Workflow(..., retention_days=N)). Files go to the storage named
# "archive" in STORAGES when configured (any django-storages backend), else VAR_DIR/archive.
RUNS_RETENTION_DAYS = env("RUNS_RETENTION_DAYS")
ARCHIVE_INTERVAL_SECONDS = env("ARCHIVE_INTERVAL_SECONDS")
# Runs per archive file, per pass of the job, and removed from the hot tables per transaction.
ARCHIVE_RUNS_PER_FILE = env("ARCHIVE_RUNS_PER_FILE")
ARCHIVE_MAX_RUNS_PER_PASS = env("ARCHIVE_MAX_RUNS_PER_PASS")
ARCHIVE_REMOVE_BATCH = env("ARCHIVE_REMOVE_BATCH")
# Each archived run and each file is sealed with an HMAC-SHA256 (audit.seals) so that a copy
# verifies on its own: "id:secret,..." with the signing key first; older keys still verify.
ARCHIVE_SIGNING_KEYS = key_ring("ARCHIVE_SIGNING_KEYS", env("ARCHIVE_SIGNING_KEYS"),
                                "archive-signing")
# The head of every audit chain (each run's, and the access chain's) is stored with an
# HMAC-SHA256 seal (audit.head_seals): a chain rewritten in the database, its hashes
# recomputed, fails verify_audit without this key. "id:secret,..." as above.
AUDIT_SEAL_KEYS = key_ring("AUDIT_SEAL_KEYS", env("AUDIT_SEAL_KEYS"), "audit-head-seal")

# --- Sensitive fields (runs.machine.sensitive) ----------------------------------------------------
# Fields a step or tool declares sensitive are stored encrypted (Fernet: AES-128-CBC with
# HMAC-SHA256) in every table and archive file: "id:key,..." with 32-byte url-safe base64
# keys (Fernet.generate_key()), the one that encrypts first; older ones still decrypt.
FIELD_ENCRYPTION_KEYS = key_ring("FIELD_ENCRYPTION_KEYS", env("FIELD_ENCRYPTION_KEYS"),
                                 "field-encryption")
# An event's payload is stored redacted, and with an HMAC-SHA256 of the whole of it
# (runs.waiting.events.payload_mac), so that an id sent again with a secret changed is
# refused: "id:secret,...", the first one in use, older ones still compare the events
# received under them.
RUNS_EVENT_DIGEST_KEYS = key_ring("RUNS_EVENT_DIGEST_KEYS", env("RUNS_EVENT_DIGEST_KEYS"),
                                  "event-payload-digest")
