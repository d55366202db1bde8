"""API tokens in Django admin: create (the token is shown once), scope, expiry, revoke.

The plaintext is rendered straight into the response to the add form's POST (with
Cache-Control: no-store) instead of a redirect and a flash message: a message would rest in
the session or a cookie until displayed, and the secret must rest nowhere.
"""

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers, patch_cache_control

from audit.access import AccessAction, record_access_change
from audit.admin import ReadOnlyAdmin, StorableFiltersAdmin
from audit.chain import Actor
from audit.redaction import REDACTED
from runs.admin_search import UUID, IndexedSearchAdmin
from runs.definitions.definition import registry

from . import webhooks
from .models import ApiToken, WebhookDelivery, WebhookSubscriber
from .tokens import (
    ExpiryPassed,
    acting_user_choices,
    assign_secret,
    default_expiry,
    record_token_access,
    refuse_passed_expiry,
    token_revoke,
    token_scope,
)


class ApiTokenForm(forms.ModelForm):
    workflows = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple,
        help_text="The workflows this token may start and read runs of. None: the token can "
                  "do nothing.")

    class Meta:
        model = ApiToken
        fields = ["name", "workflows", "rate_limit", "expires_at", "acting_user"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is None:
            # A new token gets the default lifetime unless the admin changes or clears it.
            self.fields["expires_at"].initial = default_expiry(timezone.now())
        # Registered workflows, plus any the token already names (an old, unregistered one
        # stays visible rather than being silently dropped on save).
        names = sorted(set(registry.names()) | set(self.instance.workflows or []))
        self.fields["workflows"].choices = [(n, n) for n in names]

    def clean_workflows(self):
        return sorted(set(self.cleaned_data["workflows"]))

    def clean_expires_at(self):
        expires_at = self.cleaned_data["expires_at"]
        # Only a new token: an existing one may be edited (its limit, its scope) after it
        # expired, and an admin may end one now by moving its expiry back.
        if self.instance.pk is None:
            try:
                refuse_passed_expiry(expires_at, now=timezone.now())
            except ExpiryPassed as exc:
                raise forms.ValidationError(str(exc), code="expiry_passed") from None
        return expires_at


@admin.register(ApiToken)
class ApiTokenAdmin(StorableFiltersAdmin):
    form = ApiTokenForm
    list_display = ["name", "prefix", "scope", "rate_limit", "created_at", "last_used_at",
                    "expires_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix"]
    actions = ["revoke"]

    @admin.display(description="workflows")
    def scope(self, token):
        return ", ".join(token.workflows or []) or "(none)"

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        # The name is what the audit trail records: it never changes once used.
        # So is the person it acts for: their name is in the audit records it wrote.
        return ["name", "prefix", "acting_user", "created_at", "created_by", "last_used_at",
                "revoked_at", "revoked_by"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name", "workflows", "rate_limit", "expires_at", "acting_user"]
        return ["name", "prefix", "workflows", "rate_limit", "expires_at", "acting_user",
                "created_at",
                "created_by", "last_used_at", "revoked_at", "revoked_by"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        # The one rule of whom a token may act for (api.tokens), as the field's choices: a
        # person outside them is refused on the field, with nothing written.
        if db_field.name == "acting_user":
            kwargs["queryset"] = acting_user_choices(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_delete_permission(self, request, obj=None):
        # Revoked, never deleted: the audit trail names tokens, and a name must keep
        # meaning the token that acted.
        return False

    def save_model(self, request, obj, form, change):
        # The admin's change form runs in one transaction: the token and its record in the
        # access chain commit together.
        if not change:
            obj.created_at = timezone.now()
            obj.created_by = request.user
            # Kept on this request only, for response_add to show once.
            request._api_token_plaintext = assign_secret(obj)
            super().save_model(request, obj, form, change)
            record_token_access(obj, AccessAction.API_TOKEN_CREATED, by=request.user)
            return
        before = token_scope(ApiToken.objects.get(pk=obj.pk))
        super().save_model(request, obj, form, change)
        if token_scope(obj) != before:
            record_token_access(obj, AccessAction.API_TOKEN_SCOPE_CHANGED, by=request.user,
                                before=before)

    def response_add(self, request, obj, post_url_continue=None):
        plaintext = getattr(request, "_api_token_plaintext", None)
        if plaintext is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": f"API token {obj.name} created",
            "opts": self.model._meta,
            "token": obj,
            "plaintext": plaintext,
            "change_url": reverse("admin:api_apitoken_change", args=[obj.pk]),
            "list_url": reverse("admin:api_apitoken_changelist"),
            "start_url": request.build_absolute_uri(reverse("api:start_run")),
        }
        response = TemplateResponse(request, "api/token_created.html", context)
        add_never_cache_headers(response)
        patch_cache_control(response, no_store=True)
        return response

    # A change of the tokens (it stops their callers at once): Django offers an action
    # without permissions to whoever may view the list.
    @admin.action(permissions=["change"],
                  description="Revoke the selected tokens (at once, for good)")
    def revoke(self, request, queryset):
        revoked = already = 0
        for token in queryset:
            if token_revoke(token, by=request.user):
                revoked += 1
                self.log_change(request, token, "Revoked.")
            else:
                already += 1
        self.message_user(request, f"{revoked} token(s) revoked, {already} already revoked.",
                          messages.SUCCESS if revoked else messages.WARNING)


# What a secret is recorded as: that it changed, never what it was or became.
SECRET_NOT_RECORDED = "(not recorded)"
SECRET_REPLACED = "replaced (not recorded)"


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


def subscriber_state(subscriber: WebhookSubscriber) -> dict:
    """What the access chain records of a subscriber: where its events go (recorded_url),
    for which workflows, and whether it is active (never its secret)."""
    return {"url": recorded_url(subscriber.url), "workflows": sorted(subscriber.workflows or []),
            "active": subscriber.active}


def record_subscriber_change(subscriber, action: AccessAction, *, before: dict,
                             after: dict, by, secret_changed: bool = False,
                             masked_url_changed: bool = False) -> bool:
    """Append the parts of a subscriber that changed to the access chain (a replaced secret
    as replaced, never its value; a URL whose masked parts alone changed, as such); whether
    anything was recorded."""
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
                         actor=Actor.for_user(by), before=before, after=after)
    return True


class WebhookSubscriberForm(forms.ModelForm):
    # A URL typed without a scheme is taken as https: events are signed, not encrypted.
    url = forms.URLField(max_length=500, assume_scheme="https")

    class Meta:
        model = WebhookSubscriber
        fields = ["name", "url", "secret", "workflows", "active"]

    def clean_workflows(self):
        try:
            return webhooks.subscribed_workflows(self.cleaned_data["workflows"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="not_a_list") from None


class SubscriberInUse(PermissionDenied):
    """A subscriber that has deliveries was about to be deleted; nothing was (a 403)."""


@admin.register(WebhookSubscriber)
class WebhookSubscriberAdmin(StorableFiltersAdmin):
    """Where run events are sent: every creation, change of URL, workflows, secret or active
    state, and deletion is in the access chain, in the transaction of the change. A
    subscriber with deliveries is deactivated, never deleted: its deliveries are the
    publisher's record of what was sent where (they protect it in the schema too: this page
    says why and what to do instead)."""

    form = WebhookSubscriberForm
    list_display = ["name", "url", "active", "workflows", "last_event_id", "last_record_id",
                    "created_at"]
    list_filter = ["active"]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ["last_event_id", "last_record_id"]
        # The name is the subject of its records in the access chain.
        return ["name", "last_event_id", "last_record_id"]

    def save_model(self, request, obj, form, change):
        # The admin's change form runs in one transaction: the subscriber and its record in
        # the access chain commit together.
        if not change:  # a new subscriber is told what happens from now on
            for cursor, head in webhooks.cursors_at_head().items():
                setattr(obj, cursor, head)
            super().save_model(request, obj, form, change)
            record_subscriber_change(obj, AccessAction.WEBHOOK_SUBSCRIBER_CREATED, before={},
                                     after=subscriber_state(obj), by=request.user)
            return
        stored = WebhookSubscriber.objects.get(pk=obj.pk)
        super().save_model(request, obj, form, change)
        record_subscriber_change(obj, AccessAction.WEBHOOK_SUBSCRIBER_CHANGED,
                                 before=subscriber_state(stored),
                                 after=subscriber_state(obj), by=request.user,
                                 secret_changed=stored.secret != obj.secret,
                                 masked_url_changed=stored.url != obj.url)

    def get_deleted_objects(self, objs, request):
        # Django's delete page and bulk action refuse to delete what this lists as
        # protected, and show it: the subscribers that have deliveries, and what to do.
        # Listed before the cascade is collected, which would read every delivery.
        protected = [
            f"Webhook subscriber {s.name} has deliveries, the publisher's record of what "
            f"was sent where: deactivate it instead (untick Active on its page)"
            for s in objs if s.deliveries.exists()]
        if protected:
            return [str(s) for s in objs], {}, set(), protected
        return super().get_deleted_objects(objs, request)

    def delete_model(self, request, obj):
        with transaction.atomic():
            # Locked, then asked again: a delivery the publisher adds meanwhile takes a
            # share lock on this row, so it is either seen here or waits for the delete.
            locked = WebhookSubscriber.objects.select_for_update().get(pk=obj.pk)
            if locked.deliveries.exists():
                raise SubscriberInUse(f"webhook subscriber {obj.name} has deliveries: "
                                      "deactivate it instead")
            before = subscriber_state(locked)
            super().delete_model(request, obj)
            record_subscriber_change(locked, AccessAction.WEBHOOK_SUBSCRIBER_DELETED, before=before,
                                     after={}, by=request.user)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for subscriber in queryset:
                self.delete_model(request, subscriber)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(IndexedSearchAdmin, ReadOnlyAdmin):
    """Each delivery with its attempts; written only by the publisher. A search names a
    delivery's id (the X-Webhook-Id a receiver got), along its unique index."""

    # A status change's event, or a step outcome's audit record.
    list_display = ["delivery_id", "subscriber", "event", "record", "status", "attempts",
                    "last_status_code", "next_attempt_at", "delivered_at"]
    list_filter = ["status", "subscriber"]
    indexed_search = (("delivery_id", UUID),)
    list_select_related = ["subscriber", "event", "record"]
    ordering = ["-id"]
