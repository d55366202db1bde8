"""Mounted at /api/ by console.urls: the operations, /api/openapi.json and /api/docs."""

from .routes import api

urlpatterns = [*api.urls[0]]
app_name = "api"
