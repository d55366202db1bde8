import pytest
from django.core.cache import caches

from api.tokens import token_create


@pytest.fixture(autouse=True)
def _fresh_rate_limits(settings):
    # The demo's in-memory counters (a Redis cache is never cleared here: clear() would
    # flush the database the tests' broker uses too).
    if "locmem" in settings.CACHES["api"]["BACKEND"]:
        caches["api"].clear()
    yield


@pytest.fixture
def make_token(db):
    """make_token(name, workflows=[...], rate_limit=None) -> (token, plaintext)."""

    def make(name="erp", workflows=("test-orders",), rate_limit=None):
        return token_create(name=name, workflows=list(workflows), rate_limit=rate_limit)

    return make


@pytest.fixture
def api_client(client, make_token):
    """A test client that sends the bearer token of an `erp` token for test-orders."""
    token, plaintext = make_token()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    client.token = token
    return client


def post_run(client, body, **headers):
    return client.post("/api/runs", body, content_type="application/json", **headers)
