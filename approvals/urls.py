from django.urls import path

from . import views

app_name = "approvals"

urlpatterns = [
    path("", views.inbox, name="inbox"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/decide/", views.decide, name="decide"),
    # The link in the notification email: checked, moved into the session, redirected to
    # the detail page (the token never stays in the address bar or the Referer).
    path("<int:pk>/link/<str:token>/", views.link, name="link"),
]
