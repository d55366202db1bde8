"""Keep credentials out of checkpoints, audit records and logs."""

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache

REDACTED = "[redacted]"
# What begins a sealed value: "enc:<key id>:<Fernet token>" in place of a value a tool or a
# step declares sensitive (runs.machine.sensitive seals and opens them). Told here, below
# runs, so that wherever audit records are shown they can show one as the mask
# (sealed_masked), which audit may not import runs to learn.
SEALED_PREFIX = "enc:"
# A key names a secret when one of its words does, never a part of a word: "passengers",
# "passport_country", "max_tokens" and "secretary" are business data a run's next step reads
# (an event's payload, a model's usage), and masked they broke the schema that took them.
# Words are split at "_", "-", spaces and camelCase ("accessToken", "X-Api-Key").
_KEY_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
# A signature grants what it was made for to whoever holds it: a pre-signed URL's
# (X-Amz-Signature, X-Goog-Signature, CloudFront's Signature, an Azure SAS's sig) opens its
# object, a webhook's (X-Hub-Signature, Stripe-Signature) lets a forged delivery through
# while its timestamp is fresh.
_SECRET_WORDS = frozenset({
    "pass", "pwd", "passwd", "password", "passphrase", "secret", "secrets", "token",
    "authorization", "cookie", "cookies", "credential", "credentials", "apikey", "privatekey",
    "signature", "signatures", "sig",
})
# A word of its own run together with what it qualifies: "accesstoken", "dbpassword".
_SECRET_ENDINGS = ("passwd", "password", "passphrase", "secret", "token", "apikey",
                   "privatekey", "credential", "credentials", "cookie", "authkey", "accesskey")
# A key is a secret when a word says what it opens: the headers and parameters APIs take
# one in (X-Auth-Key, Ocp-Apim-Subscription-Key, x-functions-key, DD-APPLICATION-KEY,
# X-Master-Key, access_key, an Azure storage account's AccountKey and account_key), and an
# Authorization header's ("auth_header"). Alone, or after another word ("idempotency_key",
# "sort_key", "public_key"), a key is a name.
_SECRET_PAIRS = frozenset({
    ("api", "key"), ("private", "key"), ("auth", "key"), ("access", "key"), ("account", "key"),
    ("subscription", "key"), ("functions", "key"), ("application", "key"), ("app", "key"),
    ("master", "key"), ("auth", "header")})
# How records and logs name an API token (api.models.ApiToken.actor_label, also an event's
# source): "api-token:<name>", a name of these characters (the token's validator). Read by
# the pattern below, it looks like a "token: value" pair; it is kept whole, written exactly
# so, and only so: a header quoted in an error text ("X-Api-Token: ...", "api-token: ...",
# "Api-Token:..."), or a value running on in other characters, is still masked. What is let
# through is text written exactly as a label: "api-token:" in lower case at a word's start,
# right after it only a name's characters, up to a space, ":", "~" or the end. Kept so in
# an error text too, whatever the name looks like ("api-token:abc123"): a name is an admin's
# choice, shown in the admin and in every record of what its token did, and opens nothing;
# the token itself reads as no name (its random part, URL-safe base64, holds a capital in
# all but about one token in five billion: api.tokens), so written after the prefix it is
# masked.
API_TOKEN_NAME = r"[a-z0-9][a-z0-9._-]*"
_API_TOKEN_PREFIX = "api-token:"


def api_token_label(name: str) -> str:
    """How audit records, logs and an event's source name the API token called `name`."""
    return f"{_API_TOKEN_PREFIX}{name}"


# The backslashes that may escape a quote: none, one in JSON held as a string by another JSON
# text, three when that text is itself held as a string, and so on (2**depth - 1), here up
# to a fourth level. Bounded: a value whose quote is escaped so is looked into at most once
# for each length a run of them may have, which keeps every scan linear.
_ESCAPES = r"\\{0,15}"


