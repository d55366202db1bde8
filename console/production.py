"""Production settings: the base settings plus the checks a deployment must pass."""

import base64
import os

from django.core.exceptions import ImproperlyConfigured

from .content_security import POLICY as CSP_POLICY
from .env import check_environment, env
from .settings import *  # noqa: F403
from .settings import (
    DEVELOPMENT_KEY_ID,
    DEVELOPMENT_SECRET_KEY,
    PROXY_COUNT_RULE,
    SECRET_KEY,
    SECRET_KEY_FALLBACKS,
)

# Every variable that looks like one of ours is declared (console.env) and well formed:
# a misspelt name would otherwise be ignored, and the default silently used instead.
check_environment()

DEBUG = env("DEBUG")
# The simulated external systems are for demos and tests; a deployment serves them only
# when asked to.
SANDBOX_ENABLED = env("SANDBOX_ENABLED", False)
# A subscriber's URL is an admin's to type: in a deployment it reaches public addresses only
# (api.public_network), unless asked.
WEBHOOK_PRIVATE_ADDRESSES = env("WEBHOOK_PRIVATE_ADDRESSES", False)


def weak_secret_key(key: str) -> bool:
    """Whether `key` may not sign anything in a deployment: the development key (anyone can
    read it in this code) or one shorter than 50 characters. A retired key still opens what
    it signed while it is a fallback, so the same holds for each of those."""
    return key == DEVELOPMENT_SECRET_KEY or len(key) < 50


if weak_secret_key(SECRET_KEY):
    raise ImproperlyConfigured(
        "SECRET_KEY is the development key or shorter than 50 characters; "
        "set SECRET_KEY in the environment to a long random value."
    )
for _position, _key in enumerate(SECRET_KEY_FALLBACKS, start=1):
    if weak_secret_key(_key):
        # By its position, never its text: it is a secret.
        raise ImproperlyConfigured(
            f"SECRET_KEY_FALLBACKS: key {_position} (of {len(SECRET_KEY_FALLBACKS)}, "
            "comma-separated) is the development key or shorter than 50 characters; each "
            "is a SECRET_KEY used before (a long random value).")

# The development keys are derived from values anyone can read in this code.
for _ring in ("ARCHIVE_SIGNING_KEYS", "AUDIT_SEAL_KEYS", "FIELD_ENCRYPTION_KEYS",
              "RUNS_EVENT_DIGEST_KEYS"):
    if DEVELOPMENT_KEY_ID in globals()[_ring] or not os.environ.get(_ring, "").strip():
        raise ImproperlyConfigured(
            f"{_ring} is not set: set it to \"id:secret\" (a long random secret; add new "
            "keys in front and keep old ones after them to rotate).")
for _ring in ("ARCHIVE_SIGNING_KEYS", "AUDIT_SEAL_KEYS", "RUNS_EVENT_DIGEST_KEYS"):
    for _id, _secret in globals()[_ring].items():
        if len(_secret) < 32:
            raise ImproperlyConfigured(f"{_ring}: key {_id!r} is shorter than 32 characters.")
for _id, _secret in FIELD_ENCRYPTION_KEYS.items():  # noqa: F405
    try:
        _ok = len(base64.urlsafe_b64decode(_secret.encode())) == 32
    except ValueError:
        _ok = False
    if not _ok:
        raise ImproperlyConfigured(f"FIELD_ENCRYPTION_KEYS: key {_id!r} is not 32 bytes of "
                                   "url-safe base64 (make one with Fernet.generate_key()).")

# Throttles count per client address; a wrong guess of how it is found either lets one
# client lock every approver out (all behind one proxy address) or lets a client pick its
# own address. The deployment says which.
if not os.environ.get("TRUSTED_PROXY_COUNT", "").strip():
    raise ImproperlyConfigured(f"{PROXY_COUNT_RULE} (it is not set).")

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = env("SECURE_SSL_REDIRECT")
SECURE_HSTS_SECONDS = 31536000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Enforced, never report-only: no inline scripts or styles, nothing from other origins.
CONTENT_SECURITY_POLICY = CSP_POLICY
WHITENOISE_USE_FINDERS = False
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# --- Structured logs (observability): JSON lines unless LOG_FORMAT=plain ------------------
if env("LOG_FORMAT", "json") == "json":
    LOGGING["handlers"]["console"]["formatter"] = "json"  # noqa: F405
# Celery leaves the root logger to Django's LOGGING, so worker and beat lines are JSON too,
# and plain ones are masked as the web's are (Celery's own formatter masks nothing).
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
