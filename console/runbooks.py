"""The runbook sections of docs/operations.md, one per attention reason, for the console's
"runbook" link: the same text the operations guide holds, not a second copy."""

import re
from functools import lru_cache
from html import unescape
from pathlib import Path

import markdown
import nh3
from django.conf import settings
from django.urls import reverse
from django.utils.html import escape

GUIDE = Path(settings.BASE_DIR) / "docs" / "operations.md"
_ANCHOR = re.compile(r'<a id="runbook-([a-z_]+)"></a>\n')
_ANY_ANCHOR = re.compile(r'^<a id="([^"]+)"></a>$', re.MULTILINE)
# From level 2: the title (# Operations) names no part, and a shell comment starts "# ".
_HEADING = re.compile(r"^#{2,6} +(.+?) *$", re.MULTILINE)
# Sanitised output: attribute values are quoted and hold no ">" (nh3 writes it &gt;), and a
# link holds no other link, so these match exactly one link each.
_LINK = re.compile(r"<a\s(?P<attributes>[^>]*)>(?P<words>.*?)</a>", re.DOTALL)
_IN_PAGE_HREF = re.compile(r'\bhref="#(?P<anchor>[^"]*)"')
_RUNBOOK_HREF = re.compile(r"runbook-([a-z_]+)")


@lru_cache(maxsize=1)
def _sections() -> dict[str, str]:
    text = GUIDE.read_text()
    marks = list(_ANCHOR.finditer(text))
    sections = {}
    for mark, following in zip(marks, [*marks[1:], None], strict=False):
        end = following.start() if following else text.find("\n<a id=", mark.end())
        sections[mark.group(1)] = text[mark.end():end if end != -1 else None].strip()
    return sections


def runbook_section(reason: str) -> str | None:
    """The runbook text for attention reason `reason` (Markdown), or None."""
    return _sections().get(reason)


@lru_cache(maxsize=1)
def _anchor_headings() -> dict[str, str]:
    """The heading of the guide each of its anchors stands for: the heading right under it,
    or, for an anchor on a paragraph, the heading that paragraph sits under."""
    text = GUIDE.read_text()
    found = [(heading.start(), _slug(heading.group(1)), _name(heading.group(1)))
             for heading in _HEADING.finditer(text)]
    for mark in _ANY_ANCHOR.finditer(text):
        next_line_end = text.find("\n", mark.end() + 1)
        above = list(_HEADING.finditer(text, 0, next_line_end if next_line_end != -1 else None))
        if above:
            found.append((mark.start(), mark.group(1), _name(above[-1].group(1))))
    headings = {}
    for _, anchor, name in sorted(found):
        headings.setdefault(anchor, name)  # two alike: a browser goes to the first
    return headings


def _slug(heading: str) -> str:
    """The id a Markdown viewer gives a heading ("## Settings" is #settings), which the
    guide links to as well as to its explicit anchors."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _name(heading: str) -> str:
    # An alert's heading ends with the alerts' names in parentheses; the words before them
    # are what a reader looks for in the guide.
    return re.sub(r" \([^()]*\)$", "", heading)


def _relinked(link: re.Match) -> str:
    """A link of a runbook section as its own page shows it. The guide links within itself
    (#runbook-unknown_outcome, #the-sweeper-is-behind), and those anchors are not on a page
    that holds one section: a runbook's goes to that runbook's page; any other keeps its
    words, with no link, and says where in the guide to read."""
    href = _IN_PAGE_HREF.search(link["attributes"])
    if href is None:
        return link[0]
    anchor = unescape(href["anchor"])
    runbook = _RUNBOOK_HREF.fullmatch(anchor)
    if runbook and runbook.group(1) in _sections():
        url = escape(reverse("console:runbook", args=[runbook.group(1)]))
        attributes = _IN_PAGE_HREF.sub(lambda _: f'href="{url}"', link["attributes"], count=1)
        return f"<a {attributes}>{link['words']}</a>"
    heading = _anchor_headings().get(anchor)
    if heading is None:
        return link["words"]
    return link["words"] + escape(f" (see docs/operations.md, '{heading}')")


def runbook_html(markdown_text: str) -> str:
    """A runbook section rendered from Markdown and sanitised: the guide is ours, but what
    reaches the page is limited to harmless tags whatever the file holds. Its links within
    the guide are rewritten for a page of one section (after sanitising, so that only
    sanitised hrefs are read and only escaped text is written)."""
    html = markdown.markdown(markdown_text, extensions=["fenced_code", "tables"])
    clean = nh3.clean(html, tags=SAFE_TAGS, attributes={"a": {"href", "title"}},
                      url_schemes={"http", "https", "mailto"})
    return _LINK.sub(_relinked, clean)


SAFE_TAGS = {"p", "a", "ul", "ol", "li", "code", "pre", "em", "strong", "blockquote", "h2",
             "h3", "h4", "table", "thead", "tbody", "tr", "th", "td", "br", "hr"}
