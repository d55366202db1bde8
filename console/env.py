"""Every environment variable the project reads, declared once: its name, its type, its
default, one line of meaning and, for a number, the least value that meaning allows.
console.settings reads each through `env()`, which refuses a malformed value, or a number
below its minimum, with a message naming the variable, what it expected and what it got;
console.production also refuses a variable that looks like one of ours but is not declared
(a typo such as RUNS_LEASE_SECOND would otherwise be silently ignored). docs/operations.md
carries the table as `markdown_table()` prints it, and a test keeps the two the same.
"""

import difflib
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

STR, INT, FLOAT, BOOL, LIST, PATH = "string", "integer", "number", "flag", "list", "path"
DATABASE = "database URL"
# The schemes dj_database_url reads as PostgreSQL; the other database is SQLite (sqlite://).
POSTGRESQL_SCHEMES = ("postgres", "postgresql", "pgsql")
# A whole number of days, or none / never (empty: the same).
DAYS = "days or none"
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
# The least of a duration that must be more than nothing (an interval beat repeats, a
# timeout, a window): a tenth of its unit. At 0 or below, beat would send its task without
# pause, a call would time out before it is made, a window would count nothing. A duration
# where 0 means something (off, never, every time) takes 0, and says so in its meaning.
SOME = 0.1
# Room in a request body for what it holds besides a run input or an event's payload (the
# fields around it), and more than any form of the console or the admin sends. A smaller
# body limit refuses ordinary requests, and an input within RUNS_INPUT_MAX_BYTES with a 413
# that names neither the input nor its limit.
BODY_ROOM = 65536
# How many times its measured size (compact JSON, UTF-8) an input can take in a request
# body that escapes every non-ASCII character, as Python's json.dumps and other clients do
# by default: a two- or four-byte character becomes six or twelve bytes (\u00e9, a
# surrogate pair), never more than three times its bytes.
ESCAPED_GROWTH = 3
# How the entries of a key ring are written (console.settings.key_ring refuses the rest).
# An id is written beside everything its key seals ("enc:<id>:...", "<id>:<mac>", an
# access record's subject; an event's "<id>:<mac>" in 300 characters), so it is plain and
# short.
KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")
KEY_ID_RULE = "1 to 200 letters, digits, '.', '_' or '-'"
RING_ENTRIES = (f"an id is {KEY_ID_RULE}; entries separated by commas: a secret holding "
                "whitespace or a ';' (never part of a random secret or a Fernet key) is "
                "refused at start")


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str
    # As it would be written in the environment; None: unset (empty, or computed, see shown).
    default: str | None
    meaning: str
    # The default as the table shows it, when it is computed from other values.
    shown: str = ""
    # For a string with a fixed set of values.
    choices: tuple[str, ...] = ()
    # For a number (or days): the least value its meaning allows, checked at start. Below
    # it a value would be taken, then fail or misbehave at its first use (a pool of no
    # connections, a sweep without pause, a token expired as it is made).
    minimum: int | float | None = None
    # For a number that must hold another variable's amount and more: its least is that
    # variable's value, `above_times` over, plus `minimum` (both named when it is refused).
    above: str = ""
    above_times: int = 1

    def least_text(self, above_value=None) -> str:
        """Its least value in words, for the table, and with the value of the variable it
        is above (`above_value`) for a refusal."""
        if not self.above:
            return f"{self.minimum}"
        times = f"{self.above_times} × " if self.above_times != 1 else ""
        value = f" ({above_value})" if above_value is not None else ""
        return f"{times}{self.above}{value} + {self.minimum}"

    @property
    def default_text(self) -> str:
        if self.shown:
            return self.shown
        return "(empty)" if self.default in (None, "") else self.default


