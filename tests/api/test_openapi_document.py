"""/api/openapi.json is a document Swagger UI (and any strict parser) accepts: no key twice."""

import json

import pytest

pytestmark = pytest.mark.django_db


def test_the_openapi_document_has_no_duplicate_keys(client):
    duplicates = []

    def no_duplicates(pairs):
        keys = [key for key, _ in pairs]
        duplicates.extend(key for key in set(keys) if keys.count(key) > 1)
        return dict(pairs)

    document = json.loads(client.get("/api/openapi.json").content,
                          object_pairs_hook=no_duplicates)
    assert duplicates == []
    responses = document["paths"]["/api/runs"]["post"]["responses"]
    assert "Retry-After" in responses["429"]["headers"]
    assert responses["429"]["content"] and responses["401"]["headers"]["WWW-Authenticate"]
