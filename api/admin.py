"""API tokens in Django admin: create (the token is shown once), scope, expiry, revoke.

The plaintext is rendered straight into the response to the add form's POST (with
Cache-Control: no-store) instead of a redirect and a flash message: a message would rest in
the session or a cookie until displayed, and the secret must rest nowhere.
"""

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers, patch_cache_control

from audit.access import AccessAction
from audit.admin import ReadOnlyAdmin
from runs.definitions.definition import registry

from . import webhooks
from .models import ApiToken, WebhookDelivery, WebhookSubscriber
from .tokens import (
    ExpiryPassed,
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
class ApiTokenAdmin(admin.ModelAdmin):
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

    @admin.action(description="Revoke the selected tokens (at once, for good)")
    def revoke(self, request, queryset):
        revoked = 0
        for token in queryset:
            if token_revoke(token, by=request.user):
                revoked += 1
                self.log_change(request, token, "Revoked.")
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)


@admin.register(WebhookSubscriber)
class WebhookSubscriberAdmin(admin.ModelAdmin):
    list_display = ["name", "url", "active", "workflows", "last_event_id", "last_record_id",
                    "created_at"]
    list_filter = ["active"]
    readonly_fields = ["last_event_id", "last_record_id"]

    def save_model(self, request, obj, form, change):
        if not change:  # a new subscriber is told what happens from now on
            for cursor, head in webhooks.cursors_at_head().items():
                setattr(obj, cursor, head)
        super().save_model(request, obj, form, change)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """Each delivery with its attempts; written only by the publisher."""

    # A status change's event, or a step outcome's audit record.
    list_display = ["delivery_id", "subscriber", "event", "record", "status", "attempts",
                    "last_status_code", "next_attempt_at", "delivered_at"]
    list_filter = ["status", "subscriber"]
    search_fields = ["=delivery_id"]
    list_select_related = ["subscriber", "event", "record"]
    ordering = ["-id"]
