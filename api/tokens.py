"""Issuing, checking and revoking API tokens.

A token has 256 bits of randomness, so a single unsalted sha256 is the right way to store
it: there is nothing to brute-force (unlike a password), and the lookup stays one indexed
query. The public prefix finds the row; the hashes are then compared in constant time, so
the response time tells nothing about how much of a guessed token was right.
"""

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, IntegrityError, connection, transaction

from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from runs import store
from runs.machine.storable import text_problem
from runs.models import Workflow
from runs.permissions import VIEW, grant_for

from .models import ApiToken

logger = logging.getLogger(__name__)

SCHEME = "dwf"


def hash_token(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def _new_plaintext() -> tuple[str, str]:
    prefix = secrets.token_hex(6)
    return prefix, f"{SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"


def assign_secret(token: ApiToken) -> str:
    """Give an unsaved token its prefix and hash; return the plaintext, which the caller
    shows once and forgets."""
    prefix, plaintext = _new_plaintext()
    token.prefix, token.hashed = prefix, hash_token(plaintext)
    return plaintext


class _Default:
    """Marks an expiry left to the API_TOKEN_DEFAULT_DAYS setting."""


DEFAULT_EXPIRY = _Default()


def clock() -> datetime:
    """What the API's due times are set from and judged by: this process's estimate of the
    database's clock (runs.store), never its host's. A token's expiry (a web host ahead
    would refuse a token its holder was told is good for ten more minutes); a replaced
    webhook secret's overlap and a delivery's due time and stamp (the host that replaces a
    secret and the publisher that signs with it are different hosts: one behind and the
    other ahead would end the overlap early, or send a retry before its backoff ended)."""
    return store.current().now()


def default_expiry(now: datetime) -> datetime | None:
    """When a token made at `now` expires by default: API_TOKEN_DEFAULT_DAYS later, or never
    when the setting is None."""
    days = settings.API_TOKEN_DEFAULT_DAYS
    return None if days is None else now + timedelta(days=days)


class ExpiryPassed(ValueError):
    """A new token's expiry is not in the future: it would be refused from its first use."""


def refuse_passed_expiry(expires_at: datetime | None, *, now: datetime) -> None:
    """The rule for every new token, wherever it is made (token_create, the admin's form):
    its expiry, if it has one, is still to come. A token issued already expired would be
    handed over and fail with 401 at once, which reads as a broken integration."""
    if expires_at is not None and expires_at <= now:
        raise ExpiryPassed(
            f"the expiry {expires_at:%Y-%m-%d %H:%M:%S %Z} has already passed (it is now "
            f"{now:%Y-%m-%d %H:%M:%S %Z}): a new token must expire in the future, or never "
            "(leave it empty)")


def acting_user_choices(creator):
    """The people `creator` may make a token act for. A token that acts for a person is
    their credential: their permissions, in their name (an approval of a four-eyes request
    included), so only a superuser (or the system: None) makes one for anyone; anyone else,
    for themselves (or nobody), as they may grant themselves no right on a user's page
    (console.admin: GRANTS_OF_USERS)."""
    users = get_user_model().objects.all()
    if creator is None or creator.is_superuser:
        return users
    return users.filter(pk=creator.pk)


def workflows_beyond(creator, workflows) -> list[str]:
    """The workflows among `workflows` whose runs `creator` may not view, which they may
    not give a token either: a token starts and reads runs of its workflows, so a person
    allowed to make tokens would otherwise reach, a form away, the runs of any workflow.
    None (the system, a command) and a superuser reach every workflow."""
    names = sorted(set(workflows))
    if creator is None or creator.is_superuser or not names:
        return []
    grant = grant_for(creator, VIEW)
    if grant.everywhere:
        return []
    rows = dict(Workflow.objects.filter(name__in=names).values_list("name", "pk"))
    return [name for name in names if not grant.covers(rows.get(name, 0))]


def refuse_workflows_beyond(creator, workflows) -> None:
    """PermissionDenied naming the workflows `creator` may not give a token."""
    beyond = workflows_beyond(creator, workflows)
    if beyond:
        raise PermissionDenied(f"{creator.get_username()} may not give a token "
                               f"{', '.join(beyond)}: a token reaches only workflows whose "
                               "runs its maker may view")


def token_create(*, name: str, workflows: list[str], rate_limit: int | None = None,
                 expires_at: datetime | None | _Default = DEFAULT_EXPIRY, created_by=None,
                 acting_user=None, now: datetime | None = None) -> tuple[ApiToken, str]:
    """Create a token; returns it and its plaintext (shown once, never stored). It expires
    at `expires_at` (None: never), by default API_TOKEN_DEFAULT_DAYS from now; ExpiryPassed
    if that moment is not in the future, PermissionDenied if `created_by` may not make a
    token act for `acting_user` (acting_user_choices) or give it a workflow beyond their
    own (workflows_beyond); nothing is written then."""
    now = now or clock()
    if isinstance(expires_at, _Default):
        expires_at = default_expiry(now)
    refuse_passed_expiry(expires_at, now=now)
    if acting_user is not None and \
            not acting_user_choices(created_by).filter(pk=acting_user.pk).exists():
        raise PermissionDenied(f"{created_by.get_username()} may not make a token that acts "
                               f"for {acting_user.get_username()}: only a superuser makes "
                               "one for another person")
    refuse_workflows_beyond(created_by, workflows)
    for _ in range(3):
        token = ApiToken(name=name, workflows=sorted(set(workflows)), rate_limit=rate_limit,
                         expires_at=expires_at, created_by=created_by, created_at=now,
                         acting_user=acting_user)
        plaintext = assign_secret(token)
        try:
            with transaction.atomic():
                token.save()
                record_token_access(token, AccessAction.API_TOKEN_CREATED, by=created_by)
        except IntegrityError:
            if ApiToken.objects.filter(name=name).exists():
                raise
            continue  # a prefix collision (1 in 2**48 per pair): draw again
        logger.info("API token %s created for workflows %s", name, ", ".join(token.workflows))
        return token, plaintext
    raise RuntimeError("could not draw an unused token prefix")


# What a person changes of a token (admin's page). Its name and the person it acts for are
# in the records it wrote; its revocation is token_revoke's, its last use token_check's.
SCOPE = ("workflows", "rate_limit", "expires_at")


class TokenRevoked(ValueError):
    """The token was revoked: nothing of it is changed any more."""


def revoked_refusal(token: ApiToken) -> str | None:
    """Why `token`'s scope may not be changed, or None: it was revoked, for good."""
    if token.revoked_at is None:
        return None
    by = f" by {token.revoked_by.get_username()}" if token.revoked_by_id else ""
    return (f"token {token.name} was revoked at {token.revoked_at:%Y-%m-%d %H:%M:%S %Z}{by}: "
            "a revoked token stays revoked, and its scope is no longer changed; nothing was "
            "saved")


def token_save(token: ApiToken, *, by, changed: Iterable[str] | None = None) -> None:
    """Save the parts of a token's scope `by` changed (`changed`: admin's form's changed
    data; None, all of SCOPE) and record its scope's change in the access chain, in one
    transaction under the row's lock; nothing is recorded if the scope is as it was.
    PermissionDenied, with nothing written, if `by` adds a workflow beyond their own
    (workflows_beyond: the ones it had stay, whoever edits it); TokenRevoked if the token
    is revoked (revoked_refusal), whenever that happened.

    The rest of `token` becomes the row as read under the lock. The caller's copy was read
    before (admin's page): written back whole, a revocation committed since was undone, the
    token working again, and its last use and what another admin changed of its scope set
    back."""
    edited = [name for name in SCOPE if changed is None or name in changed]
    with transaction.atomic():
        stored = ApiToken.objects.select_for_update().get(pk=token.pk)
        if (refusal := revoked_refusal(stored)) is not None:
            raise TokenRevoked(refusal)
        if "workflows" in edited:
            refuse_workflows_beyond(by, set(token.workflows or []) - set(stored.workflows))
        for field in ApiToken._meta.concrete_fields:
            if field.name not in edited:
                setattr(token, field.attname, getattr(stored, field.attname))
        if edited:
            token.save(update_fields=edited)
        before = token_scope(stored)
        if token_scope(token) != before:
            record_token_access(token, AccessAction.API_TOKEN_SCOPE_CHANGED, by=by,
                                before=before)


def token_revoke(token: ApiToken, *, by=None, now: datetime | None = None) -> bool:
    """Revoke a token at once (the next request with it gets 401). False if it already was."""
    now = now or clock()
    with transaction.atomic():
        revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=now, revoked_by=by)
        if revoked:
            record_token_access(token, AccessAction.API_TOKEN_REVOKED, by=by,
                                before=token_scope(token), after={})
    if revoked:
        token.revoked_at, token.revoked_by = now, by
        logger.info("API token %s revoked by %s", token.name, by or "system")
    return bool(revoked)


