"""Text PostgreSQL can store: its text and jsonb types refuse NUL characters, and text that
is not Unicode (a lone surrogate, which is how Python hands over bytes that were not UTF-8)
fails to encode. Every entry point checks what it is given with this one rule, before
anything is written, and names the problem instead of failing in the database."""

import argparse
import json
import math
import re
import sys
import unicodedata

from django.core.management.base import CommandError

from audit.quoting import quoted

NUL = "\x00"
NUL_PROBLEM = "NUL characters cannot be stored"
SURROGATE_PROBLEM = "not valid Unicode text (a lone surrogate)"
# The blanks a business key (the start's rule) and a webhook secret (secret_problem) may not
# begin or end with: what Python's str.strip() takes away, each named for a pattern the API's
# document says it with (a regular expression's \s is another set: \ufeff in it, \x85 and
# \x1c-\x1f not).
BLANKS = r"\u0009-\u000d\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None if it can."""
    if NUL in text:
        return NUL_PROBLEM
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE_PROBLEM
    return None


# What a person writes for the record (a reason, a comment, evidence) is kept in the audit
# chain and shown on pages, in notifications and to a second person: every entry point (the
# console, the API, the CLI) holds it to this one length, which the API's schema says too.
PERSON_TEXT_MAX = 2000


# Bidirectional overrides and isolates make text read as other text (on a page, in a mail,
# to the second person of four eyes); other invisible format characters (a zero-width
# joiner in an emoji) stay allowed.
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unstorable_texts(value, loc: list) -> list[dict]:
    """Field errors ({loc, msg, type}) for the strings the database cannot store (NUL
    characters, lone surrogates: text_problem), in keys or values anywhere in `value`, each
    named where it is from `loc`: what every door that takes JSON from outside names (the
    API's bodies, the command line's options, a start's strict reading of its input)."""
    errors: list[dict] = []
    if isinstance(value, dict):
        for key, item in value.items():
            errors += _bad_text(key, [*loc, key]) + unstorable_texts(item, [*loc, key])
    elif isinstance(value, list):
        for i, item in enumerate(value):
            errors += unstorable_texts(item, [*loc, i])
    elif isinstance(value, str):
        errors += _bad_text(value, loc)
    return errors


def _bad_text(text, loc: list) -> list[dict]:
    problem = text_problem(text) if isinstance(text, str) else None
    if problem is None:
        return []
    kind = "string_nul" if problem == NUL_PROBLEM else "string_unicode"
    return [{"loc": loc, "msg": problem, "type": kind}]


def person_text_problem(text: str) -> str | None:
    """Why a person's `text` (a reason, a comment, evidence) cannot be kept, or None. Line
    breaks and tabs are text; other control characters (an escape sequence that recolours a
    terminal showing the record) and bidirectional controls are not."""
    if len(text) > PERSON_TEXT_MAX:
        return f"{len(text):,} characters, at most {PERSON_TEXT_MAX:,}"
    if (problem := text_problem(text)) is not None:
        return problem
    for c in text:
        if c in BIDI_CONTROLS or (unicodedata.category(c) == "Cc" and c not in "\t\n\r"):
            # Read after "the reason is": a phrase, not a clause.
            return (f"text with the control character U+{ord(c):04X}, where only line "
                    "breaks and tabs may be")
    return None


# Every code point of Unicode's categories Cc (C0 and C1 controls), Cf (format characters:
# bidirectional controls, zero-width ones, tags), Zl and Zp (line and paragraph separators),
# first and last of each run, in the Unicode of this Python (14.0 in 3.11). The one list of
# them: has_control_characters reads it, and the API document's patterns are written from it.
# Written out, as unicodedata cannot list a category without a walk through all 1.1M code
# points, which every process importing this would pay; a test holds it to unicodedata, so a
# Python with a newer Unicode (which adds format characters) fails until it is brought in line.
CONTROL_CHARACTER_RANGES = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)


