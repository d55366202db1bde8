"""Signed, expiring links to an approval request, on the design of Django's password-reset
tokens (django/contrib/auth/tokens.py).

The HMAC covers the request's id, its status and its payload hash, plus the time the link
was made. So a link dies once the request is decided (its status changes), once the payload
changes (the request is superseded: its status changes too, and the new request has another
id and hash), and when it is older than APPROVAL_LINK_MAX_AGE seconds. The signature is
compared in constant time. A link's age is judged by the clock it is stamped by: the
database's, as due times are (approvals.timeouts), whichever host makes or checks it.

A link does not authorise anything by itself: the page it opens still requires a logged-in
user holding the permission to decide. What it adds is that an email's link cannot be
forged or edited into another request's, and that an old email cannot lead anyone to a
request that has moved on without saying so.
"""

import enum
from datetime import UTC, datetime

from django.conf import settings
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.http import base36_to_int, int_to_base36

from runs import store

from .models import ApprovalRequest, RequestStatus

EPOCH = datetime(2001, 1, 1, tzinfo=UTC)


class LinkCheck(enum.Enum):
    VALID = "valid"
    # Well formed and signed by us, but the request has been decided, superseded or
    # withdrawn since the link was made.
    USED = "used"
    EXPIRED = "expired"
    # Not ours: malformed, edited, or made for another request.
    INVALID = "invalid"


class ApprovalLinkTokenGenerator:
    key_salt = "approvals.tokens.ApprovalLinkTokenGenerator"
    algorithm = "sha256"

    def make_token(self, approval: ApprovalRequest, *, now: datetime | None = None) -> str:
        """A token for `approval` in its current state, made at `now`."""
        return self._token(approval.pk, approval.status, approval.snapshot_hash,
                           self._seconds(now), settings.SECRET_KEY)

    def check_token(self, approval: ApprovalRequest | None, token: str | None, *,
                    now: datetime | None = None) -> LinkCheck:
        """Whether `token` is a live link to `approval`, and if not, why not."""
        if approval is None or not token or not isinstance(token, str):
            return LinkCheck.INVALID
        try:
            ts_b36, _ = token.split("-")
            ts = base36_to_int(ts_b36)
        except ValueError:
            return LinkCheck.INVALID
        secrets = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
        if not self._matches(approval.pk, approval.status, approval.snapshot_hash, ts, token,
                             secrets):
            # Made by us while the request was pending, but it is not pending any more?
            # Then the link was used (or overtaken), not forged: say so.
            if approval.status != RequestStatus.PENDING and self._matches(
                    approval.pk, RequestStatus.PENDING, approval.snapshot_hash, ts, token,
                    secrets):
                return LinkCheck.USED
            return LinkCheck.INVALID
        if self._seconds(now) - ts > settings.APPROVAL_LINK_MAX_AGE:
            return LinkCheck.EXPIRED
        return LinkCheck.VALID

    def _matches(self, pk, status, snapshot_hash, ts, token, secrets) -> bool:
        # Every secret is tried (no early exit on a prefix): the comparison itself is
        # constant time, as in Django's generator.
        return any(constant_time_compare(self._token(pk, status, snapshot_hash, ts, secret),
                                         token) for secret in secrets)

    def _token(self, pk, status, snapshot_hash, timestamp: int, secret) -> str:
        value = f"{pk}|{status}|{snapshot_hash}|{timestamp}"
        digest = salted_hmac(self.key_salt, value, secret=secret,
                             algorithm=self.algorithm).hexdigest()[::2]  # shorter URLs
        return f"{int_to_base36(timestamp)}-{digest}"

    @staticmethod
    def _seconds(now: datetime | None) -> int:
        # By default the database's clock (approvals.timeouts.clock, which is not imported:
        # it imports this module): the sweep stamps a link by it, and a web host whose own
        # clock is off would otherwise lengthen or shorten every link's life by its error.
        return int(((now or store.current().now()) - EPOCH).total_seconds())


approval_link_token = ApprovalLinkTokenGenerator()
