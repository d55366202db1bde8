"""Webhook subscribers' changes: made here, each with its record in the access chain in the
same transaction, whoever makes them (Django admin's pages call these).

A subscriber is told what happens from its creation on, and one that has deliveries is never
deleted: its deliveries are the publisher's record of what was sent where (they protect it in
the schema too), so it is deactivated instead.

A secret replaced keeps signing beside the new one for WEBHOOK_SECRET_OVERLAP_HOURS (each
delivery then carries both signatures), so that a receiver switching to the new secret
refuses nothing meanwhile; the replacement's record says until when. After that the
publisher removes it (retire_previous_secrets), recording the removal as the system's, and
only the new secret signs.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from audit.redaction import REDACTED
from runs.machine import sensitive
from runs.machine.storable import BLANKS
from runs.permissions import VIEW, grant_for

from . import webhook_cursors
from .models import WebhookSubscriber
from .tokens import clock, workflows_beyond

# The longest secret a person gives (its sealed form is longer: the model's column).
SECRET_MAX_LENGTH = 128
# The shortest: a receiver trusts a delivery because its signature could only be made with
# the secret, which a secret of a few characters does not ensure (anyone can try them all).
SECRET_MIN_LENGTH = 16
# The rule secret_problem applies, as the API's document says it: no blank at either end
# (nor a NUL anywhere, which no text column holds).
SECRET_PATTERN = rf"^[^{BLANKS}\u0000](?:[^\u0000]*[^{BLANKS}\u0000])?$"

# What a secret is recorded as: that it changed, never what it was or became.
SECRET_NOT_RECORDED = "(not recorded)"
SECRET_REPLACED = "replaced (not recorded)"
PREVIOUS_SECRET_REMOVED = "removed: its overlap ended"

# Who removes a replaced secret once its overlap has ended: no person, the publisher's pass.
PUBLISHER = Actor.system("webhook publisher")

# What a person changes of a subscriber (admin's form, the API's change). The rest of its row
# is the publisher's (its cursors and their holes, api.webhook_cursors), subscriber_save's
# own (the replaced secret's overlap, which the publisher removes once ended), or fixed (its
# name, when it was made).
EDITABLE = ("url", "secret", "workflows", "active")


def url_problem(url: str) -> str | None:
    """Why no delivery could ever be sent to `url`, or None. Deliveries are POSTed over
    HTTP(S); Django's URL check also takes ftp:// and ftps://, whose every delivery failed
    ("unsupported protocol") and was retried until it failed for good. Admin's form and the
    API ask this of a URL given, a stored one is left as it is (it may still be turned off)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        return (f"deliveries are POSTed over HTTP: give an http:// or https:// URL, not "
                f"{scheme}://")
    # Django's URL check takes a host IDNA refuses (an emoji's punycode) and any port of
    # five digits; the HTTP client refuses the one, and the other fails in the connect
    # itself, raised where no delivery's error catches it.
    try:
        parsed = httpx.URL(url)
        port = parsed.port
        parsed.host  # noqa: B018  (decodes the host: IDNA's refusal is raised here)
    except (httpx.InvalidURL, UnicodeError) as exc:
        return f"the HTTP client cannot send to it: {type(exc).__name__}: {exc}"
    if port is not None and not 0 < port <= 65535:
        return f"its port {port} is no port (1 to 65535)"
    return None


def secret_problem(secret: str) -> str | None:
    """Why `secret` may not sign a subscriber's deliveries, or None: the one rule admin's
    form and the API ask of a new secret given, in the same words; a stored one keeps
    signing (its subscriber may still be changed otherwise, e.g. turned off).

    A blank at either end is refused, not stripped: the receiver holds the secret too, and
    one changed silently on our side (or kept as typed on one path and stripped on another)
    would fail every signature it checks. A signature made with a short secret proves
    nothing: whoever wants to forge a delivery tries every secret that short."""
    if secret != secret.strip():
        return ("a secret may not begin or end with a space or another blank: the receiver "
                "checks each signature with the secret as it holds it, so give it without "
                "them (nothing is stripped)")
    if sensitive.is_sealed(secret):
        # What every sealed value begins with: taken as the stored secret kept, such a new
        # one would never be sealed nor sign anything (subscriber_save keeps the row's).
        return (f"a secret may not begin with '{sensitive.PREFIX}', which marks a secret "
                "stored sealed: give another")
    if len(secret) < SECRET_MIN_LENGTH:
        return (f"a secret signs each delivery: give at least {SECRET_MIN_LENGTH} "
                f"characters, random ones (this one has {len(secret)})")
    if len(secret) > SECRET_MAX_LENGTH:
        return (f"a secret may have at most {SECRET_MAX_LENGTH} characters (this one has "
                f"{len(secret)})")
    return None


