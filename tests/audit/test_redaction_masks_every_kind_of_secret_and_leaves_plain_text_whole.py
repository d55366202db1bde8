"""What the redaction filter masks in a text and in a JSON-like value, kind by kind, and
what it leaves exactly as it was. Every text a record, a checkpoint or a log line keeps
passes through it, and most hold no secret: the filter skips those quickly, which must
never let one kind of secret through."""

import json

import pytest

from audit.redaction import REDACTED, redact, redact_text, remember_opened, values_masked

SECRET = "Zq8vLw3xKp"


@pytest.mark.parametrize(("text", "kept_part"), [
    (f"Bearer {SECRET}", "Bearer "),
    (f"basic\t{SECRET}", "basic\t"),
    (f"sk-{SECRET}", ""),
    (f"the key was SK-{SECRET}", "the key was "),
    (f"password={SECRET}", "password="),
    (f"token:{SECRET}", "token:"),
    (f"api_key = {SECRET}", "api_key = "),
    (f"https://{SECRET}@example.test/path", "https://"),
    (f"postgres://user:{SECRET}@db.example.test/x", "postgres://user:"),
    (f"/approvals/12/link/{SECRET}", "/approvals/12/link/"),
    (f"Failing row contains (7, {SECRET}, x)", "Failing row contains "),
    # A credential quoted as a header or a pair, however close to an API token's label.
    (f"X-Api-Token: {SECRET}", "X-Api-Token: "),
    (f"x-api-token:{SECRET.lower()}", "x-api-token:"),
    (f"api-token: {SECRET.lower()}", "api-token: "),
    (f"Api-Token:{SECRET.lower()}", "Api-Token:"),
    (f"api-token={SECRET.lower()}", "api-token="),
    (f"api-token:{SECRET}", "api-token:"),
])
def test_each_kind_of_secret_in_a_text_is_masked_and_the_words_before_it_stay(text, kept_part):
    masked = redact_text(text)

    assert SECRET not in masked
    assert masked.startswith(kept_part + REDACTED)


@pytest.mark.parametrize("text", [
    "c40755c35c63372444abb7cc3b366c9ac531c40bce1d6e702b1ca65eb920a08b",
    "succeeded", "", "skipper", "asks", "Ünïcödé", "2026-12-05T07:48:07.952711+00:00",
    "change another system", "https://example.test/invoices/7",
])
def test_a_text_holding_no_secret_is_left_exactly_as_it_was(text):
    assert redact_text(text) == text


def test_a_value_keeps_its_plain_texts_and_loses_its_secrets_and_secret_named_fields():
    value = {"key": "c40755c35c63372444abb7cc3b366c9ac531c40bce1d6e702b1ca65eb920a08b",
             "attempt": 1, "note": f"Authorization: Bearer {SECRET}",
             "api_key": "anything", "Client-Secret": "anything",
             "lines": ["plain", f"token={SECRET}"]}

    assert redact(value) == {
        "key": "c40755c35c63372444abb7cc3b366c9ac531c40bce1d6e702b1ca65eb920a08b",
        "attempt": 1, "note": f"Authorization: Bearer {REDACTED}",
        "api_key": REDACTED, "Client-Secret": REDACTED,
        "lines": ["plain", f"token={REDACTED}"]}


@pytest.mark.parametrize("opened", ["dact", "redacted", "[redacted]", "acted] and"])
def test_redacting_again_changes_nothing_even_for_a_sensitive_value_that_is_part_of_the_mask(
        opened):
    """A value is redacted before it is measured and again as its row keeps it: the second
    pass must leave what the first made, whatever sensitive value the work opened."""
    value = {"note": f"paid with {opened} and token={SECRET}", "items": [f"x {opened} y"],
             "password": "hunter22"}
    with values_masked():
        remember_opened(opened)
        once = redact(value)
        assert redact(once) == once
    assert once["note"] == f"paid with {REDACTED} and token={REDACTED}"
    assert once["items"] == [f"x {REDACTED} y"] and once["password"] == REDACTED


