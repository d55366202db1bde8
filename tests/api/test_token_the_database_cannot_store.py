"""A bearer token holding a NUL character (which the database cannot store) is an invalid
token like any other: 401, never a database error on the prefix lookup."""

import pytest

from api.tokens import token_check

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("token", ["dwf_ab\x00cd_xyz", "dwf_abcd_x\x00yz"])
def test_a_token_with_a_nul_is_refused_as_invalid(client, make_token, token):
    make_token()
    response = client.get("/api/runs", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401, response.content
    assert response.json()["detail"] == "invalid token"


def test_token_check_calls_a_token_with_a_nul_invalid():
    assert token_check("dwf_ab\x00cd_xyz").problem == "invalid token"
