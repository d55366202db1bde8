"""A signature that grants access (a pre-signed URL's, a webhook's), an Authorization header
under a key of another name, and a secret's key written in camelCase are masked in a text as
their kin are: the value goes, the name stays readable. A pre-signed URL opens its object to
whoever holds it until it expires, and a webhook's signature lets a forged delivery through
while its timestamp is fresh: an error text quoting either is stored, shown and chained."""

import json

import pytest

from audit.redaction import REDACTED, redact, redact_text

SECRET = "Zq8vLw3xKp"
OTHER = "Wd4nRt7sYb"


@pytest.mark.parametrize("text", [
    # Pre-signed URLs: the signature's parameter (and a session's token) masked, the rest kept.
    "GET https://b.s3.amazonaws.com/k.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    f"&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host"
    f"&X-Amz-Signature={SECRET} failed",
    f"https://b.s3.amazonaws.com/k?X-Amz-Security-Token={SECRET}&X-Amz-Signature={OTHER}",
    "https://acct.blob.core.windows.net/c/b.pdf?sv=2021-06-08&se=2025-01-01T00%3A00%3A00Z"
    f"&sr=b&sp=r&sig={SECRET}%2B{OTHER}%3D",
    "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256"
    f"&X-Goog-Date=20250101T000000Z&X-Goog-Expires=900&X-Goog-Signature={SECRET}",
    f"https://d111.cloudfront.net/i.jpg?Expires=1735689600&Signature={SECRET}~{OTHER}-_"
    "&Key-Pair-Id=K2JCJMDEHXQW5F",
    # A webhook's signature headers, every signature of a list of them (the value masked
    # whole, its algorithm's name with it).
    f"X-Hub-Signature: sha1={SECRET}",
    f"X-Hub-Signature-256: sha256={SECRET}\nX-GitHub-Event: push",
    f"X-Signature: {SECRET}",
    f"Stripe-Signature: t=1492774577,v1={SECRET},v0={OTHER}",
    f"X-Webhook-Signature: sha256={SECRET},sha256={OTHER}",
    f'{{"X-Hub-Signature-256": "sha256={SECRET}", "X-GitHub-Event": "push"}}',
    f"oauth_signature={SECRET}&oauth_version=1.0",
])
def test_a_signature_that_grants_access_is_masked_and_its_name_kept(text):
    masked = redact_text(text)

    assert SECRET not in masked and OTHER not in masked
    # Everything before the value whose signature goes stays: the URL, the header's name.
    name = text.split(SECRET)[0].rsplit("=" if "?" in text else ":", 1)[0]
    assert masked.startswith(name) and REDACTED in masked
    assert redact_text(masked) == masked


@pytest.mark.parametrize(("text", "masked"), [
    (f"https://b.s3.amazonaws.com/k?X-Amz-Expires=900&X-Amz-Signature={SECRET}&v=2",
     f"https://b.s3.amazonaws.com/k?X-Amz-Expires=900&X-Amz-Signature={REDACTED}&v=2"),
    (f"https://acct.blob.core.windows.net/c/b?sv=2021-06-08&sr=b&sp=r&sig={SECRET} expired",
     f"https://acct.blob.core.windows.net/c/b?sv=2021-06-08&sr=b&sp=r&sig={REDACTED} expired"),
    (f"Stripe-Signature: t=1492774577,v1={SECRET},v0={OTHER}\nHost: example.test",
     f"Stripe-Signature: {REDACTED}\nHost: example.test"),
    (f"X-Hub-Signature: sha1={SECRET}, retrying", f"X-Hub-Signature: {REDACTED}, retrying"),
    # Signatures listed with blanks after their commas: every one of them.
    (f"Stripe-Signature: t=1492774577, v1={SECRET}, v0={OTHER}\nHost: example.test",
     f"Stripe-Signature: {REDACTED}\nHost: example.test"),
    (f"Stripe-Signature: t=1492774577, v1={SECRET},  v0={OTHER} refused",
     f"Stripe-Signature: {REDACTED} refused"),
    (f"signature=sha256={SECRET}, sha256={OTHER}&n=1", f"signature={REDACTED}&n=1"),
    # A signature's word alone as a header's name (RFC 9421's Signature, a webhook's),
    # followed by its parameters as such a header writes them.
    (f"Signature: sig1=:{SECRET}+/{OTHER}==:, sig2=:{OTHER}:", f"Signature: {REDACTED}"),
    (f"Signature: t=1492774577,v1={SECRET}\nHost: example.test",
     f"Signature: {REDACTED}\nHost: example.test"),
    (f"signature: v1={SECRET}, retrying", f"signature: {REDACTED}, retrying"),
])
def test_only_the_signature_goes_and_what_follows_it_stays(text, masked):
    assert redact_text(text) == masked