def recorded_url(url: str) -> str:
    """A subscriber's URL as the access chain keeps it, for good and hashed: the host and
    path, with the credentials a URL may carry (its userinfo, its query's values) masked and
    its fragment left out. A receiver that authenticates by URL (`?token=...`,
    `user:pass@host`) would otherwise have its credential in every copy of the chain."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = urlencode([(name, REDACTED) for name, _ in parse_qsl(parts.query,
                                                                 keep_blank_values=True)],
                      safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def sealed_secret(secret: str) -> str:
    """A subscriber's secret as it is stored: sealed with the field encryption key in use
    (runs.machine.sensitive, FIELD_ENCRYPTION_KEYS), never in clear."""
    return secret if not secret or sensitive.is_sealed(secret) else sensitive.encrypt(secret)


def secrets_sealed_with(replaced) -> int:
    """Every subscriber's stored secrets with each sealed one replaced by `replaced(it)`,
    saved where that changed it; how many subscribers changed. The walk of a field key's
    retirement (runs.operator.field_keys, registered by api.apps): a secret sealed again is
    the same secret, so its subscriber signs as before and the access chain keeps the
    retirement's own record, not a change of each subscriber."""
    changed = 0
    held = WebhookSubscriber.objects.filter(secret__startswith=sensitive.PREFIX) | \
        WebhookSubscriber.objects.filter(previous_secret__startswith=sensitive.PREFIX)
    for pk in held.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            subscriber = WebhookSubscriber.objects.select_for_update().get(pk=pk)
            fields = []
            for name in ("secret", "previous_secret"):
                value = getattr(subscriber, name)
                if sensitive.is_sealed(value) and (kept := replaced(value)) != value:
                    setattr(subscriber, name, kept)
                    fields.append(name)
            if fields:
                subscriber.save(update_fields=fields)
                changed += 1
    return changed


def signing_secret(subscriber: WebhookSubscriber) -> str:
    """The secret `subscriber`'s deliveries are signed with: the stored one opened (one
    stored in clear, before api 0012 sealed them, as it is). UnreadableValue if it is sealed
    with a key FIELD_ENCRYPTION_KEYS no longer holds."""
    return opened(subscriber.secret)


def opened(secret: str) -> str:
    """A stored secret opened (one in clear as it is); UnreadableValue if no key opens it."""
    return sensitive.decrypt(secret) if sensitive.is_sealed(secret) else secret


def readable(secret: str) -> str | None:
    """A stored secret opened, or None when no key FIELD_ENCRYPTION_KEYS holds opens it."""
    try:
        return opened(secret)
    except sensitive.UnreadableValue:
        return None


def signing_secrets(subscriber: WebhookSubscriber, *, now: datetime) -> list[str]:
    """The secrets a delivery sent at `now` is signed with: the current one (signing_secret,
    UnreadableValue as it says), then the one it replaced while that still signs. A replaced
    one no key opens any more is left out: the current one's signature still goes."""
    secrets = [signing_secret(subscriber)]
    if previous_signs_until(subscriber, now=now) is not None:
        previous = readable(subscriber.previous_secret)
        if previous is not None and previous not in secrets:
            secrets.append(previous)
    return secrets


def previous_signs_until(subscriber: WebhookSubscriber, *, now: datetime) -> datetime | None:
    """Until when `subscriber`'s replaced secret signs beside its current one; None when it
    does not (none kept, or its time has passed)."""
    until = subscriber.previous_secret_until
    return until if subscriber.previous_secret and until is not None and now < until else None


def retire_previous_secrets(*, now: datetime) -> int:
    """Remove the replaced secrets whose overlap has ended (the publisher, each pass): they
    sign nothing any more (signing_secrets asks the time), and are not kept longer. Each
    removal is recorded in the access chain as the system's, in its transaction: the
    replacement's record says until when the secret was to sign, this one that it no longer
    can. How many."""
    with transaction.atomic():
        # Locked as subscriber_save locks them: a save that replaces the secret again
        # meanwhile moves the overlap's end, and such a row is no longer found here.
        ended = list(WebhookSubscriber.objects.select_for_update()
                     .filter(previous_secret_until__lte=now).order_by("pk"))
        for subscriber in ended:
            until = subscriber.previous_secret_until
            subscriber.previous_secret, subscriber.previous_secret_until = "", None
            subscriber.save(update_fields=["previous_secret", "previous_secret_until"])
            record_subscriber_change(
                subscriber, AccessAction.WEBHOOK_SUBSCRIBER_CHANGED, by=PUBLISHER,
                before={"previous_secret": SECRET_NOT_RECORDED,
                        "previous_secret_signs_until": until.isoformat()},
                after={"previous_secret": PREVIOUS_SECRET_REMOVED})
    return len(ended)


