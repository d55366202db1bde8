"""How a command refuses a value that is not one of its choices (an action, a --mode, a
subcommand): in argparse's sentence, "invalid choice: V (choose from A, B)", but with the
value repeated as every other refusal of a command repeats one, cut short (quoting.quoted),
where argparse repeats it whole: a 100,000-character action was one line of 100,000
characters. Kept in the lowest layer so that the audit commands and the console's hold it
once."""

from argparse import ArgumentError

from django.core.management.base import BaseCommand, CommandParser

from audit.quoting import quoted


def choice_refused(given, choices) -> str:
    """The sentence refusing `given`, which is not one of `choices`, after argparse's
    "argument --option: ", which names what was refused."""
    written = quoted(given) if isinstance(given, str) else repr(given)
    return f"invalid choice: {written} (choose from {', '.join(map(repr, choices))})"


class ChoicesCutShortParser(CommandParser):
    """A command's parser whose refusal of a choice is choice_refused. argparse checks every
    choice in this one method, a subcommand's name (checked by the parser above it) too;
    `choices=` stays as it is, so --help and the usage line still list them."""

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            raise ArgumentError(action, choice_refused(value, action.choices))


class ChoicesCutShortCommand(BaseCommand):
    """A command whose choices, and subcommands, are refused by ChoicesCutShortParser.
    Django's create_parser builds a CommandParser by name, with no way to give it another
    class; the parser it returns, complete, is made one of that subclass, which adds no state
    of its own."""

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.__class__ = ChoicesCutShortParser
        return parser