def _quoted_up_to(opened: str, escape: str) -> str:
    """A quoted text's characters up to the quote that opened it (the group `opened`), at
    any depth of JSON held as a string: `escape` is the group of the backslashes before
    that quote (r of them, none outside such a string). A quote preceded by a run of
    backslashes ends the text when the run, its blocks of 2r + 2 taken away (each an escaped
    backslash of the text), leaves exactly r; when it leaves 2r + 1 the quote is one of the
    text's own, escaped. A line's end ends it too: a text cut off (an error text keeps 500
    characters of a body) is masked to the end of its line."""
    run, end = f"(?P={escape})", f"(?P={opened})"
    # Characters that are neither a quote nor a backslash are taken a run at a time: most
    # of a text is made of them.
    return (rf"(?:[^\"'\\\n]++|(?!{end})(?:{run}{run}\\\\)*+"
            rf"(?:{run}\\{end}|(?={end})|\\*+[^\\\n]))*+")


# The schemes an Authorization header names before its credentials (IANA's registry and
# those APIs use): their word stays in a text quoting the header, where any other word may
# be the credential itself.
_AUTH_SCHEMES = (
    "basic", "bearer", "digest", "token", "apikey", "api-key", "aws", "aws4-hmac-sha256",
    "negotiate", "ntlm", "kerberos", "hoba", "mutual", "scram-sha-1", "scram-sha-256", "vapid",
    "oauth", "hawk", "dpop", "gnap", "privatetoken", "concealed", "signature", "hmac", "mac",
    "ssws", "googlelogin", "sharedkey", "sharedkeylite", "splunk", "bot", "key", "jwt")
# A credential: token68 (RFC 9110), or a list of parameters ("username=..., response=...",
# "Credential=..., Signature=..."), its secret part anywhere in it: masked whole, up to the
# end of the line, or, in a JSON text's string (its quotes escaped), of that string.
# A token68's "=" padding is followed by none: "YWJj==" is no parameter.
_AUTH_CREDENTIALS = (
    r"(?:[\w.-]+\s*=(?!=)(?:\s*\\\"(?:\\.|[^\"\\\r\n])*|[^\r\n]*)|[A-Za-z0-9._~+/=-]+)")

# An Authorization header's value: what is kept of it (a quote, a scheme's word), and the
# credential masked (the first alternative below tells which).
_AUTH_KEPT = (
    rf"(?:{_ESCAPES}[\"'])?(?:(?P<scheme>{'|'.join(_AUTH_SCHEMES)}"
    r"|(?-i:[A-Z](?:[a-z]+|[A-Z0-9]*)(?:-[A-Z](?:[a-z]+|[A-Z0-9]*))+))\s+)?+")
_AUTH_MASKED = (rf"(?(scheme){_AUTH_CREDENTIALS}"
                rf"|(?:(?>[a-z]+(?:-[a-z]+)*)[ \t]+{_AUTH_CREDENTIALS}|[A-Za-z0-9._~+/=-]+))")

# An Authorization scheme's word before a credential, where a header of another name (or a
# secret-named key) holds one ("X-Auth-Token: Bearer ..."): the word kept, the credential
# masked. A word alone is no scheme: it may be the secret itself.
_SCHEME_BEFORE_CREDENTIAL = rf"(?:{'|'.join(_AUTH_SCHEMES)})[ \t]+(?=[^\s&,;\"'])"
# A Cookie header's cookies, every one of which may open a session.
_COOKIES = r"[^\s&,;\"']+(?:;[ \t]*[^\s&,;\"']+)*+"

