"""How a command's parser refuses what it was given: in argparse's sentences, but with what
was given repeated as every other refusal of a command repeats it, cut short and with every
character that does not show itself escaped (quoting.quoted), where argparse repeats it
whole and raw: a 100,000-character action, an unrecognized argument or a --verbosity that is
no number was one line of 100,000 characters, a line break in one a second line. Every
command of the project has this parser (ValuesCutShortCommand). Kept in the lowest layer so
that the audit commands and the others hold it once."""

from argparse import ArgumentError, _SubParsersAction

from django.core.management.base import BaseCommand, CommandParser

from audit.quoting import quoted

# The longest refusal argparse's own sentences make (a value not among the choices, listing
# them) is a few hundred characters; a longer one repeats something given whole.
REFUSAL_SHOWN = 1_000


def choice_refused(given, choices) -> str:
    """The sentence refusing `given`, which is not one of `choices`, after argparse's
    "argument --option: ", which names what was refused."""
    written = quoted(given) if isinstance(given, str) else repr(given)
    return f"invalid choice: {written} (choose from {', '.join(map(repr, choices))})"


def visible(text: str) -> str:
    """`text` with each character that does not show itself (a line break, a terminal's
    escape) written as its escape, as quoted() writes it, without quotes around it."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class ValuesCutShortParser(CommandParser):
    """A command's parser that repeats what it was given cut short: a value not among the
    choices (argparse checks every choice in _check_value, a subcommand's name too, checked
    by the parser above it), a value its type refuses (_get_value), the arguments it did
    not recognize (parse_args). `choices=` stays as it is, so --help and the usage line
    still list them. Whatever else argparse repeats whole ("ambiguous option: --s=...",
    "ignored explicit argument ...") is cut where every refusal passes (error)."""

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            raise ArgumentError(action, choice_refused(value, action.choices))

    def _get_value(self, action, arg_string):
        try:
            return super()._get_value(action, arg_string)
        except ArgumentError as refused:
            # A type that raised TypeError or ValueError (int, --verbosity's): argparse's
            # "invalid int value: V" with V whole. A type's own ArgumentTypeError says what
            # it says (the project's types cut what they repeat).
            if not isinstance(refused.__context__, TypeError | ValueError):
                raise
            name = getattr(action.type, "__name__", repr(action.type))
            raise ArgumentError(action, f"invalid {name} value: {quoted(arg_string)}") from None

    def parse_args(self, args=None, namespace=None):
        # Django's refusal of no arguments at all where some are needed, then argparse's
        # parse_args, each unrecognized argument quoted and cut short (so many of them, the
        # refusal is cut by error).
        if self.missing_args_message and not args:
            self.error(self.missing_args_message)
        namespace, unrecognized = self.parse_known_args(args, namespace)
        if unrecognized:
            self.error(f"unrecognized arguments: {' '.join(map(quoted, unrecognized))}")
        return namespace

    def error(self, message):
        if len(message) > REFUSAL_SHOWN:
            message = f"{message[:REFUSAL_SHOWN]}... ({len(message)} characters)"
        super().error(visible(message))


def parsers_within(parser):
    """`parser` and its subcommands' parsers, at any depth."""
    yield parser
    for action in parser._actions:
        if isinstance(action, _SubParsersAction):
            for inner in action.choices.values():
                yield from parsers_within(inner)


class ValuesCutShortCommand(BaseCommand):
    """A command whose parser, and its subcommands', are ValuesCutShortParser. Django's
    create_parser builds a CommandParser by name, with no way to give it another class;
    each parser it returns, complete, is made one of that subclass, which adds no state of
    its own."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        for each in parsers_within(parser):
            each.__class__ = ValuesCutShortParser
        return parser