def token_scope(token: ApiToken) -> dict:
    """What a token lets its holder do, as the access chain records it (never its secret)."""
    # The person it acts for is the largest part of its scope: their permissions, in their
    # name. A token made for a superuser must say so in the chain, not only in its row.
    acting_user = token.acting_user.get_username() if token.acting_user_id else None
    return {"prefix": token.prefix, "workflows": sorted(token.workflows or []),
            "rate_limit": token.rate_limit,
            "expires_at": token.expires_at.isoformat() if token.expires_at else None,
            "acting_user": acting_user}


def record_token_access(token: ApiToken, action: str, *, by, before: dict | None = None,
                        after: dict | None = None) -> None:
    """Append a token's creation, revocation or change of scope to the access chain, in the
    caller's transaction. Created: nothing before, its scope after."""
    record_access_change(
        action=action, subject=f"token {token.name}",
        actor=Actor.for_user(by) if by is not None else Actor.system(),
        before={} if before is None else before,
        after=token_scope(token) if after is None else after)


@dataclass(frozen=True)
class Checked:
    """The outcome of checking a presented token: the token, or why it was refused."""

    token: ApiToken | None
    problem: str = ""


def token_check(plaintext: str, *, now: datetime | None = None) -> Checked:
    """Find the active, unexpired token `plaintext` is, recording that it was used."""
    now = now or clock()
    scheme, _, rest = plaintext.partition("_")
    prefix, _, secret = rest.partition("_")
    # Text the database cannot store (a NUL) is no token, and must not reach the prefix
    # lookup: it would fail there, a 500 where any other bad token gets 401.
    if (scheme != SCHEME or not prefix or not secret or len(plaintext) > 200
            or text_problem(plaintext) is not None):
        return Checked(None, "invalid token")
    token = ApiToken.objects.filter(prefix=prefix).select_related("acting_user").first()
    # Compared even when no row matched, so both cases take the same time.
    stored = token.hashed if token is not None else "0" * 64
    if not hmac.compare_digest(stored, hash_token(plaintext)) or token is None:
        return Checked(None, "invalid token")
    if token.revoked_at is not None:
        # Only the holder of the real secret learns that it was revoked.
        return Checked(None, "token revoked")
    if token.is_expired(now):
        return Checked(None, "token expired")
    if token.acting_user is not None and not token.acting_user.is_active:
        # A token that acts for a person is that person's credential: deactivating them
        # (they left, or are suspended) stops it as it stops their sign-in, reads included.
        return Checked(None, "token acts for an inactive user")
    _touch(token, now)
    return Checked(token)


