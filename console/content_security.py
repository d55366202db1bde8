"""The Content-Security-Policy (django-csp): scripts, styles and everything else only from
this site's own static files; no inline scripts, event-handler attributes, style attributes
or eval. Templates keep to it (tests/console/test_content_security.py checks them, and the
browser tests fail on any violation the page reports); htmx is told not to inject its
indicator styles nor to evaluate attribute code (the htmx-config meta tag in base.html).
"""

from csp.constants import NONE, SELF

POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        # data: for the small images stylesheets embed (Swagger UI's icons).
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}