# Every text is scanned at each of its characters: a lookahead for the first characters an
# alternative can begin with ("(?=[ab])") lets almost every position fail at one test.
_SECRETS = (
    # An Authorization header's credentials, the scheme word kept: a known scheme, or a
    # name written as header names are ("Key-Id", "Client-ID"), which no random credential
    # is, taken for good (a placeholder after it, "Bearer <key>" in a hint, is no
    # credential). Any other word of letters there may be the credential or an unknown
    # scheme: it is masked with the credential that may follow it on its line,
    # "abcdefghijklmnop sent" whole (a word of prose lost costs less than a credential kept).
    # Quoted too (a repr's "authorization='...'"), the quote kept.
    rf"(?=[ab])(?:(?P<auth>authorization\s*[=:]\s*{_AUTH_KEPT}){_AUTH_MASKED}"
    r"|(bearer\s+|basic\s+)[A-Za-z0-9._~+/=-]+)"
    r"|\bsk-[A-Za-z0-9_-]{8,}"
    # A quoted key (a JSON body a remote answered, a dict's repr, a config line) that names
    # a secret as a field of a value does (_names_a_secret, asked by _masked_in), ":" or
    # "=", and its value, of which only what it holds is masked (_masked): a quoted text,
    # its quotes kept; a list or an object, masked whole as redact masks such a field, up
    # to where it ends (_masked_in); or a bare value, a JSON literal (a number, true) or
    # YAML's words ('"password": correct horse battery staple'), up to what ends a value
    # in JSON or YAML (_bare_value_end): a comma, a closing bracket, the end of its line.
    # Prose after it goes too ('field "password": check the length'): a message quoting a
    # value ('"password": hunter is too short') reads as prose does, so that whatever kept
    # "check the length" would keep "is too short", and a password of words too. In JSON
    # held as a string by another JSON text, at any depth, the quotes of the key and of its
    # value are escaped (_ESCAPES). The key is taken whole (possessive), never given back a
    # character at a time: no shorter key is followed by a quote.
    rf"|(?=[\"'])(?P<pair>(?P<quote>[\"'])(?P<key>[\w .-]{{1,64}}+){_ESCAPES}(?P=quote)\s*[=:]\s*"
    rf"(?:b?(?P<opened>(?P<escape>{_ESCAPES})[\"'])(?P<text>{_quoted_up_to('opened', 'escape')})"
    r"(?P=opened)?"
    r"|(?=[\[{])(?P<container>)"
    r"|(?=[^\s&,;\"'{}\[\]])(?P<literal>)))"
    # One of these words, ":" or "=", and a value: a quoted text, masked up to its closing
    # quote (kept), a scheme's word and the credential after it (the word kept), a
    # Cookie header's cookies, or a bare value up to a separator, but not the start of a
    # JSON text (".../oauth/token: {"error": ...}": an endpoint's path and the answer it
    # gave).
    r"|(?=[acpst])((?:passw(?:or)?d|passphrase|pwd|secret|token|(?:api|private)[-_]?key"
    r"|(?P<cookie>(?:set-)?cookie))\s*[=:]\s*"
    rf"(?:b?(?P<word_opened>(?P<word_escape>{_ESCAPES})[\"'])|{_SCHEME_BEFORE_CREDENTIAL})?)"
    rf"(?(word_opened){_quoted_up_to('word_opened', 'word_escape')}"
    rf"|(?(cookie){_COOKIES}|(?![\[{{][\"'\s])[^\s&,;\"']+))"
    # A bare key before "=" (a DSN's "db_pass=...", a query's "client_credentials=...", a
    # repr's "db_pass='...'") that names a secret as a field's name does (_names_a_secret,
    # asked by _masked_in), and its value: a quoted text, masked up to its closing quote
    # (kept), or a bare one up to a separator (_BARE_VALUE, read only once the key is known
    # to name a secret: a key naming none is looked into from its next character on, and a
    # value read with it would be read again from there, "a=a=a=..." in quadratic time).
    # Before ":" too, a header's name ("X-Auth-Key: ...") or a config's key ("auth_key:
    # ..."), not a word of prose nor an error's class (_names_a_field_before_a_colon), nor
    # a URL's scheme. A scheme's word before the credential is kept, as in an Authorization
    # header, which is read as the first alternative reads it under any name that says so
    # ("X-Authorization", "authorization_header": _bare_masked). The key is taken
    # whole, as a quoted one is: no shorter key is followed by "=" or ":", and each word
    # of a text would otherwise be given back a character at a time.
    r"|\b(?=[a-z])(?!authorization\b)(?P<bare>[\w.-]{1,64}+(?:\s*=\s*|:(?!//)[ \t]*)"
    rf"(?:b?(?P<bare_opened>(?P<bare_escape>{_ESCAPES})[\"'])|{_SCHEME_BEFORE_CREDENTIAL})?)"
    rf"(?(bare_opened){_quoted_up_to('bare_opened', 'bare_escape')}|(?=[^\s&,;\"']))"
    # A URL's userinfo (scheme://user:password@host): the password, or a token standing
    # alone as the user, up to the last @ of the authority (a password may hold an @).
    r"|(\b[a-z][a-z0-9+.-]*://(?:[^\s/?#@:]*:)?)[^\s/?#]+(?=@)"
    # An approval link's token in a path (approvals.urls): it decides a request.
    r"|(/approvals/\d+/link/)[^/\s\"'?#]+"
    # PostgreSQL's detail of a row a constraint refused quotes every value of it (a webhook
    # subscriber's signing secret among them): the values go, the words stay.
    r"|(Failing row contains )\([^\n]*\)"
)
_SECRET_IN_TEXT = re.compile(f"(?i){_SECRETS}")
# The same beside a token's label, matched first and kept: asked only of a text that holds
# the label's prefix, so that the texts every record passes pay nothing for it. Not after
# a word, a header name's "X-" or a base64 text, nor followed by more of one (the name is
# matched whole, never cut to leave a secret's rest unmasked).
_SECRET_BESIDE_LABELS = re.compile(
    rf"(?i)(?P<label>(?<![\w.+/=-])(?-i:{_API_TOKEN_PREFIX}{API_TOKEN_NAME})(?![\w.+/=-]))"
    f"|{_SECRETS}")