def subscriber_state(subscriber: WebhookSubscriber) -> dict:
    """What the access chain records of a subscriber: where its events go (recorded_url),
    for which workflows, whether it is active, and until when a replaced secret signs too,
    while one does (never a secret)."""
    state = {"url": recorded_url(subscriber.url),
             "workflows": sorted(subscriber.workflows or []), "active": subscriber.active}
    if (until := previous_signs_until(subscriber, now=clock())) is not None:
        state["previous_secret_signs_until"] = until.isoformat()
    return state


def record_subscriber_change(subscriber, action: AccessAction, *, before: dict,
                             after: dict, by, secret_changed: bool = False,
                             masked_url_changed: bool = False) -> bool:
    """Append the parts of a subscriber that changed to the access chain (a replaced secret
    as replaced, never its value; a URL whose masked parts alone changed, as such); whether
    anything was recorded. `by`: the person, or the system's Actor (PUBLISHER)."""
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if masked_url_changed and "url" not in keys:
        before = {**before, "url": f"{before['url']} (masked parts: not recorded)"}
        after = {**after, "url": f"{after['url']} (masked parts: replaced, not recorded)"}
        keys = sorted([*keys, "url"])
    if not keys and not secret_changed:
        return False
    before = {k: before[k] for k in keys if k in before}
    after = {k: after[k] for k in keys if k in after}
    if secret_changed:
        before["secret"], after["secret"] = SECRET_NOT_RECORDED, SECRET_REPLACED
    record_access_change(action=action, subject=f"webhook subscriber {subscriber.name}",
                         actor=by if isinstance(by, Actor) else Actor.for_user(by),
                         before=before, after=after)
    return True


class SubscriberInUse(PermissionDenied):
    """A subscriber that has deliveries was about to be deleted; nothing was (a 403)."""


class NameKept(ValueError):
    """A subscriber's name was about to change; nothing was: its records in the access
    chain name it (the admin shows it read-only)."""


def refuse_who_may_not(by, action: str) -> None:
    """PermissionDenied unless `by` holds the model permission Django admin asks of whoever
    does `action` ("view", "add", "change" or "delete") to webhook subscribers: viewing
    takes api.view_webhooksubscriber or api.change_webhooksubscriber (ModelAdmin.
    has_view_permission), the others their own. The system (None) does anything."""
    if by is None:
        return
    needed = ("view", "change") if action == "view" else (action,)
    if not any(by.has_perm(f"api.{codename}_webhooksubscriber") for codename in needed):
        raise PermissionDenied(f"{by.get_username()} may not {action} webhook subscribers "
                               f"(permission api.{action}_webhooksubscriber)")


def subscription_refusal(by, workflows: list[str], *, had: list[str] | None) -> str | None:
    """Why `by` may not have a subscriber take `workflows` (its stored list: [] is every
    workflow), one that took `had` before at the same URL (None: a new one, or one sent to a
    new URL), or None. Each delivery carries a run's workflow, business key and status to
    the subscriber's URL, which whoever makes it chooses: as for an API token
    (api.tokens.workflows_beyond), a person gives it only workflows whose runs they may
    view, and every workflow only if they may view every one. What it took already stays
    whoever edits it, as long as it is sent where it was: a new URL is a new receiver of
    all it takes. The system (None) and superusers give anything."""
    if by is None or had == []:
        return None
    if workflows == []:
        grant = grant_for(by, VIEW)
        if grant.everywhere:
            return None
        return ("you may not have a subscriber take every workflow (an empty list): you "
                "may not view every workflow's runs; name the workflows it takes")
    beyond = workflows_beyond(by, set(workflows) - set(had or []))
    if beyond:
        return (f"you may not have a subscriber take {', '.join(beyond)}: it is sent the "
                "runs of its workflows, which must be workflows whose runs you may view")
    return None


def workflows_kept(stored: WebhookSubscriber | None, url: str) -> list[str] | None:
    """The workflows a subscriber keeps whoever edits it (subscription_refusal's `had`): its
    stored ones while it is sent where it was; None for a new one, or one sent to a new URL,
    a new receiver of all it takes."""
    if stored is None or stored.pk is None or stored.url != url:
        return None
    return stored.workflows or []


def refuse_subscription(by, workflows: list[str], *, had: list[str] | None) -> None:
    """PermissionDenied, with nothing written, when subscription_refusal has a reason."""
    if (refusal := subscription_refusal(by, workflows, had=had)) is not None:
        raise PermissionDenied(f"{by.get_username()}: {refusal}")


def subscriber_create(subscriber: WebhookSubscriber, *, by) -> None:
    """Save a new subscriber, its cursors at the heads (it is told what happens from now
    on), and record it; PermissionDenied if `by` may not give it its workflows
    (subscription_refusal) or may not add subscribers (refuse_who_may_not)."""
    refuse_who_may_not(by, "add")
    refuse_subscription(by, subscriber.workflows or [], had=None)
    with transaction.atomic():
        for cursor, head in webhook_cursors.cursors_at_head().items():
            setattr(subscriber, cursor, head)
        subscriber.secret = sealed_secret(subscriber.secret)
        subscriber.save()
        record_subscriber_change(subscriber, AccessAction.WEBHOOK_SUBSCRIBER_CREATED,
                                 before={}, after=subscriber_state(subscriber), by=by)


