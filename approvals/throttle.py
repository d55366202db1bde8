"""Throttling the approval link, the same way (django-axes) and with the same limits as logins.

The link's token is a bearer secret: whoever has it reaches the request's page. Tokens are
HMACs and cannot be guessed, but a client trying link after link is still refused like one
trying password after password: its invalid links count as failed logins of the pseudo-user
LINK_USER from its address (AXES_FAILURE_LIMIT, AXES_COOLOFF_TIME), listed and clearable in
Django admin with the other lockouts. LINK_USER cannot be a real username (Django's allow no
spaces or brackets), so it never locks out a person's login. A locked-out address still
opens valid links (approvals.views.link): only its invalid ones are refused. The address is
found as the deployment states (TRUSTED_PROXY_COUNT, console.client_address).
"""

from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_lockout_response
from django.contrib.auth.signals import user_login_failed

from audit.redaction import redact_text

LINK_USER = "(approval link)"
_CREDENTIALS = {"username": LINK_USER}


def link_lockout(request):
    """The lockout response (429) if `request`'s address may not try links now, else None."""
    if AxesProxyHandler.is_allowed(request, _CREDENTIALS):
        return None
    return get_lockout_response(request, credentials=_CREDENTIALS)


def link_failed(request) -> None:
    """Count an invalid link from `request`'s address as a failed login. The attempt axes
    stores and logs names the path with the token masked: a token pasted under another
    request's id may be live."""
    AxesProxyHandler.update_request(request)
    request.axes_path_info = redact_text(request.axes_path_info)
    user_login_failed.send(sender=__name__, credentials=dict(_CREDENTIALS), request=request)
