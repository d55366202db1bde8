"""Mounted at /api/ by console.urls: the operations, /api/openapi.json and /api/docs."""

from . import dispatch_routes, event_routes  # noqa: F401  (they register their operations)
from .routes import api

urlpatterns = [*api.urls[0]]
app_name = "api"