# Each kind of secret above holds one of these characters (a space, "=", ":", "/" or "-").
# Most texts a checkpoint records hold none (keys, digests, statuses): a scan for them is
# a twentieth of the cost of the alternatives above, which every record's texts pass.
_SIGN_OF_SECRET = re.compile(r"[\s=:/-]")


def redact_text(text: str) -> str:
    """The text with bearer tokens, Authorization credentials, API keys, the values of
    secret-named keys and headers (key=value, "key": "value" however quoted, X-Auth-Key:
    value), cookies, URLs' credentials and the declared sensitive values opened for the
    work at hand (values_masked) masked."""
    text = _without_opened(text)
    if _SIGN_OF_SECRET.search(text) is None:
        return text
    if _API_TOKEN_PREFIX in text:
        return _masked_in(text, _SECRET_BESIDE_LABELS)
    return _masked_in(text, _SECRET_IN_TEXT)


# A bare key's name, read from its match: a group of the name alone would cost each word
# of every text a capture (2% of a prose text's scan).
_NAME = re.compile(r"[\w.-]*")
_AUTHORIZATION, _AUTH_HEADER = "authorization", ("auth", "header")
# What parts a bare key from its value.
_SEPARATOR = re.compile(r"\s*=\s*|:[ \t]*")
# An Authorization header's value after a bare key that names one, read as the first
# alternative reads it after "Authorization:".
_AUTHORIZATION_VALUE = re.compile(rf"(?i)(?P<auth>{_AUTH_KEPT}){_AUTH_MASKED}")


def _where_to_look_on(match: re.Match) -> int | None:
    """Where to look on from when `match` is not masked as it is found: a key that names
    no secret, whose value, and the key itself, are looked into from its next character on
    as any text is (a note may quote a pair, a URL its password). None when it is a secret
    to mask."""
    if (key := match["key"]) is not None:
        return None if _names_a_secret(key) else match.start() + 1
    if (bare := match["bare"]) is None:
        return None
    name = _NAME.match(bare)[0]
    if bare[len(name)] == ":" and not (_names_a_field_before_a_colon(name)
                                        or _names_a_signature_before_its_parameters(match)):
        return match.start() + 1
    if not _names_a_secret(name):
        return match.start() + 1
    return None