@pytest.mark.parametrize("key", [
    "password", "PASSWORD", "db_pass", "pwd", "newPassword", "smtpPassword", "passphrase",
    "secret", "client_secret", "Client-Secret", "token", "access_token", "accessToken",
    "accesstoken", "refresh_token", "api_key", "api-key", "apikey", "APIKey", "X-Api-Key",
    "Authorization", "Proxy-Authorization", "cookie", "Set-Cookie", "credentials",
    "private_key", "sshPrivateKey",
    # A key that says what it opens, as headers and parameters APIs take one in name it.
    "X-Auth-Key", "authKey", "Ocp-Apim-Subscription-Key", "x-functions-key",
    "DD-APPLICATION-KEY", "app_key", "X-Master-Key", "access_key", "accesskey",
])
def test_a_field_a_word_of_whose_name_names_a_secret_is_masked(key):
    assert redact({key: SECRET, "n": 1}) == {key: REDACTED, "n": 1}


@pytest.mark.parametrize("key", [
    "passengers", "passport_country", "bypass", "compass", "max_tokens", "prompt_tokens",
    "tokens_left", "tokenizer", "secretary", "keyboard", "cookbook",
    # A key that names a record, or one anybody may read.
    "key", "idempotency_key", "sort_key", "public_key", "Sec-WebSocket-Key",
])
def test_a_field_whose_name_only_holds_a_secrets_letters_is_kept(key):
    """Business data a run's next step reads (an event's payload, a model's usage): masked,
    it no longer fitted the schema that took it."""
    assert redact({key: 2, "note": "DE"}) == {key: 2, "note": "DE"}


@pytest.mark.parametrize(("text", "secret"), [
    ("upstream said 401: X-Api-Token: s3cr3tvalue", "s3cr3tvalue"),
    ("token: abc", "abc"),
    ("sent api-token:erp-bridge with token=abc", "abc"),
    ("event api-token:erp-bridge:token:abc", "abc"),
])
def test_a_credential_beside_an_api_tokens_label_is_masked_and_the_label_kept(text, secret):
    masked = redact_text(text)

    assert secret not in masked.replace("api-token:erp-bridge", "")
    assert REDACTED in masked


@pytest.mark.parametrize("text", [
    "api-token:erp-bridge",
    "event:api-token:erp-bridge:evt-1",
    "event api-token:erp.prod_2",
    "kept event 7 (api-token:psp:evt-1) expired",
    f"api-token:{'p' * 60}~0123456789abcdef0123456789abcdef",
])
def test_an_api_tokens_label_and_the_event_id_after_it_are_kept_whole(text):
    """How records, logs and an event's source name the token that sent it: masked, nobody
    could tell which system sent an event, nor which event it was."""
    assert redact_text(text) == text
    assert redact({"source": text}) == {"source": text}


