from django.conf import settings
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
]

if settings.SANDBOX_ENABLED:
    # The simulated external systems the demo workflows call over HTTP.
    urlpatterns.append(path("sandbox/", include("demo.sandbox.urls")))
