"""The README's list of commands names, for each command, only verbs and options the
command takes: `dispatch status` once read `[--system S] --user NAME --reason` that only
pause and resume take, and a person copying it got an error."""

import re
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

README = Path(__file__).resolve().parents[2] / "README.md"


def _entries() -> list[str]:
    """Each `manage.py ...` of the README's "Other commands", with its continuation lines."""
    block = README.read_text().split("## Other commands", 1)[1].split("\n## ", 1)[0]
    entries, current = [], None
    for line in block.splitlines():
        if "manage.py " in line:
            entries.append(line.split("manage.py ", 1)[1])
            current = len(entries) - 1
        elif current is not None and line.startswith(" " * 20):
            entries[current] += " " + line.strip()
        elif line.strip():
            current = None  # another tool's lines (make bench)
    return entries


def _verbs(parser) -> dict | None:
    """The parsers of a command's verbs (sub-commands), or None if it has none."""
    for action in parser._actions:
        if isinstance(action.choices, dict):
            return action.choices
    return None


def _first_choices(parser) -> list | None:
    positional = [a for a in parser._actions if not a.option_strings]
    return list(positional[0].choices) if positional and positional[0].choices else None


ENTRIES = _entries()


def test_the_readme_lists_the_commands():
    assert any(e.startswith("dispatch status") for e in ENTRIES)
    assert any(e.startswith("dispatch pause|resume") for e in ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.split(" (")[0].strip()[:60] for e in ENTRIES])
def test_each_command_takes_the_verbs_and_options_the_readme_names(entry):
    words = entry.split()
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", entry))
    for name in words[0].split("|"):
        command = load_command_class(get_commands()[name], name)
        parser = command.create_parser("manage.py", name)
        verbs = _verbs(parser)
        if verbs is not None:
            named = words[1].split("|")
            assert set(named) <= set(verbs), f"{name} has no verb among {named}"
            for verb in named:
                unknown = options - set(verbs[verb]._option_string_actions)
                assert not unknown, f"{name} {verb} takes no {', '.join(sorted(unknown))}"
            continue
        choices = _first_choices(parser)
        if choices is not None and "|" in words[1]:
            assert set(words[1].split("|")) <= set(choices), f"{name}: {words[1]}"
        unknown = options - set(parser._option_string_actions)
        assert not unknown, f"{name} takes no {', '.join(sorted(unknown))}"