def _touch(token: ApiToken, now: datetime) -> None:
    precision = timedelta(seconds=settings.API_TOKEN_LAST_USED_PRECISION_SECONDS)
    if token.last_used_at is None or now - token.last_used_at >= precision:
        try:
            # A savepoint only inside a transaction, whose work a refused stamp must not
            # spoil. Alone, the statement commits as it runs: no COMMIT of its own to send
            # (a round trip more on every request) or to lose (runs.execution.lost_commit).
            with transaction.atomic() if connection.in_atomic_block else nullcontext():
                ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        except DatabaseError as exc:
            # A database that refuses writes (read-only, a standby) still answers what only
            # reads: the stamp waits for the next request, the request is served.
            if not store.refuses_writes(exc):
                raise
            return
        token.last_used_at = now


def tokens_expiring_soon(now: datetime | None = None) -> int:
    """How many usable tokens expire within API_TOKEN_EXPIRY_WARNING_DAYS (for metrics):
    their callers will get 401 soon unless someone issues them a new token."""
    now = now or clock()
    horizon = now + timedelta(days=settings.API_TOKEN_EXPIRY_WARNING_DAYS)
    return ApiToken.objects.filter(revoked_at__isnull=True, expires_at__gt=now,
                                   expires_at__lte=horizon).count()
