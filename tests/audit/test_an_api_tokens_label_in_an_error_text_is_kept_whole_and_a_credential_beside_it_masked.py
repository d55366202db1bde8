"""Text written exactly as an API token's label ("api-token:" in lower case at a word's start,
then a name's characters only) is kept whole by the redaction, in an error text as anywhere,
whatever the name looks like: "api-token:abc123" as "api-token:erp-bridge".

Why it is right: the label names a token, never carries one. A name is chosen by an admin,
held to lower-case letters, digits, '.', '_' and '-', unique, never reused (tokens are
revoked, not deleted), shown in the admin and in every record of what the token did; it
opens nothing. The secret is the token itself, "dwf_<prefix>_<random>", whose random part is
URL-safe base64 of 32 bytes: holding a capital (all but about one token in five billion),
it reads as no name, and written after the label's prefix it is masked. Masking the label
instead made every record of an event a token sent, and every error text quoting its
source, read "api-token:[redacted]": nobody could tell which system had sent it (the fault
fixed in ddf431e). A credential written in the forms
secrets travel in beside the prefix (a header, a pair: "api-token: ...", "Api-Token:...",
"api-token=...") is masked."""

import pytest

from audit.redaction import REDACTED, api_token_label, redact_text
from runs.machine.errors import PermanentError, classify

# The form api.tokens issues: "dwf_", twelve hex digits, "_", token_urlsafe(32).
ISSUED = "dwf_3f9a2c5b7d1e_Zq8vLw3xKpT0-rYb_4nHcM2sGdJeUoWfA9iQlV6kPzXy"


@pytest.mark.parametrize("text", [
    "api-token:abc123",
    "refused for api-token:abc123: workflow not in the token's scope",
    "invalid api-token:5f2b9c0e7d1a4b3c8e6f0a9d2c4b7e1f",
    f"event {api_token_label('erp.prod_2')}:evt-17 refused",
])
def test_text_written_exactly_as_a_tokens_label_is_kept_whole_whatever_its_name_looks_like(
        text):
    assert redact_text(text) == text


def test_a_label_quoted_in_a_steps_error_reaches_its_checkpoint_whole():
    classified = classify(PermanentError("the ledger refused api-token:abc123 (scope)"))

    assert classified.message == "PermanentError: the ledger refused api-token:abc123 (scope)"


@pytest.mark.parametrize(("text", "kept"), [
    (f"api-token:{ISSUED}", "api-token:"),
    (f"the receiver said: unknown api-token:{ISSUED}", "the receiver said: unknown api-token:"),
    ("api-token: abc123", "api-token: "),
    ("Api-Token:abc123", "Api-Token:"),
    ("api-token=abc123", "api-token="),
])
def test_a_token_itself_or_a_credential_in_a_header_or_a_pair_beside_the_prefix_is_masked(
        text, kept):
    masked = redact_text(text)

    assert masked == f"{kept}{REDACTED}"
    assert ISSUED not in masked and "abc123" not in masked
