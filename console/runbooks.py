"""The runbook sections of docs/operations.md, one per attention reason, for the console's
"runbook" link: the same text the operations guide holds, not a second copy."""

import re
from functools import lru_cache
from pathlib import Path

import markdown
import nh3
from django.conf import settings

GUIDE = Path(settings.BASE_DIR) / "docs" / "operations.md"
_ANCHOR = re.compile(r'<a id="runbook-([a-z_]+)"></a>\n')


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


def runbook_html(markdown_text: str) -> str:
    """A runbook section rendered from Markdown and sanitised: the guide is ours, but what
    reaches the page is limited to harmless tags whatever the file holds."""
    html = markdown.markdown(markdown_text, extensions=["fenced_code", "tables"])
    return nh3.clean(html, tags=SAFE_TAGS, attributes={"a": {"href", "title"}},
                     url_schemes={"http", "https", "mailto"})


SAFE_TAGS = {"p", "a", "ul", "ol", "li", "code", "pre", "em", "strong", "blockquote", "h2",
             "h3", "h4", "table", "thead", "tbody", "tr", "th", "td", "br", "hr"}
