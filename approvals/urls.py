from django.urls import path

from runs.reads import id_in_path  # noqa: F401  (registers the converter <id:...>)

from . import views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("<id:pk>/", views.detail, name="detail"),
    path("<id:pk>/decide/", views.decide, name="decide"),
    # The link in the notification email: checked, moved into the session, redirected to
    # the detail page (the token never stays in the address bar or the Referer).
    path("<id:pk>/link/<str:token>/", views.link, name="link"),
]