def _names_a_field_before_a_colon(name: str) -> bool:
    """Whether `name`, before ":", is a header's name or a config's key rather than a word
    of prose ("during the pass: nothing queued") or an error's class ("InvalidTokenError:
    ..."): it holds "-" or "_", or it is written in camelCase ("authKey: ..."). An error's
    class is written in PascalCase, as a key may be ("AuthKey: ..."): one of several words
    is taken for a key when it ends in what names a secret, as "InvalidToken: ..." always
    was by the word alternative, since a class names what went wrong last
    ("InvalidTokenError", "TokenExpired")."""
    if "-" in name or "_" in name:
        return True
    if name.islower():
        return False
    if name[0].islower():
        return True
    words = _lower_words(name)
    return len(words) > 1 and (_names_a_secret(words[-1]) or tuple(words[-2:]) in _SECRET_PAIRS)


# A signature header's value as it is written: a parameter first ("sig1=:...:", "t=...").
_PARAMETER = re.compile(r"[\w.-]{1,64}+=")


def _names_a_signature_before_its_parameters(match: re.Match) -> bool:
    """Whether a word naming a signature alone before ":" ("Signature", RFC 9421's header,
    a webhook's) is a header's name: where a parameter follows, as a signature header's
    value is written ("Signature: sig1=:...:", "Signature: t=...,v1=..."). Followed by
    anything else it is a word of prose ("signature: expired"), kept with what follows."""
    words = _lower_words(_NAME.match(match["bare"])[0])
    return (len(words) == 1 and words[0] in _SIGNATURE_WORDS and match["bare_opened"] is None
            and _PARAMETER.match(match.string, match.end()) is not None)


def _bare_masked(match: re.Match) -> tuple[int, str] | None:
    """Where the unquoted value after a bare key naming a secret ends, and what `match` and
    that value are masked as; None when the key is an Authorization header's name and no
    credential follows (a placeholder, "X-Authorization: Bearer <key>"), which is kept as
    after "Authorization:". Read only once the key is known to name a secret (the value is
    masked and never read again): a key naming none is looked into from its next
    character on, and a value read with it would be read again from there, "a=a=a=..." in
    quadratic time."""
    text, start = match.string, match.start()
    name = _NAME.match(match["bare"])[0]
    words = _lower_words(name)
    if _AUTHORIZATION in words or _AUTH_HEADER in itertools.pairwise(words):
        # An Authorization header under another name ("X-Authorization",
        # "HTTP_AUTHORIZATION", "authorization_header", "auth_header"): read as one, its
        # scheme's word kept and a credential of parameters ('Digest username="x",
        # response="..."') masked whole, never cut at its first separator; at least up to
        # one, as any bare value ("authorization_url=https://...").
        value = _SEPARATOR.match(text, start + len(name)).end()
        if (auth := _AUTHORIZATION_VALUE.match(text, value)) is not None:
            end = max(auth.end(), _BARE_VALUE.match(text, value).end())
            return end, f"{text[start:value]}{auth['auth']}{REDACTED}"
        if words[-1] == _AUTHORIZATION:
            # What "Authorization:" keeps, the header under another name keeps: a
            # placeholder, "X-Authorization: Bearer <key>". Any other key's value is
            # masked as a bare value is ("authorization_code=%2F...").
            return None
    # A signature header's value may list several, comma-separated ("t=...,v1=...,v0=..."
    # in Stripe-Signature, one per secret in our X-Webhook-Signature).
    value = _SIGNATURES if _SIGNATURE_WORDS.intersection(words) else _BARE_VALUE
    return value.match(text, match.end()).end(), f"{match[0]}{REDACTED}"