def subscriber_save(subscriber: WebhookSubscriber, *, by, end_overlap: bool = False,
                    changed: Iterable[str] | None = None) -> None:
    """Save a changed subscriber and record what changed (a secret as replaced);
    PermissionDenied if `by` may not change subscribers (refuse_who_may_not) or may not give
    it its workflows (subscription_refusal); NameKept if its name changed.

    Only the fields of EDITABLE that `by` changed (`changed`: admin's form's changed data,
    the API's fields given; None, every one) are written from `subscriber`, and the rest of
    it becomes the row as read under this save's lock. The caller's copy was read before
    (admin's page, the API's lookup): written back whole, it set the publisher's cursors
    back to where they were then, and the deliveries queued meanwhile were made again (each
    a duplicate to its receiver); a field another person changed meanwhile was undone.

    A secret replaced keeps signing beside the new one for WEBHOOK_SECRET_OVERLAP_HOURS
    (replacing it again within them, the one replaced last); `end_overlap` (a leaked secret)
    stops the replaced one signing now, with or without a new one."""
    refuse_who_may_not(by, "change")
    with transaction.atomic():
        stored = WebhookSubscriber.objects.select_for_update().get(pk=subscriber.pk)
        if subscriber.name != stored.name:
            raise NameKept(f"webhook subscriber {stored.name} keeps its name: its records in "
                           "the access chain name it")
        edited = [name for name in EDITABLE if changed is None or name in changed]
        for field in WebhookSubscriber._meta.concrete_fields:
            if field.attname not in edited:
                setattr(subscriber, field.attname, getattr(stored, field.attname))
        refuse_subscription(by, subscriber.workflows or [],
                            had=workflows_kept(stored, subscriber.url))
        # A secret kept is the stored one, still sealed; a new one is typed in clear. Kept, it
        # is the row's as read under this lock, not the caller's copy: that copy was read
        # before (admin's page, the API's lookup), and a reseal_fields pass or another save
        # committed meanwhile would be undone by it (the ciphertext of the key being
        # retired, or the secret that save replaced, written back).
        if sensitive.is_sealed(subscriber.secret):
            subscriber.secret = stored.secret
        stored_secret = readable(stored.secret)
        replaced = subscriber.secret != stored.secret and \
            (stored_secret is None or signing_secret(subscriber) != stored_secret)
        # Only this function sets the overlap, from the row's (taken above): what the
        # caller's copy held of it may be older (read before the publisher removed an ended
        # one).
        overlap = timedelta(hours=settings.WEBHOOK_SECRET_OVERLAP_HOURS)
        if replaced and stored_secret is not None and overlap and not end_overlap:
            subscriber.previous_secret = sealed_secret(stored.secret)
            subscriber.previous_secret_until = clock() + overlap
        elif replaced or end_overlap:
            # No overlap asked, or none possible: a secret no key opens signs nothing.
            subscriber.previous_secret, subscriber.previous_secret_until = "", None
        subscriber.secret = sealed_secret(subscriber.secret)
        # The secret and its overlap are this function's to write (the secret kept is the
        # row's, sealed if it was stored in clear).
        subscriber.save(update_fields={*edited, "secret", "previous_secret",
                                       "previous_secret_until"})
        record_subscriber_change(subscriber, AccessAction.WEBHOOK_SUBSCRIBER_CHANGED,
                                 before=subscriber_state(stored),
                                 after=subscriber_state(subscriber), by=by,
                                 secret_changed=replaced,
                                 masked_url_changed=stored.url != subscriber.url)


def subscriber_delete(subscriber: WebhookSubscriber, *, by) -> None:
    """Delete a subscriber that has no deliveries and record it; SubscriberInUse, with
    nothing deleted, if it has some; PermissionDenied if `by` may not delete subscribers."""
    refuse_who_may_not(by, "delete")
    with transaction.atomic():
        # Locked, then asked again: a delivery the publisher adds meanwhile takes a share
        # lock on this row, so it is either seen here or waits for the delete.
        locked = WebhookSubscriber.objects.select_for_update().get(pk=subscriber.pk)
        if locked.deliveries.exists():
            raise SubscriberInUse(f"webhook subscriber {subscriber.name} has deliveries: "
                                  "deactivate it instead")
        before = subscriber_state(locked)
        locked.delete()
        record_subscriber_change(locked, AccessAction.WEBHOOK_SUBSCRIBER_DELETED,
                                 before=before, after={}, by=by)