@pytest.mark.parametrize("key", [
    "signature", "X-Hub-Signature", "X-Hub-Signature-256", "Stripe-Signature",
    "X-Amz-Signature", "sig", "webhookSignature", "auth_header",
])
def test_a_field_named_a_signature_or_an_authorization_header_is_masked(key):
    assert redact({key: SECRET, "n": 1}) == {key: REDACTED, "n": 1}
    assert json.loads(redact_text(json.dumps({key: SECRET, "n": 1}))) == {key: REDACTED, "n": 1}


@pytest.mark.parametrize("text", [
    "InvalidSignatureError: signature expired", "signature: expired", "signal=9",
    "Signature: missing", "invalid signature: expected sha256=abc, got none",
    "X-Amz-SignedHeaders=host;x-amz-date", "Key-Pair-Id=K2JCJMDEHXQW5F", "design=flat",
    "X-Amz-Expires=900&X-Amz-Date=20250101T000000Z",
])
def test_a_word_or_a_parameter_that_is_no_signature_is_left_whole(text):
    assert redact_text(text) == text


@pytest.mark.parametrize(("text", "masked"), [
    # A bare key naming an Authorization header is read as "Authorization:" is: its
    # scheme's word kept, a credential of parameters masked whole up to its line's end.
    (f'authorization_header=Digest username="x", response="{SECRET}"',
     f"authorization_header=Digest {REDACTED}"),
    (f'authorization_header: Digest username="x", response="{SECRET}"\nHost: example.test',
     f"authorization_header: Digest {REDACTED}\nHost: example.test"),
    (f'auth_header=Digest username="x", nonce="n", response="{SECRET}"',
     f"auth_header=Digest {REDACTED}"),
    (f"AuthorizationHeader=AWS4-HMAC-SHA256 Credential=AKID/x, Signature={SECRET}",
     f"AuthorizationHeader=AWS4-HMAC-SHA256 {REDACTED}"),
    (f"authorization_header=Bearer {SECRET} sent", f"authorization_header=Bearer {REDACTED} sent"),
    (f"auth_header: Custom {SECRET}", f"auth_header: {REDACTED}"),
    # Quoted, masked up to its closing quote, as any bare key's quoted value.
    (f"Request(auth_header='Digest response=\"{SECRET}\"', n=1)",
     f"Request(auth_header='{REDACTED}', n=1)"),
    # A value that is no credential after a scheme is masked all the same, up to a
    # separator; only what "Authorization:" keeps is kept under its own name.
    ("authorization_code=%2F" + SECRET + " sent", f"authorization_code={REDACTED} sent"),
    ("authorization_url=https://idp.example.test/authorize?x=1 sent",
     f"authorization_url={REDACTED} sent"),
    ("send X-Authorization: Bearer <key>", "send X-Authorization: Bearer <key>"),
])
def test_a_bare_key_naming_an_authorization_header_is_read_as_an_authorization_header(
        text, masked):
    assert redact_text(text) == masked
    assert redact_text(masked) == masked


@pytest.mark.parametrize("text", [
    # camelCase keys before ":" or "=", unquoted as a JavaScript object or a log writes
    # them, quoted as JSON does: the same keys as with "_" or "-".
    f"authKey: {SECRET}", f"authKey={SECRET}", f"apiKey={SECRET}", f"apiKey: {SECRET}",
    f"clientSecret: {SECRET}", f"clientSecret={SECRET}", f'"accessToken": "{SECRET}"',
    f"accessToken: {SECRET}", f"masterKey: {SECRET}", f"appKey: {SECRET}",
    f"clientCredentials: {SECRET}", f"subscriptionKey: {SECRET}", f"hubSignature: {SECRET}",
    f"{{authKey: '{SECRET}', region: 'eu'}}", f'{{clientCredentials: "{SECRET}"}}',
    # PascalCase ending in what names a secret.
    f"AuthKey: {SECRET}", f"ClientCredentials: {SECRET}", f"AccessKey: {SECRET}",
])
def test_a_secrets_key_written_in_camel_case_loses_its_value_before_a_colon_as_before_an_equals(
        text):
    masked = redact_text(text)

    assert masked == text.replace(SECRET, REDACTED)
    assert redact_text(masked) == masked


@pytest.mark.parametrize("text", [
    "InvalidTokenError: signature expired", "TokenExpired: at 12:00", "AuthKeyError: unknown",
    "sortKey: name", "keyName: main", "tokenizerName: bpe", "iPhone: charged",
    "Note: the key rotates", "Credentials: see the vault", "during the pass: nothing queued",
])
def test_a_camel_case_key_naming_no_secret_an_errors_class_and_prose_are_left_whole(text):
    assert redact_text(text) == text