def _masked_in(text: str, secrets: re.Pattern) -> str:
    """`text` with what `secrets` finds masked: a search at a time rather than a sub, since
    whether a quoted key names a secret is asked of the key found, and when it does not,
    the text after the key is still to be looked into."""
    parts = []
    kept_to = looked_from = 0
    while (match := secrets.search(text, looked_from)) is not None:
        if (look_on_from := _where_to_look_on(match)) is not None:
            looked_from = look_on_from
            continue
        end = match.end()
        if match["container"] is not None:
            # A key whose closing quote is escaped is in a JSON text held as a string by
            # another (or deeper): its list or object is written with quotes escaped so too.
            escape = len(_BACKSLASHES.match(text, match.end("key"))[0])
            end = _container_end(text, end, escape=escape)
            masked = f"{match[0]}{REDACTED}"
        elif match["literal"] is not None:
            end = _bare_value_end(text, end, key_quote=text[match.end("key")])
            masked = f"{match[0]}{REDACTED}"
        elif match["bare"] is not None and match["bare_opened"] is None:
            if (bare := _bare_masked(match)) is None:
                looked_from = match.start() + 1
                continue
            end, masked = bare
        else:
            masked = _masked(match)
        parts += (text[kept_to:match.start()], masked)
        kept_to = looked_from = end
    parts.append(text[kept_to:])
    return "".join(parts)


# What decides where a list or an object in a JSON text (or a dict's repr) ends: a quoted
# text, whose brackets count for nothing, a bracket, and the rest.
_CONTAINER_PARTS = re.compile(
    r"\"(?:[^\"\\]|\\.)*\"?|'(?:[^'\\]|\\.)*'?|[\[{]|[\]}]|[^\"'\[\]{}]+")
_BACKSLASHES = re.compile(r"\\*")
# A bare key's value unquoted: up to a separator; a signature's, up to one that is not a
# comma before more of it, or a comma and blanks before another parameter ("t=1, v1=...,
# v0=...", RFC 9421's "sig1=:...:, sig2=:...:"): a word of prose after them is kept
# ("sha1=..., retrying").
_BARE_VALUE = re.compile(r"[^\s&,;\"']*")
_SIGNATURES = re.compile(
    r"[^\s&,;\"']*(?:,(?:[^\s&,;\"']+|[ \t]++[\w.-]{1,64}+=[^\s&,;\"']*))*+")
_SIGNATURE_WORDS = frozenset({"signature", "signatures", "sig"})
# What ends a bare value after a quoted key: a separator of JSON or YAML, or a line's end;
# and, in a JSON text held as a string, the escape of a line's end or of a quote, or a
# quote, which ends the string that holds it. A run of backslashes is matched from its
# start only: at each of its characters it would be read again.
_ESCAPED_BARE_VALUE_ENDS = re.compile(r'[\r\n,}\]"]|(?<!\\)\\++[nr"]')
# A key quoted unescaped ('password' in "{'password': x}") may be held by a string quoted
# with the other kind ({"msg": "'password': x"}, a repr's {'msg': '"password": x'}): that
# quote ends the string, and so the value, where what ends a value follows it. Anywhere
# else a password may hold one ('"password": pass"word'): it is masked with the rest.
_BARE_VALUE_ENDS = {
    key_quote: re.compile(rf"[\r\n,}}\]]|{other}(?=[ \t]*(?:[\r\n,}}\]]|$))")
    for key_quote, other in (('"', "'"), ("'", '"'))}


def _bare_value_end(text: str, start: int, *, key_quote: str) -> int:
    """Where a bare value after a quoted key, from `start`, ends (`key_quote`: the
    character after the key, a backslash when its quote was escaped, in a JSON text held
    as a string): at what ends a value, the blanks before it left out. Read only once the
    key is known to name a secret (its value is masked and never read again): a key naming
    none is looked into from its next character on, and a value read with it would be read
    again from there, '"k": a "k": a ...' in quadratic time."""
    ends = _BARE_VALUE_ENDS.get(key_quote, _ESCAPED_BARE_VALUE_ENDS).search(text, start)
    stop = len(text) if ends is None else ends.start()
    return start + len(text[start:stop].rstrip())