V = Variable
VARIABLES: list[Variable] = [
    # Deployment
    V("DJANGO_SETTINGS_MODULE", STR, "console.settings",
      "console.production in a deployment: secure cookies, HSTS, JSON logs, these checks"),
    V("SECRET_KEY", STR, None, "50+ random characters; signs sessions and approval links",
      shown="a development key (refused by console.production)"),
    V("SECRET_KEY_FALLBACKS", LIST, "",
      "the SECRET_KEYs it replaced, comma separated, each 50+ random characters: while "
      "one is here, sessions, approval links and pending approval requests made under it "
      "still hold (see Rotating SECRET_KEY)"),
    V("DEBUG", BOOL, "0", "Django's debug pages; only the local demo turns it on"),
    V("ALLOWED_HOSTS", LIST, "localhost,127.0.0.1", "the console's host names, comma separated"),
    V("VAR_DIR", PATH, None, "where the embedded database, broker, mail, archives and artifacts "
      "live by default", shown="var/ in the project"),
    V("SECURE_SSL_REDIRECT", BOOL, "1", "console.production: redirect plain HTTP to HTTPS"),
    V("DATA_UPLOAD_MAX_MEMORY_SIZE", INT, "2621440",
      "the largest request body read, in bytes; larger ones get 413. It must hold a run "
      "input or event payload of RUNS_INPUT_MAX_BYTES, sent compact or with every "
      "non-ASCII character escaped (up to three times its size), and the rest of its "
      "request", minimum=BODY_ROOM, above="RUNS_INPUT_MAX_BYTES",
      above_times=ESCAPED_GROWTH),
    # Database and broker
    V("DATABASE_URL", DATABASE, None,
      "postgres://user:password@host:5432/dbname (PostgreSQL 14+), or sqlite:///path",
      shown="SQLite in VAR_DIR (the demo)"),
    V("DB_CONN_MAX_AGE", INT, "600",
      "seconds a database connection is reused; 0 opens one per request and task", minimum=0),
    V("DB_PREPARED_STATEMENTS", BOOL, "1",
      "server-side prepared checkpoints; 0 behind a pooler that cannot keep them"),
    V("DB_POOL_MAX_SIZE", INT, "0", "a PostgreSQL connection pool of this size per process, "
      "shared by its threads (the threads mode of a worker); 0: one persistent connection",
      minimum=0),
    V("DB_POOL_MIN_SIZE", INT, "2", "connections the pool keeps open when idle", minimum=0),
    V("DB_POOL_TIMEOUT", FLOAT, "60", "seconds a thread waits for a free pooled connection",
      minimum=SOME),
    V("DB_LOCK_TIMEOUT", FLOAT, "10",
      "seconds a person's request (a web request, run_action, dispatch or schedules pause "
      "and resume, a bulk job's run) waits for a row another session holds before it is "
      "answered that nothing was done, and an archive pass waits for a row of a finished "
      "run before it leaves that run to a later pass; 0: without end", minimum=0),
    V("CELERY_BROKER_URL", STR, "filesystem://localhost/",
      "redis://host:6379/0 or amqp://...; the default needs no server (the demo)"),
    V("CELERY_DB_REUSE_MAX", INT, "1000",
      "tasks a worker runs before closing its database connections", minimum=0),
    # Login throttling
    V("AXES_FAILURE_LIMIT", INT, "5", "failed logins for one username from one address "
      "before that pair is locked out", minimum=1),
    V("AXES_COOLOFF_MINUTES", FLOAT, "15", "how long a lockout lasts", minimum=SOME),
    # The runtime
    V("SWEEP_INTERVAL_SECONDS", FLOAT, "2", "how often beat runs the runs sweeper", minimum=SOME),
    # A lease (this one, a bulk job's) of less than a second lapses between a worker's own
    # checkpoints: every run or job would be taken back from a live worker.
    V("RUNS_LEASE_SECONDS", FLOAT, "30", "how long a worker owns a run between heartbeats",
      minimum=1),
    V("RUNS_TAKE_BACKS_BEFORE_ATTENTION", INT, "5",
      "a run taken back this many times in a row from workers that stopped at the same "
      "point, nothing recorded between, waits for a person instead of being tried again",
      minimum=1),
    V("BULK_JOB_LEASE_SECONDS", FLOAT, "60",
      "how long a worker holds a bulk job between batches; a job whose worker died goes "
      "to another after this", minimum=1),
    V("WORKER_HEARTBEAT_SECONDS", FLOAT, "10",
      "how often each worker process writes its row for the Workers page", minimum=SOME),
    V("RUNS_HEARTBEAT_SECONDS", FLOAT, "0", "one transaction this often extends the leases "
      "of every step a worker process holds in its remote call (threads mode); 0: off", minimum=0),
    V("RUNS_CALL_LIMIT_SECONDS", FLOAT, "900",
      "with heartbeats on, a call still running after this long (its step not calling "
      "ctx.heartbeat()) has its lease extended no more: the run is taken back and the call "
      "settled by key", minimum=SOME),
    V("RUNS_REQUEUE_AFTER_SECONDS", FLOAT, "10",
      "a queued run nobody picked up is enqueued again after this long", minimum=SOME),
    V("RUNS_EXTRA_WORKFLOW_MODULES", LIST, "",
      "your workflow modules, comma separated, e.g. billing.workflows"),
    V("RUNS_RESULT_INLINE_BYTES", INT, "65536",
      "a step's or tool call's result larger than this is stored once as an artifact (a "
      "model is shown its start, size and sha256)", minimum=0),
    V("RUNS_RESULT_MAX_BYTES", INT, "33554432",
      "a step's or tool call's result larger than this fails it (a read: permanent error; "
      "a write: held for a person, its effect unknown)", minimum=1),
    V("RUNS_INPUT_MAX_BYTES", INT, "262144", "a run input, or an external event's payload, "
      "larger than this (as JSON) is refused", minimum=1),
    V("RUNS_TOOL_ARGUMENTS_MAX_BYTES", INT, "65536",
      "a tool call whose arguments (as JSON) are larger than this is never executed: a schema "
      "error the model is told of", minimum=1),
    V("RUNS_AGENT_TEXT_MAX_CHARS", INT, "65536",
      "a model turn's text longer than this is kept cut to it, its length noted; a final "
      "answer longer than it is kept whole as an artifact, within RUNS_RESULT_MAX_BYTES",
      minimum=1),
    V("RUNS_AGENT_TURN_MAX_TOOL_CALLS", INT, "64",
      "a model turn asking for more tool calls than this is refused as a whole: none of its "
      "calls is made, and the model is told (a schema error, against the agent's budget)",
      minimum=1),
    V("RUNS_LIMITS_REDIS_URL", STR, None, "Redis for the rate limits shared by every worker "
      "(runs.machine.limits); empty: each process alone",
      shown="CELERY_BROKER_URL when it is Redis"),
    V("RUNS_RATE_MARGIN_MS", INT, "400", "a rate limit's window is one second plus this margin "
      "(scheduling and network between admission and arrival)", minimum=0),
    V("RUNS_EVENT_SOURCES", STR, "{}", "sources that may send signed event webhooks, as JSON: "
      '{"payments": {"secret": "...", "workflows": ["order-fulfilment"]}}; each source an '
      "object with a `secret` of 16+ random characters (a webhook subscriber's least) and, "
      "optionally, `previous_secret` (as long; also accepted, while the sender moves to the "
      "new secret; never one that leaked: set the new secret alone and move the sender at "
      "once, its events refused until it has moved) and `workflows` (a list of names; "
      "without it, every workflow); anything else (not JSON, another setting, `workflows` "
      "as one name, a shorter secret) stops the process at start naming the source"),
    V("RUNS_EVENT_KEEP_SECONDS", FLOAT, "604800", "how long an event no run waits for yet is "
      "kept for the run that will (7 days); then it expires and is never delivered"),
    V("SCHEDULES_INTERVAL_SECONDS", FLOAT, "5", "how often beat looks for due schedule slots",
      minimum=SOME),
    V("EXTERNAL_TIMEOUT_SECONDS", FLOAT, "3",
      "the timeout of every outbound call a workflow makes", minimum=SOME),
    V("RUNS_TEST_CLOCK_OFFSET_SECONDS", FLOAT, "0", "tests only: seconds this process's clock "
      "is moved (a worker whose clock is wrong)"),
    V("RUNS_CRASH_AT", STR, "", "drills and tests only: the crash point a worker dies at"),
    V("RUNS_CRASH_MARKER", STR, "", "drills and tests only: file marking the crash as done"),
    V("RUNS_CRASH_MODE", STR, "", "drills and tests only: self (the worker kills itself)",
      choices=("", "self")),
    # Sandbox and model
    V("SANDBOX_ENABLED", BOOL, "1", "serve the simulated external systems under /sandbox/",
      shown="1 (0 in console.production)"),
    V("SANDBOX_BASE_URL", STR, "http://127.0.0.1:8000/sandbox",
      "where workflows reach the sandbox"),
    V("SANDBOX_HOLD_SECONDS", FLOAT, "5", "how long the slow sandbox faults hold a response",
      minimum=0),
    V("MODEL_BASE_URL", STR, None, "the OpenAI-compatible endpoint agent and decision steps "
      "ask", shown="SANDBOX_BASE_URL/model/v1"),
    V("MODEL_API_KEY", STR, "sandbox-key", "the model endpoint's key"),
    V("MODEL_NAME", STR, "sandbox-classifier", "the model asked unless a step names one"),
    # Logs
    V("LOG_LEVEL", STR, "INFO", "the root logger's level",
      choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    V("LOG_FORMAT", STR, "plain", "plain or json (one JSON object per line)",
      shown="plain (json in console.production)", choices=("plain", "json")),
    V("HTTP_CLIENT_LOG_LEVEL", STR, "WARNING",
      "the level of httpx and httpcore, the HTTP client of steps and webhooks: at INFO they "
      "log every request's URL, query string included",
      choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    V("WORKER_TASK_LOG_LEVEL", STR, "WARNING",
      "the level of Celery's two lines for every task a worker takes (received, succeeded): "
      "a task is a wake-up hint, and the runtime logs what happens to the run itself",
      choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")),
    # Approvals
    V("EMAIL_HOST", STR, "", "SMTP server for notifications; empty writes them to VAR_DIR/mail"),
    V("EMAIL_PORT", INT, "587", "SMTP port", minimum=1),
    V("EMAIL_HOST_USER", STR, "", "SMTP user"),
    V("EMAIL_HOST_PASSWORD", STR, "", "SMTP password"),
    V("EMAIL_USE_SSL", BOOL, "0", "SMTP over TLS from the start"),
    V("EMAIL_USE_TLS", BOOL, None, "SMTP with STARTTLS", shown="1 unless EMAIL_USE_SSL"),
    V("EMAIL_TIMEOUT", FLOAT, "10", "seconds an SMTP exchange may take", minimum=SOME),
    V("DEFAULT_FROM_EMAIL", STR, "approvals@localhost", "the notifications' sender"),
    V("APPROVALS_BASE_URL", STR, "http://127.0.0.1:8000",
      "the URL people and webhook subscribers reach the console on: links in emails, "
      "the status_url of webhook deliveries"),
    V("APPROVAL_LINK_MAX_AGE", INT, "259200", "seconds an approval link works", minimum=1),
    V("APPROVALS_SWEEP_INTERVAL_SECONDS", FLOAT, None, "how often beat runs the approvals sweep",
      shown="SWEEP_INTERVAL_SECONDS", minimum=SOME),
    V("APPROVALS_NOTIFICATION_MAX_ATTEMPTS", INT, "8",
      "tries of a notification before it is failed", minimum=1),
    V("APPROVALS_SETTLE_RETRY_SECONDS", FLOAT, "60",
      "a decision not yet applied to its run is tried again after this long", minimum=0),
    V("APPROVALS_FOUR_EYES_APPROVERS", LIST, "group:operators",
      "who approves a four-eyes operator action (user:NAME, group:NAME), comma separated"),
    V("APPROVALS_FOUR_EYES_TIMEOUT_SECONDS", INT, "86400", "how long they have", minimum=1),
    V("APPROVALS_FOUR_EYES_REMIND_SECONDS", INT, "14400", "how often they are reminded", minimum=1),
    # API, metrics, webhooks
    V("API_RATE_LIMIT", INT, "120", "requests per API token per window", minimum=1),
    V("API_RATE_LIMIT_WINDOW_SECONDS", INT, "60", "the rate limit's window", minimum=1),
    V("API_TOKEN_LAST_USED_PRECISION_SECONDS", INT, "60",
      "a token's last use is written at most this often", minimum=0),
    V("API_TOKEN_DEFAULT_DAYS", DAYS, "90", "new API tokens expire after this many days "
      "(none: never)", minimum=1),
    V("API_TOKEN_EXPIRY_WARNING_DAYS", INT, "7",
      "the metric of tokens expiring soon counts this many days ahead", minimum=0),
    V("API_CACHE_URL", STR, "", "redis://host:6379/1 for the API's rate-limit counters, shared "
      "by every web process; empty: this process's memory"),
    V("METRICS_TOKEN", STR, "", "the bearer token Prometheus sends to /metrics"),
    V("METRICS_ALLOW_LOCALHOST", BOOL, "1", "/metrics answers this machine without a token"),
    V("METRICS_STEP_WINDOW_SECONDS", FLOAT, "3600",
      "the step-duration histogram covers steps finished within this long", minimum=SOME),
    V("METRICS_FINISHED_RECOUNT_SECONDS", FLOAT, "600",
      "finished runs and old audit records are recounted this often (0: every scrape)", minimum=0),
    V("AUDIT_CHECKPOINT_INTERVAL_SECONDS", FLOAT, "86400",
      "how often beat writes the head of every audit chain to the checkpoint storage "
      "(STORAGES 'audit_checkpoints', else VAR_DIR/audit-checkpoints); 0: never", minimum=0),
    V("WEBHOOK_PUBLISH_INTERVAL_SECONDS", FLOAT, "2", "how often progress events are published",
      minimum=SOME),
    V("WEBHOOK_TIMEOUT_SECONDS", FLOAT, "5", "the timeout of one webhook delivery", minimum=SOME),
    V("WEBHOOK_SECRET_OVERLAP_HOURS", FLOAT, "24",
      "how long a webhook subscriber's replaced secret still signs its deliveries beside the "
      "new one, for its receiver to switch; 0: it stops at once", minimum=0),
    V("WEBHOOK_PRIVATE_ADDRESSES", BOOL, "1",
      "deliver webhooks to subscriber URLs that resolve to loopback, private or link-local "
      "addresses (api.public_network); off in console.production unless set",
      shown="1 (console.production: 0)"),
    # Traces (OpenTelemetry's own variables, read by runs.machine.tracing and its exporter)
    V("OTEL_EXPORTER_OTLP_ENDPOINT", STR, "", "where traces are exported over OTLP/HTTP; "
      "empty: no export, and tracing costs nothing"),
    V("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", STR, "",
      "the traces endpoint, when it differs from OTEL_EXPORTER_OTLP_ENDPOINT"),
    V("OTEL_SERVICE_NAME", STR, "durable-workflows", "the service name spans carry"),
    # Command line
    V("CLI_PASSWORD", STR, "", "the password of the person a command acts as (run_action, "
      "dispatch, schedules, bulk_action with --user), instead of the prompt (scripts)"),
    # Retention
    V("RUNS_RETENTION_DAYS", INT, "90", "finished runs stay in the hot tables this many days",
      minimum=0),
    V("ARCHIVE_INTERVAL_SECONDS", FLOAT, "3600", "how often beat runs the archive job",
      minimum=SOME),
    V("ARCHIVE_RUNS_PER_FILE", INT, "1000", "runs per archive file", minimum=1),
    V("ARCHIVE_MAX_RUNS_PER_PASS", INT, "20000", "runs archived per pass of the job", minimum=0),
    V("ARCHIVE_REMOVE_BATCH", INT, "100",
      "runs removed from the hot tables per transaction", minimum=1),
    # Keys and the client's address
    V("ARCHIVE_SIGNING_KEYS", STR, "", "id:secret,... (signing key first, older ones still "
      "verify): the HMAC-SHA256 seals of archive files; " + RING_ENTRIES,
      shown="a development key from SECRET_KEY (refused by console.production)"),
    V("AUDIT_SEAL_KEYS", STR, "", "id:secret,... (signing key first, older ones still "
      "verify): the HMAC-SHA256 seals of the audit chains' heads; " + RING_ENTRIES,
      shown="a development key from SECRET_KEY (refused by console.production)"),
    V("FIELD_ENCRYPTION_KEYS", STR, "", "id:key,... (Fernet keys, the one in use first): "
      "declared sensitive fields and webhook subscribers' secrets encrypted at rest; "
      + RING_ENTRIES,
      shown="a development key from SECRET_KEY (refused by console.production)"),
    V("RUNS_EVENT_DIGEST_KEYS", STR, "", "id:secret,... (the one in use first, older ones "
      "still compare): the HMAC-SHA256 of each external event's whole payload, by which an "
      "id sent again with a redacted field changed is refused; " + RING_ENTRIES,
      shown="a development key from SECRET_KEY (refused by console.production)"),
    V("TRUSTED_PROXY_COUNT", STR, "0", "how the client's address is found: 0, clients connect "
      "directly; N, behind N proxies appending to X-Forwarded-For (required by "
      "console.production)"),
]
BY_NAME: dict[str, Variable] = {v.name: v for v in VARIABLES}

# A variable with one of these prefixes is taken for one of ours: production refuses it
# unless it is declared above. Every declared family is here, except the names other
# software shares (Django's, Celery's, OpenTelemetry's, LOG_*), where a prefix would refuse
# their variables too. SECRET_KEY_FALLBACK, not SECRET_KEY_: a misspelt fallback would drop
# the old key unsaid (every link it signed refused), and a container's SECRET_KEY_FILE
# convention is not ours.
OUR_PREFIXES = ("RUNS_", "API_", "APPROVALS_", "APPROVAL_", "ARCHIVE_", "METRICS_",
                "WEBHOOK_", "SANDBOX_", "MODEL_", "AXES_", "DB_", "SWEEP_", "EXTERNAL_",
                "EMAIL_", "SCHEDULES_", "WORKER_", "BULK_", "AUDIT_", "FIELD_ENCRYPTION_",
                "TRUSTED_PROXY_", "HTTP_CLIENT_", "CLI_", "SECRET_KEY_FALLBACK")

_UNSET = object()


def parse(variable: Variable, raw: str, *, environ: Mapping[str, str] | None = None):
    """The typed value of `raw` for `variable`; ImproperlyConfigured naming both if it is
    malformed, or below the variable's minimum (for one `above` another, that variable's
    value in `environ` and the minimum)."""
    text = raw.strip()

    def refuse(expected: str):
        return ImproperlyConfigured(
            f"environment variable {variable.name}={raw!r} is not {expected} "
            f"({variable.meaning}; default {variable.default_text})")

    def at_least_minimum(value):
        # Not `value < minimum`: NaN compares false with every number, and is refused too.
        if variable.above:
            least = least_of(variable, environ=environ)
            if not value >= least:
                raise refuse(f"at least {least}: " + variable.least_text(
                    env(variable.above, environ=environ)))
        elif variable.minimum is not None and not value >= variable.minimum:
            raise refuse(f"at least {variable.minimum}")
        # An infinite interval, timeout or lease never ends: a sweep never comes back, a
        # lease is never taken back.
        if variable.minimum is not None and not math.isfinite(value):
            raise refuse(f"a finite number, at least {variable.minimum}")
        return value

    if variable.kind == INT:
        try:
            value = int(text)
        except ValueError:
            raise refuse("a whole number") from None
        return at_least_minimum(value)
    if variable.kind == FLOAT:
        try:
            value = float(text)
        except ValueError:
            raise refuse("a number") from None
        return at_least_minimum(value)
    if variable.kind == BOOL:
        if text == "":  # set but empty (DEBUG=): off, as before the table existed
            return False
        if text.lower() in TRUE | FALSE:
            return text.lower() in TRUE
        raise refuse("a flag (1/0, true/false, yes/no, on/off)")
    if variable.kind == LIST:
        return [part.strip() for part in text.split(",") if part.strip()]
    if variable.kind == DAYS:
        if text.lower() in ("", "none", "never"):
            return None
        try:
            value = int(text)
        except ValueError:
            raise refuse("a whole number of days or 'none'") from None
        return at_least_minimum(value)
    if variable.kind == PATH:
        return Path(text)
    if variable.kind == DATABASE:
        problem = database_url_problem(text) if text else None
        if problem:
            # The password never reaches a terminal or a log.
            raise ImproperlyConfigured(
                f"environment variable {variable.name}={masked_url(raw)!r} {problem} "
                f"({variable.meaning}; default {variable.default_text})")
        return text
    if variable.choices and text not in variable.choices:
        raise refuse("one of " + ", ".join(repr(c) for c in variable.choices))
    return raw


def database_url_problem(url: str) -> str | None:
    """What makes `url` no database URL the project can use, in words; None if nothing.
    Checked here rather than left to dj_database_url and the driver: they fail later, with a
    traceback that does not name the variable, or only when the first query connects."""
    if "://" not in url:
        return "is not a URL"
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an unclosed [ of an IPv6 host
        return f"is not a URL ({exc})"
    if parts.scheme == "sqlite":
        return None
    if parts.scheme not in POSTGRESQL_SCHEMES:
        return (f"names a {parts.scheme} database, and the project runs on PostgreSQL or "
                "SQLite only") if parts.scheme else "is not a URL"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        # Not quoted from the URL: a password with an unencoded / is read as the port.
        return "has a port that is not a number from 1 to 65535"
    if not parts.path.strip("/") and "service" not in parse_qs(parts.query):
        return "names no database (the path after the host: /dbname)"
    return None


def masked_url(url: str) -> str:
    """`url` with the password in it, if any, replaced by ***. Up to the last @: a password
    with an @ or a / not percent-encoded is masked whole, never cut where a parser would."""
    return re.sub(r"(?<=://)([^:@]*):.*@", r"\1:***@", url, count=1)


def load_settings_or_exit(program: str) -> None:
    """Read the settings module now. A value the environment gives that the settings refuse
    (ImproperlyConfigured, which names the variable) ends `program` with that message and
    exit status 2, as a wrong command line would: the traceback through Django's settings
    loader would only bury it."""
    try:
        settings.INSTALLED_APPS  # noqa: B018  (reading one setting reads them all)
    except ImproperlyConfigured as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def least_of(variable: Variable, *, environ: Mapping[str, str] | None = None):
    """The least value `variable` takes, with `environ`'s values of the one it is above."""
    if variable.above:
        return (variable.above_times * env(variable.above, environ=environ)
                + variable.minimum)
    return variable.minimum


def env(name: str, default=_UNSET, *, environ: Mapping[str, str] | None = None):
    """The value of the declared variable `name`, typed; its declared default when unset
    (or `default`, for one computed from other settings)."""
    variable = BY_NAME[name]  # a KeyError here: declare the variable in VARIABLES first
    environ = os.environ if environ is None else environ
    raw = environ.get(name)
    if raw is None:
        if default is not _UNSET:
            return default
        return None if variable.default is None else parse(variable, variable.default,
                                                           environ=environ)
    return parse(variable, raw, environ=environ)


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Variables in the environment that look like ours (OUR_PREFIXES) but are not declared,
    each with the declared name it most resembles."""
    environ = os.environ if environ is None else environ
    problems = []
    for name in sorted(environ):
        if name.startswith(OUR_PREFIXES) and name not in BY_NAME:
            near = difflib.get_close_matches(name, BY_NAME, n=1)
            problems.append(f"{name}" + (f" (did you mean {near[0]}?)" if near else ""))
    return problems


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse unknown variables and malformed values, naming every one of them at once."""
    environ = os.environ if environ is None else environ
    problems = [f"unknown environment variable {p}" for p in unknown_variables(environ)]
    for variable in VARIABLES:
        if variable.name in environ:
            try:
                parse(variable, environ[variable.name], environ=environ)
            except ImproperlyConfigured as exc:
                # Once each: a variable read by another's check refuses there too.
                if str(exc) not in problems:
                    problems.append(str(exc))
    if problems:
        raise ImproperlyConfigured(
            "the environment has problems; the table of variables is in "
            "docs/operations.md (Settings):\n  " + "\n  ".join(problems))


def markdown_table() -> str:
    """The table docs/operations.md shows."""
    lines = ["| variable | type | default | meaning |", "|---|---|---|---|"]
    for v in VARIABLES:
        kind = v.kind + (f" ({' / '.join(c or '(empty)' for c in v.choices)})"
                         if v.choices else "")
        kind += f" (at least {v.least_text()})" if v.minimum is not None else ""
        lines.append(f"| `{v.name}` | {kind} | {v.default_text} | {v.meaning} |")
    return "\n".join(lines) + "\n"