def character_class(ranges) -> str:
    """The inside of a regular expression's character class (`[...]`) holding `ranges`, each
    (first, last) code point: \\uXXXX, and above U+FFFF \\UXXXXXXXX, which Python's re and
    the Rust regex crate (pydantic's) read alike. ECMA-262, a JSON schema's dialect, reads
    the first and not the second."""
    def one(code: int) -> str:
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
    return "".join(one(first) if first == last else f"{one(first)}-{one(last)}"
                   for first, last in ranges)


CONTROL_CHARACTER = re.compile(f"[{character_class(CONTROL_CHARACTER_RANGES)}]")


def has_control_characters(text: str) -> bool:
    """Whether `text` holds a control character (CONTROL_CHARACTER_RANGES): a line break
    (U+2028 and U+2029 too), NUL or another C0/C1 control, or an invisible format character
    (a bidirectional override makes text read as other text). For what names a thing in mail
    subjects, log lines and one-line displays (a business key, a remote reference), where one
    would forge a line."""
    return CONTROL_CHARACTER.search(text) is not None


def identifier_problem(text: str) -> str | None:
    """Why `text` cannot name one thing a sender sends (an event's id, or the correlation key
    of the wait it is for) or None: blank (only spaces: every event sent with its id left
    blank would be one event, the next ones answered "duplicate" and dropped), or holding a
    control character (has_control_characters), which would forge a line of the log, or
    read as another id or key on the run's page and in its records, where both are shown."""
    if not text.strip():
        return "blank (only spaces)"
    if has_control_characters(text):
        return "contains control characters"
    return None


def named_text_problem(text: str, *, one_line: bool) -> str | None:
    """Why `text` given for a field is refused before anything is looked up, or None: what
    the database cannot store, and where it names one thing on one line (a step, a tool
    call, a remote reference), any control character (has_control_characters)."""
    if (problem := text_problem(text)) is not None:
        return problem
    if one_line and has_control_characters(text):
        return "control characters (a line break, NUL, a tab, ...) cannot be part of it"
    return None


