"""run_action --decide N asks the deciding person's password before it looks up request N
(whether a request exists is told only to a person who proved who they are). An N that no
request can have (0: ids count from 1; negative; not written in the digits 0-9; longer than
any id) needs no lookup: it is refused before the password, as a number too long for any
id was. --decide 0 asked for the password first, and a mistyped one was counted by the
login throttle (axes) as a failed login: a mistyped id brought the person nearer to being
locked out. Now 0 is answered before the password, in the words an id that names no request
gets once the password is given ("no four-eyes request N"); no login attempt is recorded."""

import io

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def deputy():
    deputy = User.objects.create_user("deputy", password="deputy-secret")
    deputy.user_permissions.add(Permission.objects.get(codename="decide_approvalrequest"))
    return deputy


def decide(request_id: str) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("run_action", "--decide", request_id, "--user", "deputy",
                     stdout=io.StringIO())
    return str(refused.value)


def no_login_attempt() -> bool:
    return not AccessAttempt.objects.exists() and not AccessFailureLog.objects.exists()


@pytest.mark.parametrize("given, said", [
    ("0", "no four-eyes request 0"),
    ("-1", "no four-eyes request -1"),
    ("9" * 19, f"no four-eyes request {'9' * 19}"),
    ("x1", "request id (--decide) must be a whole number written in digits 0-9, not 'x1'; "
           "nothing was done"),
    ("٣", "request id (--decide) must be a whole number written in digits 0-9, not '٣'; "
          "nothing was done"),
])
def test_an_id_no_request_can_have_is_refused_before_the_password_is_checked(
        deputy, monkeypatch, given, said):
    monkeypatch.setenv("CLI_PASSWORD", "mistyped")
    assert decide(given) == said
    assert no_login_attempt()


def test_0_is_told_in_the_words_of_an_id_that_names_no_request(deputy, monkeypatch):
    monkeypatch.setenv("CLI_PASSWORD", "deputy-secret")
    assert decide("99999") == "no four-eyes request 99999"
    assert decide("0") == "no four-eyes request 0"
    # The password is asked for an id a request can have, and a wrong one is counted.
    monkeypatch.setenv("CLI_PASSWORD", "mistyped")
    assert decide("99999") == "wrong password for deputy; nothing decided"
    assert not no_login_attempt()
