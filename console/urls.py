from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from observability import views as observability_views
from runs.definitions import name_in_path  # noqa: F401  (registers the converter <name:...>)
from runs.reads import id_in_path  # noqa: F401  (registers the converter <id:...>)

from . import bulk_views, list_views, transcript_views, views, world_views
from .forms import LoginForm

console_patterns = [
    path("runs/", views.runs_list, name="runs"),
    path("runs/bulk/", views.bulk_action, name="bulk"),
    path("runs/bulk/preview/", bulk_views.bulk_preview_page, name="bulk_preview"),
    path("runs/bulk/jobs/", bulk_views.bulk_start, name="bulk_start"),
    path("runs/bulk/jobs/<id:job_id>/", bulk_views.bulk_job_page, name="bulk_job"),
    path("runs/bulk/jobs/<id:job_id>/cancel/", bulk_views.bulk_cancel, name="bulk_cancel"),
    path("runs/views/", list_views.save_view, name="save_view"),
    path("runs/views/<id:view_id>/delete/", list_views.delete_view, name="delete_view"),
    path("runs/<id:run_id>/", views.run_detail, name="run"),
    path("runs/archived/<id:run_id>/", views.archived_run, name="archived_run"),
    path("runs/<id:run_id>/investigation/", views.run_investigation, name="investigation"),
    path("runs/<id:run_id>/transcripts/<id:turn_id>/", transcript_views.turn_artifact,
         name="turn_artifact"),
    path("runs/<id:run_id>/<slug:action>/", views.run_action, name="action"),
    path("attention/", views.attention, name="attention"),
    path("workers/", list_views.workers_page, name="workers"),
    path("audit/", views.audit_log, name="audit"),
    path("workflows/<name:name>/", views.workflow_page, name="workflow"),
    path("runbooks/<slug:reason>/", views.runbook, name="runbook"),
    path("schedules/", world_views.schedules_page, name="schedules"),
    path("schedules/<name:workflow>/<name:name>/pause/", world_views.schedule_pause,
         name="schedule_pause"),
    path("workflows/<name:workflow>/dispatch/", world_views.dispatch_pause,
         name="dispatch_pause"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("", include((console_patterns, "console"))),
    path("accounts/login/", auth_views.LoginView.as_view(authentication_form=LoginForm),
         name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("approvals/", include("approvals.urls")),
    # The integration API (bearer tokens only) and the Prometheus endpoint.
    path("api/", include("api.urls")),
    path("metrics", include("observability.urls")),
    # Readiness for a load balancer or an orchestrator: the database and the broker asked.
    path("ready", observability_views.ready, name="ready"),
]

# The product's own error pages (a body over the upload limit gets 413 through bad_request).
handler400 = "console.errors.bad_request"
handler403 = "console.errors.permission_denied"
handler404 = "console.errors.page_not_found"
handler500 = "console.errors.server_error"

if settings.SANDBOX_ENABLED:
    # The simulated external systems the demo workflows call over HTTP.
    urlpatterns.append(path("sandbox/", include("demo.sandbox.urls")))