def value_problem(value) -> str | None:
    """Why a value a step or tool returned cannot be stored as JSON in a row, or digested as
    the record of its attempt digests it (attempts.result_digest: JSON with its keys sorted),
    naming where in it (`$.lines[2].text`), or None if it can. Walked without recursion, so
    a value nested deeper than Python's stack gets an answer too."""
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return str(exc) or type(exc).__name__
    pending = [("$", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            problem = text_problem(str.__str__(item))
            if problem:
                return f"{problem} (at {path})"
        elif isinstance(item, float) and not math.isfinite(item):
            # json.dumps writes NaN and Infinity, which JSON has not and jsonb refuses.
            return f"{item} is not a finite number (at {path})"
        elif isinstance(item, dict):
            try:
                # As json.dumps(sort_keys=True) orders them: keys of types that do not
                # compare ({1: "a", "b": 2}) have no order, so no digest.
                sorted(item.items())
            except TypeError:
                kinds = sorted({type(key).__name__ for key in item})
                return (f"keys of types that cannot be put in order ({', '.join(kinds)}) "
                        f"(the keys of {path})")
            for key, inner in item.items():
                # As JSON writes the key (1 as "1", None as "null"), never by a __str__.
                name = str.__str__(key) if isinstance(key, str) else json.dumps(key)
                problem = text_problem(name)
                if problem:
                    return f"{problem} (a key of {path})"
                pending.append((f"{path}.{name}", inner))
        elif isinstance(item, list | tuple):
            pending.extend((f"{path}[{index}]", inner) for index, inner in enumerate(item))
    return None


def printable(text: str) -> str:
    """Text for a message a person reads (an error from a remote system), with what the
    database cannot store written out visibly (a NUL as \\x00) instead of failing the write
    that records it."""
    if text_problem(text) is None:
        return text
    return text.replace(NUL, "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def written_visibly(text: str, *, keep: str = "", form: str = "\\u{:04x}") -> str:
    """`text` with each character that changes how a text reads without showing itself (a
    control character, CONTROL_CHARACTER_RANGES: a terminal's escape, a line break, the bidi
    overrides that make "0001 RUE" read as "EUR 1000"), but those in `keep`, written as its
    code in `form`: what a person reads (an approval's data, a schedule's error) is the text
    as it is, not as it was made to look."""
    return CONTROL_CHARACTER.sub(
        lambda found: found[0] if found[0] in keep else form.format(ord(found[0])), text)


def whole_number(text: str, *, digits: int = 18) -> int | None:
    """The non-negative whole number `text` writes in ASCII digits, at most `digits` of them
    (18: any id fits PostgreSQL's bigint), or None. The one reading of a number given from
    outside (a link, a form, a variable): str.isdigit() also passes "²", which
    int() refuses, and "٣", which int() reads as 3."""
    if not text or len(text) > digits or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def whole_number_argument(text: str) -> int:
    """A command's whole-number option (an argparse type), in ASCII digits as whole_number
    reads them, where type=int reads "٣" as 3. A sign and any length (up to what Python
    converts) pass, for the command's range check to name the range."""
    unsigned = text.removeprefix("-")
    if len(unsigned) > MOST_DIGITS:
        raise argparse.ArgumentTypeError(f"has more than {MOST_DIGITS} digits")
    number = whole_number(unsigned, digits=len(unsigned))
    if number is None:
        raise argparse.ArgumentTypeError(
            f"must be a whole number written in digits 0-9, not {text[:40]!r}")
    return -number if text.startswith("-") else number


# A number as a command's option may write one: ASCII digits, a sign, a fraction, an
# exponent, or the words of NaN and infinity, which its range check then refuses by name.
NUMBER_WRITTEN = re.compile(
    r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|infinity|nan)",
    re.IGNORECASE)


def number_argument(text: str) -> float:
    """A command's option that may be a fraction (an argparse type): in ASCII digits, as
    whole_number_argument reads a whole one, where type=float reads "١٠", "1_0" and " 10 " as
    10. Any size passes, for the command's range check (number_in_range) to name the range."""
    if len(text) > MOST_DIGITS or NUMBER_WRITTEN.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            f"must be a number written in digits 0-9, not {text[:40]!r}")
    return float(text)


# Python refuses to read a longer number (sys.int_info.default_max_str_digits).
MOST_DIGITS = 4300


# How much of a number given a refusal repeats: whole_number_argument passes up to
# MOST_DIGITS digits, which would fill the terminal the refusal is read on.
NUMBER_SHOWN = 40


def out_of_range(option: str, *, low, high, given, whole: bool = True) -> str:
    """The one sentence in which a number given for `option` is refused for being outside
    `low` to `high` (both included): "--X must be a whole number from A to B, not V" (a
    number, where a fraction is one). Every count and duration a command or a form takes is
    refused in it: one shape, for a person and a script to read alike. `given` is the
    number given, or how a value that is no number was written (its repr)."""
    written = number_written(given)
    if isinstance(given, int):
        written = digits_shown(written)
    elif len(written) > NUMBER_SHOWN:
        written = f"{written[:NUMBER_SHOWN]}... ({len(written)} characters)"
    return (f"{option} must be a {'whole number' if whole else 'number'} from "
            f"{number_written(low)} to {number_written(high)}, not {written}")


def digits_shown(written: str) -> str:
    """A whole number written in digits (a sign before them, maybe) as a refusal repeats
    it: whole up to NUMBER_SHOWN characters, else its first ones and how many digits it has.
    (A text is repeated by audit.quoting.quoted.)"""
    if len(written) <= NUMBER_SHOWN:
        return written
    return f"{written[:NUMBER_SHOWN]}... ({len(written.lstrip('-'))} digits)"


def number_written(number) -> str:
    """`number` as a person writes it: 10 for 10.0, 0.5, 1e+300, nan, inf."""
    if isinstance(number, float) and number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return str(number)


def whole_number_in_range(value: int, *, option: str, low: int, high: int,
                          then: str = "") -> int:
    """`value`, a command's whole-number option (read by whole_number_argument), if it is
    from `low` to `high`; else CommandError naming `option`, in the one sentence every
    command says it in (out_of_range), with `then` (what to do instead) after it. Checked
    in handle(), before anything is read or written."""
    if low <= value <= high:
        return value
    raise CommandError(out_of_range(option, low=low, high=high, given=value)
                       + (f"; {then}" if then else ""))


def number_in_range(value: float, *, option: str, low: float, high: float,
                    then: str = "") -> float:
    """`value`, a command's option that may be a fraction (a duration in seconds), if it is
    from `low` to `high`; else CommandError in the sentence whole_number_in_range says it
    in, "a number" for "a whole number". NaN is in no range (every comparison with it is
    false) and infinity past any."""
    if low <= value <= high:
        return value
    raise CommandError(out_of_range(option, low=low, high=high, given=value, whole=False)
                       + (f"; {then}" if then else ""))


class NotAnId(ValueError):
    """Text given as an id that is no id: the message names the field and what was given."""


def id_written(text: str, *, name: str, thing: str) -> int:
    """The id `text` writes, read as every entry point reads one (whole_number), or NotAnId
    in one sentence naming `name`. A number in ASCII digits that no id can be (0: ids count
    from 1; negative, or longer than any) names no `thing`, and is answered as an id that
    names none is, before anything is asked: a command asks for no password (which, mistyped,
    counts towards a lockout) to be told so."""
    number = whole_number(text)
    if number:
        return number
    unsigned = text.removeprefix("-")
    # Not read as a number: past MOST_DIGITS digits, int() raises.
    if unsigned.isascii() and unsigned.isdigit():
        raise NotAnId(f"no {thing} {digits_shown(text)}")
    raise NotAnId(f"{name} must be a whole number written in digits 0-9, not {quoted(text)}; "
                  "nothing was done")


class NotFinite(ValueError):
    """JSON text holding a number that is not finite. `texts`: each as written; `data`: the
    value read, for a caller that names where each is."""

    def __init__(self, texts: list[str], data):
        super().__init__(", ".join(texts))
        self.texts, self.data = texts, data


class TooManyDigits(ValueError):
    """JSON text holding a whole number of more digits than Python reads
    (sys.get_int_max_str_digits, its guard against quadratic-time parsing). `digits`: how
    many it has; `limit`: how many Python reads."""

    def __init__(self, digits: int, limit: int):
        super().__init__(f"a whole number of {digits:,} digits, more than the {limit} "
                         "Python reads")
        self.digits, self.limit = digits, limit


def finite_json(text: str | bytes, *, object_pairs_hook=None):
    """JSON text read as every entry point reads JSON from outside: json.loads, refusing
    NaN and Infinity (which JSON has not, though Python reads them) and literals too large
    for a float (1e400, which Python reads as infinity) with NotFinite. jsonb cannot store
    them, and no rule can compare them as numbers. A whole number longer than Python reads is
    refused with TooManyDigits (where json.loads raises a ValueError naming Python's
    setting). `object_pairs_hook`: as json.loads takes it, for a reader with a rule of its
    own about an object's keys."""
    non_finite = []

    def whole(written: str) -> int:
        digits, limit = len(written.lstrip("-")), sys.get_int_max_str_digits()
        if limit and digits > limit:
            raise TooManyDigits(digits, limit)
        return int(written)

    def number(written: str) -> float:
        value = float(written)
        if not math.isfinite(value):
            non_finite.append(written)
        return value

    data = json.loads(text, parse_float=number, parse_int=whole, parse_constant=number,
                      object_pairs_hook=object_pairs_hook)
    if non_finite:
        raise NotFinite(non_finite, data)
    return data
