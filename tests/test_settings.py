"""Settings come from the environment; production refuses the development secret key."""

import os
import subprocess
import sys

from django.conf import settings

# What a deployment must state besides its secret key: signing and encryption keys, and
# how the client's address is found.
PRODUCTION_ENV = {"ARCHIVE_SIGNING_KEYS": "a1:" + "s" * 48,
                  "AUDIT_SEAL_KEYS": "h1:" + "h" * 48,
                  "FIELD_ENCRYPTION_KEYS": "f1:" + "A" * 43 + "=",
                  "RUNS_EVENT_DIGEST_KEYS": "e1:" + "e" * 48,
                  "TRUSTED_PROXY_COUNT": "0"}


def _production_check(env):
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "from django.contrib.auth.hashers import get_hasher; "
            "print(s.DEBUG, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, get_hasher().algorithm)")
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.production", **PRODUCTION_ENV,
             **env},
        capture_output=True, text=True, timeout=60,
    )


def test_production_refuses_to_start_with_the_development_secret_key():
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**env, "DJANGO_SETTINGS_MODULE": "console.production"},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode != 0
    assert "SECRET_KEY is the development key" in result.stderr


def test_production_starts_with_a_real_secret_key_secure_cookies_and_a_slow_hasher():
    # The tests hash passwords with MD5 for speed (tests/conftest.py); production never does.
    result = _production_check({"SECRET_KEY": "k" * 64})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True", "True", "pbkdf2_sha256"]


def test_production_takes_the_secret_keys_a_rotation_replaced_and_refuses_a_weak_one():
    """SECRET_KEY_FALLBACKS holds the keys SECRET_KEY replaced (docs/operations.md,
    "Rotating SECRET_KEY"); each is held to SECRET_KEY's own rule, and a weak one is named
    by its position, never its text."""
    from console.settings import DEVELOPMENT_SECRET_KEY

    old = "an-earlier-production-key-" + "q8w7e6" * 6
    code = ("import django; django.setup(); from django.conf import settings as s; "
            f"print(s.SECRET_KEY_FALLBACKS == ['{old}', '{old[::-1]}'])")
    taken = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.production", **PRODUCTION_ENV,
             "SECRET_KEY": "k" * 64, "SECRET_KEY_FALLBACKS": f" {old} , {old[::-1]} "})
    assert taken.returncode == 0, taken.stderr
    assert taken.stdout.strip() == "True"

    for weak in ("old-key-" + "s" * 41, DEVELOPMENT_SECRET_KEY):
        refused = _production_check({"SECRET_KEY": "k" * 64,
                                     "SECRET_KEY_FALLBACKS": f"{old},{weak}"})
        assert refused.returncode != 0
        assert ("SECRET_KEY_FALLBACKS: key 2 (of 2, comma-separated) is the development key "
                "or shorter than 50 characters") in refused.stderr
        assert weak not in refused.stderr and old not in refused.stderr


def test_tests_run_on_postgresql_with_immediate_sqlite_as_the_embedded_default():
    assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    from console.settings import database_from_url

    embedded = database_from_url(None)
    assert embedded["ENGINE"] == "django.db.backends.sqlite3"
    assert embedded["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in embedded["OPTIONS"]["init_command"]


def test_check_deploy_is_clean_with_production_settings():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        env={**{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
             "DJANGO_SETTINGS_MODULE": "console.production", **PRODUCTION_ENV,
             "SECRET_KEY": "a-long-random-production-key-" + "x1y2z3" * 8,
             "ALLOWED_HOSTS": "console.example.com"},
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_debug_is_off_unless_the_environment_turns_it_on():
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.DEBUG)")
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DJANGO_SETTINGS_MODULE")}

    def debug(**extra):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env={**env, "DJANGO_SETTINGS_MODULE": "console.settings",
                                     **extra}, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert debug() == "False"
    assert debug(DEBUG="1") == "True"


def test_the_http_client_logs_no_request_url_and_still_logs_its_warnings(caplog):
    """httpx logs each request's URL at INFO, query string included: off by default."""
    import logging

    import httpx

    from tests.receiver import ScriptedReceiver

    with ScriptedReceiver() as receiver, caplog.at_level(logging.INFO):
        httpx.get(f"{receiver.url}/tasks?token=s3cret-value").raise_for_status()
        logging.getLogger("httpx").warning("a warning of the HTTP client")
    assert "s3cret-value" not in caplog.text
    assert "a warning of the HTTP client" in caplog.text


def test_a_worker_logs_no_line_per_task_taken_and_still_logs_a_task_that_fails(caplog):
    """Celery's received/succeeded lines, two per wake-up hint, are off by default."""
    import logging

    from celery import shared_task

    @shared_task(name="tests.settings.succeeds")
    def succeeds():
        return "done"

    @shared_task(name="tests.settings.fails")
    def fails():
        raise RuntimeError("the task broke")

    with caplog.at_level(logging.INFO):
        assert succeeds.apply().successful()
        assert fails.apply().failed()
    assert "tests.settings.succeeds" not in caplog.text
    assert "the task broke" in caplog.text


def test_a_misspelt_fallback_stops_production_and_a_containers_secret_key_file_does_not():
    """SECRET_KEY_FALLBACK (no S) would drop the old key unsaid during a rotation: refused,
    naming the declared one; SECRET_KEY_FILE (a container's convention) is not ours."""
    old = "an-earlier-production-key-" + "q8w7e6" * 6
    refused = _production_check({"SECRET_KEY": "k" * 64, "SECRET_KEY_FALLBACK": old})
    assert refused.returncode != 0
    assert "SECRET_KEY_FALLBACK" in refused.stderr and "SECRET_KEY_FALLBACKS" in refused.stderr
    assert old not in refused.stderr
    taken = _production_check({"SECRET_KEY": "k" * 64, "SECRET_KEY_FILE": "/run/secrets/key"})
    assert taken.returncode == 0, taken.stderr