@lru_cache(maxsize=16)
def _container_parts(escape: int) -> re.Pattern:
    """The parts of a list or an object in a JSON text held as a string by another JSON
    text (or deeper), its quotes written with `escape` backslashes before them (0: not so
    held, _CONTAINER_PARTS) and each of its characters as the strings holding it write it:
    a text, whose quotes end it as _quoted_up_to tells; a bracket; the end (`end`), a
    quote escaped fewer times than its own, which ends a string that holds it, and so the
    list or object if it has not ended, or a line's end, which no such string holds (it was
    cut off); and the rest. Each part begins where a run of backslashes does, so that no
    run is read twice."""
    if not escape:
        return _CONTAINER_PARTS
    quote, block, own_quote = (
        rf'\\{{{escape}}}"', rf"\\{{{2 * escape + 2}}}", rf'\\{{{2 * escape + 1}}}"')
    text = (rf'{quote}(?:[^"\\\n]++|(?:{block})*+{own_quote}|(?:{block})++(?={quote})'
            rf'|\\++(?=[^"\\\n]))*+(?:{quote})?')
    return re.compile(rf'{text}|[\[{{]|[\]}}]|(?P<end>\\{{0,{escape - 1}}}"|\n)'
                      rf'|(?:[^"\\\[\]{{}}\n]|(?!\\{{0,{escape}}}")\\++[^\\\n]?)+')


def _container_end(text: str, start: int, *, escape: int = 0) -> int:
    """Where the list or object beginning at `start` ends: the end of the text when it was
    cut off (what was left of it is masked), or, held as a string by another JSON text
    (`escape`: the backslashes before its quotes), the end of the string that holds it or
    of its line. Each character is read once: the text read is masked and never looked into
    again."""
    depth = 0
    for part in _container_parts(escape).finditer(text, start):
        if part.lastgroup == "end":
            return part.start()
        if part[0] in ("[", "{"):
            depth += 1
        elif part[0] in ("]", "}"):
            depth -= 1
            if depth == 0:
                return part.end()
    return len(text)


def _masked(match: re.Match) -> str:
    if match.lastgroup == "label":
        return match["label"]
    if match.lastgroup == "pair":
        text, (start, end) = match.string, match.span("text")
        return f"{text[match.start():start]}{REDACTED}{text[end:match.end()]}"
    prefix = next((g for g in match.groups() if g), "")
    return f"{prefix}{REDACTED}"


@lru_cache(maxsize=4096)
def _lower_words(key: str) -> tuple[str, ...]:
    return tuple(word.lower() for word in _KEY_WORDS.findall(key))


@lru_cache(maxsize=4096)
def _names_a_secret(key: str) -> bool:
    # The same few keys (status, key, result...) are asked about at every record.
    words = _lower_words(key)
    return (any(word in _SECRET_WORDS or word.endswith(_SECRET_ENDINGS) for word in words)
            or any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words)))


# The declared sensitive values opened for the work at hand (a worker advancing a run, a
# person's lookup or undo), as text: workflow code that fails may quote one in its error,
# and an error text is stored, audited and logged. None outside such work.
_opened_texts: ContextVar[set[str] | None] = ContextVar("opened_sensitive_texts", default=None)
# Shorter values are masked nowhere: "7" or "EUR" would blank unrelated words of a message.
SHORTEST_MASKED = 4


@contextmanager
def values_masked() -> Iterator[None]:
    """Within the block, every sensitive value opened is masked in error texts."""
    token = _opened_texts.set(set())
    try:
        yield
    finally:
        _opened_texts.reset(token)


def remember_opened(value) -> None:
    """Note a value just opened (sensitive.decrypt) for masking within values_masked."""
    texts = _opened_texts.get()
    if texts is None:
        return
    if isinstance(value, dict):
        for item in value.values():
            remember_opened(item)
    elif isinstance(value, list):
        for item in value:
            remember_opened(item)
    elif isinstance(value, str | int | float) and not isinstance(value, bool) \
            and len(str(value)) >= SHORTEST_MASKED:
        texts.add(str(value))


def _without_opened(text: str) -> str:
    opened = _opened_texts.get()
    if not opened:
        return text
    # Between the masks already there only: a value that is part of the mask ("dact") would
    # otherwise mask the mask, and a text redacted twice (a result measured sealed, then
    # kept) would differ from one redacted once.
    return REDACTED.join(_masked_opened(part, opened) for part in text.split(REDACTED))