@pytest.mark.parametrize(("text", "masked"), [
    # No scheme: a credential of letters only is the credential, not a scheme word.
    ("Authorization: abcdefghijklmnop sent", f"Authorization: {REDACTED}"),
    ("authorization=abcdefghijklmnop then", f"authorization={REDACTED}"),
    # A word no scheme is named: the credential, or an unknown scheme and its credential.
    ("Authorization: Custom abcdefghijklmnop", f"Authorization: {REDACTED}"),
    ("Authorization: custom Zq8vLw3xKp sent", f"Authorization: {REDACTED} sent"),
    # A credential that is no word is the credential alone.
    ("Authorization: abc1defghijklmnop sent", f"Authorization: {REDACTED} sent"),
    # A known scheme, or one written as header names are, keeps its word.
    ("Authorization: Bearer abcdefghijklmnop sent", f"Authorization: Bearer {REDACTED} sent"),
    ("Authorization: NTLM TlRMTVNTUAAB sent", f"Authorization: NTLM {REDACTED} sent"),
    ("Authorization: negotiate abcdefghijklmnop", f"Authorization: negotiate {REDACTED}"),
    ("Authorization: Client-ID abcdefghijklmnop sent", f"Authorization: Client-ID {REDACTED} sent"),
    # Before "=" too, Proxy-Authorization as Authorization.
    ("Proxy-Authorization=Basic Zq8vLw3xKp sent", f"Proxy-Authorization=Basic {REDACTED} sent"),
])
def test_after_authorization_a_known_scheme_keeps_its_word_and_any_other_word_is_masked(
        text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


@pytest.mark.parametrize(("text", "masked"), [
    ('Authorization: Digest username="x", realm="r", nonce="n", '
     'response="6629fae49393a05397450978507c4ef1"', f"Authorization: Digest {REDACTED}"),
    # Up to the end of the header's line: the next header stays.
    ('Authorization: Digest username="x", response="6629fae4"\nHost: example.test',
     f"Authorization: Digest {REDACTED}\nHost: example.test"),
    ("Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/s3/aws4_request,"
     " SignedHeaders=host;x-amz-date, Signature=5d672d79c15b13162d9279b0855cfba6789a8edb",
     f"Authorization: AWS4-HMAC-SHA256 {REDACTED}"),
    ('Authorization: vapid t=eyJ0eXAiOiJKV1QiLCJhbGciOiJFUzI1NiJ9, k=BA1Hxzyi1RUM1b5wjxsn',
     f"Authorization: vapid {REDACTED}"),
    # Quoted in a JSON text: up to the end of the text that holds it.
    ('{"request": "Authorization: Digest username=\\"x\\", response=\\"6629fae4\\"", '
     '"status": 401}',
     f'{{"request": "Authorization: Digest {REDACTED}", "status": 401}}'),
])
def test_a_credential_of_parameters_is_masked_whole_up_to_the_end_of_its_header(text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


@pytest.mark.parametrize("secrets", [
    [SECRET, "b"],
    # Brackets, escaped quotes and backslashes in its texts count for nothing.
    [f"{SECRET}]", 'a"}]', "c\\d]"],
    {"prod": [SECRET], "note": "} ]"},
    [[SECRET], {"k": [f"{SECRET}\\"]}],
])
def test_a_list_or_object_under_a_secret_key_in_json_held_as_a_string_is_masked_up_to_its_end(
        secrets):
    """A remote's JSON answer quoted in another JSON text (an error body another system
    wrapped): its quotes are escaped, and only the value under the secret's key goes."""
    text = json.dumps({"detail": json.dumps({"secrets": secrets, "n": 1}), "other": "kept"})

    assert redact_text(text) == json.dumps(
        {"detail": f'{{"secrets": {REDACTED}, "n": 1}}', "other": "kept"})


def test_a_list_cut_off_in_json_held_as_a_string_is_masked_to_the_end_of_that_string():
    text = f'{{"detail": "{{\\"secrets\\": [\\"{SECRET}\\", \\"b", "other": "kept"}}'

    assert redact_text(text) == f'{{"detail": "{{\\"secrets\\": {REDACTED}", "other": "kept"}}'


@pytest.mark.parametrize(("text", "masked"), [
    ('field "password": check the length', f'field "password": {REDACTED}'),
    ('invalid "password": hunter is too short', f'invalid "password": {REDACTED}'),
    ('"password": hunter', f'"password": {REDACTED}'),
    ("password: hunter", f"password: {REDACTED}"),
    # YAML's words, a password of several: up to the end of the line, or to what ends a
    # value in JSON or YAML (a comma, a closing bracket).
    ('"password": correct horse battery staple', f'"password": {REDACTED}'),
    ("'password': correct horse battery staple  \nuser: bob",
     f"'password': {REDACTED}  \nuser: bob"),
    ('{"password": correct horse, "user": bob}', f'{{"password": {REDACTED}, "user": bob}}'),
    ('["a", {"token": two words}, "b"]', f'["a", {{"token": {REDACTED}}}, "b"]'),
    ('{"n": 1, "token": 748213901 two}', f'{{"n": 1, "token": {REDACTED}}}'),
    # In a YAML text held as a JSON string: up to the escape of its line's end, or to the
    # end of the string.
    (json.dumps({"config": '"password": correct horse\nuser: bob', "n": 1}),
     json.dumps({"config": f'"password": {REDACTED}\nuser: bob', "n": 1})),
    # Not at a quote, which a password may hold, where no JSON string holds the key.
    ('"password": pass"word and more', f'"password": {REDACTED}'),
    # A string quoted with the other kind holding the key: its closing quote ends the value
    # (and the string) where what ends a value follows it, and is kept.
    (json.dumps({"detail": "'password': correct horse", "n": 1}),
     json.dumps({"detail": f"'password': {REDACTED}", "n": 1})),
    (repr({"detail": '"token": hunter2'}), repr({"detail": f'"token": {REDACTED}'})),
    (repr(['"token": two words', "b"]), repr([f'"token": {REDACTED}', "b"])),
    ("'password': pass\"word and more", f"'password': {REDACTED}"),
])
def test_a_bare_value_after_a_quoted_secret_key_is_masked_to_the_end_of_its_value_or_line(
        text, masked):
    """Prose quoting a key ('field "password": check the length') loses what follows on
    its line: nothing in the text tells prose from a value. YAML writes a value bare after
    a quoted key, a password of several words too, and a message quoting a rejected value
    reads as prose does ('"password": hunter is too short'): whatever kept "check the
    length" would keep "is too short"."""
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


@pytest.mark.parametrize(("text", "masked"), [
    # A repr's keyword, a config line: a bare key naming a secret, its value quoted.
    (f"Settings(db_pass='{SECRET}', host='db')", f"Settings(db_pass='{REDACTED}', host='db')"),
    (f'client_credentials="{SECRET} x"&scope=all', f'client_credentials="{REDACTED}"&scope=all'),
    # Bytes as a repr writes them.
    (f"{{'password': b'{SECRET}', 'n': 1}}", f"{{'password': b'{REDACTED}', 'n': 1}}"),
    (f"connect(passwd=b'{SECRET}')", f"connect(passwd=b'{REDACTED}')"),
    (f"Config(credentials=b'{SECRET}')", f"Config(credentials=b'{REDACTED}')"),
    # Kept whole: a bare key naming no secret, its value quoted (and looked into).
    ("Settings(host='db', user='app')", "Settings(host='db', user='app')"),
    (f"Settings(note='token={SECRET}')", f"Settings(note='token={REDACTED}')"),
])
def test_a_quoted_value_after_a_bare_secret_key_and_a_secret_written_as_bytes_are_masked(
        text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


@pytest.mark.parametrize("text", [
    # The headers APIs take a credential in, as an error text quotes them, and a config's
    # keys: the name kept, before ":" as before "=".
    f"X-Api-Key: {SECRET}", f"X-API-Key: {SECRET}", f"Api-Key: {SECRET}",
    f"X-Auth-Token: {SECRET}", f"X-Amz-Security-Token: {SECRET}", f"X-Auth-Key: {SECRET}",
    f"Ocp-Apim-Subscription-Key: {SECRET}", f"x-functions-key: {SECRET}",
    f"DD-APPLICATION-KEY: {SECRET}", f"X-Master-Key: {SECRET}", f"X-Credentials: {SECRET}",
    f"X-Db-Pass: {SECRET}", f"X-Auth-Key={SECRET}", f"auth_key: {SECRET}",
    f"access_key={SECRET}", f"sent X-Auth-Key:{SECRET}, retrying",
])
def test_a_credential_in_a_header_apis_take_one_in_is_masked_and_the_headers_name_kept(text):
    masked = redact_text(text)

    assert masked == text.replace(SECRET, REDACTED)
    assert redact_text(masked) == masked


@pytest.mark.parametrize(("text", "masked"), [
    # A scheme's word before the credential, in a header of another name: the word kept.
    (f"X-Auth-Token: Bearer {SECRET} sent", f"X-Auth-Token: Bearer {REDACTED} sent"),
    (f"access_token=Bearer {SECRET}", f"access_token=Bearer {REDACTED}"),
    (f"token: Bearer {SECRET}", f"token: Bearer {REDACTED}"),
    # A scheme's word alone may be the secret itself.
    ("password: basic", f"password: {REDACTED}"),
    # An Authorization header under another name is read as one.
    (f"X-Authorization=Bearer {SECRET} sent", f"X-Authorization=Bearer {REDACTED} sent"),
    (f"HTTP_AUTHORIZATION=Basic {SECRET}", f"HTTP_AUTHORIZATION=Basic {REDACTED}"),
    (f"X-Authorization: Custom {SECRET}", f"X-Authorization: {REDACTED}"),
    ('X-Authorization: Digest username="x", response="6629fae4"',
     f"X-Authorization: Digest {REDACTED}"),
    # Its credential quoted, as a repr writes a keyword: the quotes kept.
    (f"Request(authorization='{SECRET}')", f"Request(authorization='{REDACTED}')"),
    (f'authorization="Bearer {SECRET}"', f'authorization="Bearer {REDACTED}"'),
    # A Cookie header: every cookie (any may open a session), up to the end of its line.
    (f"Cookie: theme=dark; session={SECRET}\nHost: example.test",
     f"Cookie: {REDACTED}\nHost: example.test"),
    (f"Set-Cookie: sid={SECRET}; Path=/; HttpOnly", f"Set-Cookie: {REDACTED}"),
])
def test_a_credential_after_a_scheme_an_authorization_of_another_name_or_a_cookie_is_masked(
        text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


@pytest.mark.parametrize("text", [
    "Content-Type: application/json", "Idempotency-Key: 7f3a9c", "X-Request-Id: 42-abc",
    "step_one: done", "during the pass: nothing queued", "InvalidTokenError: signature expired",
    "send X-Authorization: Bearer <key>", "https://example.test:8443/a", "see mailto:ann@x.test",
])
def test_a_header_or_a_word_naming_no_secret_before_a_colon_is_left_whole(text):
    assert redact_text(text) == text


KEY = "Xy7+/Ab9cD0eF1gH2iJ3kL4mN5oP6qR7sT8uV9wX0yZ1aB2cD3eF4gH5iJ6kL7mN8oP9qR0sT1uV2wX3y+/A=="


@pytest.mark.parametrize(("text", "masked"), [
    # An Azure storage account's connection string: its key, base64 with "+", "/" and "="
    # padding, masked whole up to the ";" that ends it; the endpoint and names kept.
    (f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={KEY};"
     "EndpointSuffix=core.windows.net",
     f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={REDACTED};"
     "EndpointSuffix=core.windows.net"),
    (f"BlobServiceClient(account_url='https://acme.blob.core.windows.net', account_key='{KEY}')",
     "BlobServiceClient(account_url='https://acme.blob.core.windows.net', "
     f"account_key='{REDACTED}')"),
    (f"AccountKey: {KEY}", f"AccountKey: {REDACTED}"),
    # A shared access signature in a connection string: its signature masked.
    ("BlobEndpoint=https://acme.blob.core.windows.net/;SharedAccessSignature=sv=2021-06-08"
     f"&ss=b&sp=r&se=2025-01-01&sig={SECRET}%2B%3D",
     "BlobEndpoint=https://acme.blob.core.windows.net/;SharedAccessSignature="
     f"{REDACTED}&ss=b&sp=r&se=2025-01-01&sig={REDACTED}"),
])
def test_an_azure_connection_strings_key_and_signature_are_masked_whole(text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


def test_a_field_named_a_storage_accounts_key_is_masked_and_its_accounts_name_kept():
    assert redact({"AccountKey": KEY, "account_key": KEY, "AccountName": "acme"}) == {
        "AccountKey": REDACTED, "account_key": REDACTED, "AccountName": "acme"}


def test_a_service_bus_connection_strings_key_is_masked_whole():
    masked = redact_text(
        f"Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=send;SharedAccessKey={KEY}")

    assert KEY not in masked and "+/" not in masked
    assert masked.startswith("Endpoint=sb://acme.servicebus.windows.net/;")
    assert masked.endswith(f";SharedAccessKey={REDACTED}")
