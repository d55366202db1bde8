"""Mounted at /api/ by console.urls: the operations, /api/openapi.json and /api/docs."""

from . import dispatch_routes  # noqa: F401  (registers its operations on api)
from .routes import api

urlpatterns = [*api.urls[0]]
app_name = "api"
