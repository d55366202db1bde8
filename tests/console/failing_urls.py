"""The console's URLconf plus a view that fails, to see the 500 page (tests only)."""

from django.urls import path

from console.urls import *  # noqa: F403
from console.urls import urlpatterns as console_urlpatterns


def _fail(request):
    raise RuntimeError("secret internals of the failure")


urlpatterns = [*console_urlpatterns, path("fail/", _fail)]
