"""A secret written as a pair whose key is quoted (a JSON body, a Python dict, a config line)
is masked in a text as a secret-named field of a value is, and the credential after an
Authorization header's scheme word too: only the value goes, the key, the quotes and the
rest of the text stay readable. An HTTP error's text quotes up to 500 characters of the
remote's answer, most often JSON, and that text is stored on the step, shown on pages and
written into the run's audit chain, which is never rewritten."""

import json
import logging

import pytest

from audit.models import AuditRecord
from audit.redaction import REDACTED, redact, redact_text
from runs.execution import executor
from runs.models import RunStatus, Step, StepStatus
from tests.factories import new_run
from tests.receiver import ScriptedReceiver
from tests.security.test_sensitive_fields import tables_holding
from tests.workflows import receiver

SECRET = "Zq8vLw3xKp"


@pytest.mark.parametrize(("text", "masked"), [
    (f'{{"password": "{SECRET}"}}', f'{{"password": "{REDACTED}"}}'),
    (f"{{'token': '{SECRET}'}}", f"{{'token': '{REDACTED}'}}"),
    (f'"api-token": "{SECRET}"', f'"api-token": "{REDACTED}"'),
    (f'{{"client_secret":"{SECRET}","user":"bob"}}',
     f'{{"client_secret":"{REDACTED}","user":"bob"}}'),
    (f'{{"user" : "bob" , "password" : "{SECRET}"}}',
     f'{{"user" : "bob" , "password" : "{REDACTED}"}}'),
    (f'"password"="{SECRET}"', f'"password"="{REDACTED}"'),
    (f"'db_pass' = '{SECRET}'", f"'db_pass' = '{REDACTED}'"),
    (f'{{"accessToken": "{SECRET}", "X-Api-Key": "{SECRET}"}}',
     f'{{"accessToken": "{REDACTED}", "X-Api-Key": "{REDACTED}"}}'),
    # A key unquoted, its value quoted: a config line, a keyword argument in a repr.
    (f'password="{SECRET}"', f'password="{REDACTED}"'),
    (f"Login(token='{SECRET}')", f"Login(token='{REDACTED}')"),
    # A value holding spaces or an escaped quote is masked whole.
    (f'{{"password": "{SECRET} and \\" {SECRET}"}}', f'{{"password": "{REDACTED}"}}'),
    # JSON quoted inside a JSON text: the remote's body as another system wrapped it.
    (f'{{"detail": "{{\\"password\\": \\"{SECRET}\\"}}"}}',
     f'{{"detail": "{{\\"password\\": \\"{REDACTED}\\"}}"}}'),
    # Cut off within the value (an error text keeps 500 characters of the body).
    (f'HTTP 400: {{"password": "{SECRET}', f'HTTP 400: {{"password": "{REDACTED}'),
    # A number, a list or an object under a secret's name: masked whole, as the field of a
    # value is, up to where it ends (the brackets in its texts count for nothing), or to
    # the end of the text when it was cut off.
    ('{"token": 748213901, "n": 1}', f'{{"token": {REDACTED}, "n": 1}}'),
    ('{"pin": 1, "token": 748213901}', f'{{"pin": 1, "token": {REDACTED}}}'),
    (f'{{"credentials": {{"user": "bob", "key": "{SECRET}"}}, "n": 1}}',
     f'{{"credentials": {REDACTED}, "n": 1}}'),
    (f'{{"secrets": {{"prod": {{"db": ["{SECRET}", "}}]"]}}}}, "n": 1}}',
     f'{{"secrets": {REDACTED}, "n": 1}}'),
    (f"{{'cookies': [{{'name': 'sid', 'value': '{SECRET}'}}], 'n': 1}}",
     f"{{'cookies': {REDACTED}, 'n': 1}}"),
    (f'HTTP 400: {{"credentials": {{"user": "bob", "pass": "{SECRET}',
     f'HTTP 400: {{"credentials": {REDACTED}'),
    (f'{{"Authorization": "Token {SECRET}"}}', f'{{"Authorization": "{REDACTED}"}}'),
    # An Authorization header: the scheme word stays, the credential goes.
    (f"Authorization: Token {SECRET}", f"Authorization: Token {REDACTED}"),
    (f"authorization=Token {SECRET}", f"authorization=Token {REDACTED}"),
    (f"Authorization: Bearer {SECRET}", f"Authorization: Bearer {REDACTED}"),
    (f"Proxy-Authorization: Basic {SECRET}==", f"Proxy-Authorization: Basic {REDACTED}"),
    (f"Authorization: {SECRET}", f"Authorization: {REDACTED}"),
    (f"Authorization: Key-Id {SECRET}", f"Authorization: Key-Id {REDACTED}"),
    # Text redacted again is left as the first pass made it.
    (f'{{"password": "{REDACTED}"}}', f'{{"password": "{REDACTED}"}}'),
    (f"Authorization: Token {REDACTED}", f"Authorization: Token {REDACTED}"),
])
def test_the_value_of_a_secret_named_key_is_masked_however_it_is_quoted_and_the_key_stays(
        text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


def _held_as_a_string(value, depth: int) -> str:
    """`value` as a JSON text, held as a string by another JSON text `depth` times over (an
    error body one system wrapped, which another wrapped again)."""
    text = json.dumps(value)
    for _ in range(depth):
        text = json.dumps({"detail": text, "status": 400})
    return text


def _held_at(text: str, depth: int) -> str:
    for _ in range(depth):
        text = json.loads(text)["detail"]
    return text


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize(("value", "masked"), [
    ({"password": SECRET, "user": "bob"}, f'{{"password": "{REDACTED}", "user": "bob"}}'),
    # A quote, a bracket and a backslash of the secret's own, escaped once more at each
    # depth: the secret is masked whole, up to its own closing quote.
    ({"password": f'{SECRET}"}}, "user": "{SECRET}\\', "user": "bob"},
     f'{{"password": "{REDACTED}", "user": "bob"}}'),
    ({"token": 748213901, "user": "bob"}, f'{{"token": {REDACTED}, "user": "bob"}}'),
    ({"secrets": [SECRET, {"k": f'"]{SECRET}\\'}], "user": "bob"},
     f'{{"secrets": {REDACTED}, "user": "bob"}}'),
])
def test_a_secret_in_json_held_as_a_string_at_any_depth_is_masked_and_the_rest_kept(
        value, masked, depth):
    text = redact_text(_held_as_a_string(value, depth))

    assert SECRET not in text
    assert _held_at(text, depth) == masked
    assert redact_text(text) == text


def test_a_remotes_json_error_body_quoted_in_an_error_text_loses_only_its_secrets():
    body = json.dumps({"error": "invalid_grant", "detail": "the password was wrong",
                       "password": SECRET, "session": {"refresh_token": SECRET},
                       "url": f"https://bob:{SECRET}@idp.example.test/login",
                       "max_tokens": 512, "source": "api-token:erp-bridge"})
    text = f"HTTP 400 from idp.example.test/token: {body}"

    masked = redact_text(text)

    assert SECRET not in masked
    assert json.loads(masked.partition(": ")[2]) == {
        "error": "invalid_grant", "detail": "the password was wrong", "password": REDACTED,
        "session": {"refresh_token": REDACTED},
        "url": f"https://bob:{REDACTED}@idp.example.test/login",
        "max_tokens": 512, "source": "api-token:erp-bridge"}


@pytest.mark.parametrize("text", [
    "token bucket refilled: 40 tokens left",
    "the token expired",
    '{"error": "invalid token", "retry": true}',
    '{"note": "the password was wrong", "tokens": 3}',
    '{"max_tokens": 512, "prompt_tokens": 30, "tokenizer": "bpe"}',
    '{"passport_country": "DE", "secretary": "Ann", "passengers": 2}',
    "{'bypass': 'on', 'keyboard': 'de'}",
    # An API token's label names a token and opens nothing (audit.redaction).
    '{"source": "api-token:erp-bridge", "actor": "api-token:psp"}',
    # A hint naming the header's form, its placeholder no credential.
    "missing or invalid API key (send Authorization: Bearer <key>)",
    'said "password" twice: "token" and "secret"',
])
def test_keys_and_words_that_name_no_secret_and_their_values_are_left_whole(text):
    assert redact_text(text) == text


@pytest.mark.parametrize("key", [
    # Named a secret as a field of a value is.
    "password", "pwd", "newPassword", "client_secret", "Client-Secret", "access_token",
    "accesstoken", "api_key", "apikey", "X-Api-Key", "Set-Cookie", "private_key",
    "token_count",
    # Not named one.
    "passengers", "passport_country", "max_tokens", "tokens_left", "tokenizer", "secretary",
    "keyboard", "cookbook",
])
def test_a_quoted_key_in_a_text_is_decided_as_the_same_field_of_a_value_is(key):
    value = {key: SECRET, "n": 1}

    masked_as_field = redact(value)[key] == REDACTED
    masked_as_text = SECRET not in redact_text(json.dumps(value))

    assert masked_as_text == masked_as_field
    assert json.loads(redact_text(json.dumps(value))) == redact(value)


@pytest.mark.parametrize("adversary", [
    '"a":' * 25_000,
    # A long quoted value under a key naming no secret, holding pairs to look into.
    '"a":\'' + '"k": ' * 16_000,
    '"' * 100_000,
    "'" * 100_000,
    '"' + "a " * 50_000,
    ('"' + "k" * 63) * 1_600,
    '{"k": ' * 16_000,
    '"k"' + " " * 100_000,
    '{"password": "' + "\\" * 100_000,
    '{"password": \\"' + "\\x" * 50_000,
    '{"token": [' + "x" * 100_000,
    '{"password": ' * 16_000,
    '{"secrets": [], ' * 6_000,
    '{"n": [' * 16_000,
    "Authorization: " + "a-" * 50_000,
    "Authorization: a" + " " * 100_000 + "!",
    "Authorization: " + "a " * 50_000,
    "Authorization: Digest " + 'a=\\"' * 30_000,
    '{"d": "{\\"secrets\\": [' + '\\\\\\"' * 30_000,
    '{"d": "{\\"secrets\\": [' + '\\"[' * 30_000,
    "password" + " " * 100_000 + "x",
    # A bare value after a key quoted with one kind, quotes of the other kind after it.
    "'password': " + '"  ' * 30_000,
    "a='" + ' k="' * 25_000,
    'a="' + " k=\\'" * 25_000,
    # Values whose quotes are escaped any number of times, and lists in JSON held as a
    # string held as a string.
    "".join('"k": ' + "\\" * (n % 17) + '"' for n in range(12_000)),
    '{"d": "{\\"e\\": \\"{\\\\\\"secrets\\\\\\": [' + '\\\\\\"[' * 25_000,
    '{"d": "{\\"secrets\\": [' + "\\" * 100_000,
    # Keys naming no secret, each one's value holding all the others.
    "a=" * 200_000,
    '"k": a ' * 16_000,
    '{\\"k\\": a ' * 12_000,
    "a-b:" * 25_000,
    # Authorization headers under another name, with no credential to read.
    "X-Authorization=<" * 6_000,
    "X-Authorization: Bearer " + " " * 100_000 + "<",
    "authorization_header=Digest " + 'a=\\"' * 30_000,
    # Signatures listed without end, camelCase keys naming no secret.
    "X-Hub-Signature: " + "a," * 50_000,
    "Stripe-Signature: t=1" + ",v1=" * 30_000,
    "Stripe-Signature: t=1" + ", v1=" * 30_000,
    "Stripe-Signature: t=1," + " " * 100_000 + "v",
    "Signature:" + " " * 100_000 + "v",
    "Signature: " + "a" * 100_000 + "=",
    "signature: " * 10_000,
    "sig=&" * 30_000,
    "aB:" * 30_000,
    "authKey:" + " " * 100_000 + "x",
])
def test_a_long_adversarial_text_is_redacted_and_a_secret_after_it_masked(adversary):
    """Every error text passes the redaction: however it is written, its cost grows with
    its length, never with the length's power (nothing here waits on a clock: the test
    returns, or hangs)."""
    masked = redact_text(f'{adversary}\n{{"password": "{SECRET}"}}')

    assert SECRET not in masked
    # Or masked with the rest of a list or object under a secret's name that never closed.
    assert masked.endswith((f'\n{{"password": "{REDACTED}"}}', f": {REDACTED}"))


@pytest.fixture
def remote():
    with ScriptedReceiver() as server:
        receiver.url = server.url
        yield server
    receiver.url = ""


@pytest.mark.django_db
def test_a_password_in_a_remotes_json_error_body_is_kept_by_neither_the_step_nor_the_audit_chain(
        remote, caplog):
    caplog.set_level(logging.DEBUG)
    remote.answer("POST", "/updates", 400, error_body={
        "error": "invalid_request", "detail": "the credentials sent were refused",
        "password": SECRET, "user": "svc-orders"})
    run = new_run("test-remote")

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION

    step = Step.objects.get(run=run, name="post-update")
    assert step.status == StepStatus.FAILED
    assert len(remote.sent("POST", "/updates")) == 1
    assert step.error_message.startswith("HTTP 400 from 127.0.0.1/updates: ")
    assert f'"password": "{REDACTED}"' in step.error_message
    assert '"user": "svc-orders"' in step.error_message
    records = AuditRecord.objects.filter(run=run)
    quoting = [r.action for r in records if any(step.error_message in text
                                                 for text in _texts_of(r.data))]
    assert quoting
    assert not [r.action for r in records if SECRET in json.dumps(r.data)]
    assert tables_holding(SECRET) == []
    assert "post-update failed" in caplog.text and SECRET not in caplog.text


def _texts_of(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict | list):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _texts_of(item)


@pytest.mark.parametrize(("text", "masked"), [
    # A bare key before "=" is decided as a field's name is: a DSN, a query, a call's repr.
    (f"db_pass={SECRET} host=db", f"db_pass={REDACTED} host=db"),
    (f"connect(user=app, passwd={SECRET})", f"connect(user=app, passwd={REDACTED}"),
    (f"client_credentials={SECRET}&scope=all", f"client_credentials={REDACTED}&scope=all"),
    (f"private_key={SECRET}", f"private_key={REDACTED}"),
    # These words before ":" too, as password, secret and token were.
    (f"pwd: {SECRET}", f"pwd: {REDACTED}"),
    (f"passphrase: {SECRET}", f"passphrase: {REDACTED}"),
    (f"Set-Cookie: sid={SECRET}", f"Set-Cookie: {REDACTED}"),
    # Kept whole: a key that names no secret, and a word before ":" in prose.
    ("user=app host=db", "user=app host=db"),
    ("during the pass: nothing queued", "during the pass: nothing queued"),
    ("Authorization=Token x1y2", "Authorization=Token [redacted]"),
])
def test_a_bare_key_that_names_a_secret_before_an_equals_sign_loses_its_value(text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked
