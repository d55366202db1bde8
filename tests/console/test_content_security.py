"""The Content-Security-Policy: every page carries the production policy (scripts and styles
from our own files only), and no template holds an inline script, style or event handler
that the policy would block. The browser tests (test_browser.py) fail on any violation a
page reports."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from console.content_security import POLICY
from tests.test_settings import PRODUCTION_ENV

ROOT = Path(settings.BASE_DIR)
TEMPLATES = sorted(p for p in ROOT.glob("**/templates/**/*.html")
                   if ".venv" not in p.parts and "var" not in p.parts)
INLINE = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "style element": re.compile(r"<style\b", re.I),
    "style attribute": re.compile(r"\sstyle\s*=", re.I),
    "event-handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
}


def test_the_templates_are_found():
    names = {p.name for p in TEMPLATES}
    assert {"base.html", "_run_live.html", "login.html", "token_created.html"} <= names


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_template_holds_inline_code_or_styles(template):
    text = template.read_text()
    found = [f"{what}: {m.group(0)!r}" for what, rx in INLINE.items() for m in rx.finditer(text)]
    assert not found, found


def test_every_page_carries_the_policy_without_unsafe_sources(client, db):
    header = client.get("/accounts/login/")["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in header.split(";"))
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["default-src"] == "'self'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in header and "nonce" not in header


def test_htmx_is_configured_before_it_loads_to_inject_no_style_and_eval_nothing(client, db):
    page = client.get("/accounts/login/").content.decode()
    config = re.search(r"<meta name=\"htmx-config\" content='([^']+)'>", page)
    assert config and json.loads(config.group(1)) == {
        "includeIndicatorStyles": False, "allowEval": False,
        "attributesToSettle": ["class", "width", "height"]}
    assert config.start() < page.index("django_htmx/htmx-2.min.js")


def test_production_settings_enforce_the_same_policy():
    code = ("import django, json; django.setup(); from django.conf import settings as s; "
            "print(json.dumps([s.CONTENT_SECURITY_POLICY, "
            "'csp.middleware.CSPMiddleware' in s.MIDDLEWARE, "
            "getattr(s, 'CONTENT_SECURITY_POLICY_REPORT_ONLY', None)]))")
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.production", **PRODUCTION_ENV,
             "SECRET_KEY": "a-long-random-production-key-" + "x1y2z3" * 8})
    assert result.returncode == 0, result.stderr
    policy, middleware, report_only = json.loads(result.stdout.strip().splitlines()[-1])
    assert policy == POLICY and middleware and report_only is None