def _masked_opened(text: str, opened: set[str]) -> str:
    # The longest first: a value that holds another is masked whole.
    for opened_text in sorted(opened, key=len, reverse=True):
        text = text.replace(opened_text, REDACTED)
    return text


def is_sealed(value) -> bool:
    """Whether `value` is a sealed value (SEALED_PREFIX)."""
    return isinstance(value, str) and value.startswith(SEALED_PREFIX)


def each_sealed(value, replaced):
    """A copy of `value` with every sealed value in it, at any depth of dicts and lists,
    replaced by `replaced(it)`: the walk of a key's retirement (runs.operator.field_keys)
    and of showing (sealed_masked)."""
    if is_sealed(value):
        return replaced(value)
    if isinstance(value, dict):
        return {k: each_sealed(v, replaced) for k, v in value.items()}
    if isinstance(value, list):
        return [each_sealed(v, replaced) for v in value]
    return value


def sealed_masked(value):
    """A copy of a JSON-like value with every sealed value in it, at any depth, as the mask
    (REDACTED): how a person is shown one, wherever it is kept (a tool call's arguments or
    result, an audit record's data, before and after). Its ciphertext tells a person
    nothing, and the key that sealed it still opens it wherever it is copied. Only for
    showing: what is stored and hashed keeps it as written."""
    return each_sealed(value, lambda _: REDACTED)


def mask_held_at(value, where: str = "") -> str | None:
    """Where in a JSON-like value a string is the mask itself (REDACTED), as a path such as
    `iban` or `lines[0].iban` ("" for the value as a whole); None when no value is. A value
    that is only the mask was read where something was masked: it stands for a value, and
    is none."""
    if value == REDACTED:
        return where
    if isinstance(value, dict):
        items = ((f"{where}.{key}" if where else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    return next((found for path, item in items
                 if (found := mask_held_at(item, path)) is not None), None)


def redact(value, *, keep=None):
    """A copy of a JSON-like value with secret-looking keys and strings masked. `keep`: a
    predicate of the values left exactly as they are (sealed ones, whose ciphertext is no
    secret and would no longer open with a part of it masked)."""
    if keep is not None and keep(value):
        return value
    # Text first: most values are text, and text is neither an object nor a list.
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and _names_a_secret(k)
                and not (keep is not None and keep(v)) else redact(v, keep=keep))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, keep=keep) for v in value]
    return value


# The texts from outside that a run's records of an effect carry, by the names they carry
# them under, in their data and in their states (the intent and outcome of an attempt,
# runs.machine.transitions.attempts.intent_of; the state after an outcome or an undo): the
# reference a remote system answered, an undo's too, and the line a step's description wrote
# from its input and earlier results. Any of them may hold a credential: the row keeps them
# whole, a record never does.
OUTSIDE_TEXTS = frozenset({"remote_ref", "compensation_ref", "will_do"})


def outside_texts_masked(fields: dict) -> dict:
    """`fields` (a record's data or one of its states) with its texts from outside masked
    (redact_text), the rest as it is: keys and digests in hex, a count, an ISO time, a
    status, all the runtime's own (masking them could only cut out a sensitive value that
    happened to match a piece of a key or a time, and spoil the evidence)."""
    if OUTSIDE_TEXTS.isdisjoint(fields):  # most states: a status or two
        return fields
    # An empty text (a reference no remote system gave) has nothing to mask.
    return {name: redact_text(value) if name in OUTSIDE_TEXTS and value and isinstance(value, str)
            else value for name, value in fields.items()}


def shown_arguments(tool, arguments):
    """A tool call's arguments as people and audit records see them: the fields `tool` (a
    ToolSpec, or None) declares sensitive and anything that looks like a credential
    masked."""
    if isinstance(arguments, dict) and tool is not None:
        arguments = {k: (REDACTED if k in tool.redact else v) for k, v in arguments.items()}
    elif tool is not None and tool.redact and arguments is not None:
        # Text the model sent that is not an object (kept as evidence of invalid
        # arguments): a declared field may be anywhere in it.
        return REDACTED
    return redact(arguments)
