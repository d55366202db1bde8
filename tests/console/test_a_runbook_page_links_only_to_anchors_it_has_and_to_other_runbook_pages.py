"""Each runbook section of docs/operations.md is a page of its own in the console. A link the
guide writes as an in-page anchor (`#runbook-unknown_outcome`, `#the-sweeper-is-behind`)
would lead nowhere there: the anchor is not on that page. A link to another runbook goes to
that runbook's console page; a link to a part of the guide the console does not serve keeps
its words and says where in the guide to read, with no dead link."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from console.runbooks import runbook_html

pytestmark = pytest.mark.django_db

GUIDE = (Path(settings.BASE_DIR) / "docs" / "operations.md").read_text()
SERVED = re.findall(r'<a id="runbook-([a-z_]+)"></a>', GUIDE)
LINK = re.compile(r"\[([^\]]+)\]\(#([^)\s]+)\)")


class Page(HTMLParser):
    """The ids a page holds, and each link's target and words."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.links, self.text = set(), [], []
        self.open_link = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and "href" in attrs:
            self.open_link = [attrs["href"], ""]
            self.links.append(self.open_link)

    def handle_endtag(self, tag):
        if tag == "a":
            self.open_link = None

    def handle_data(self, data):
        self.text.append(data)
        if self.open_link is not None:
            self.open_link[1] += data


def words(text: str) -> str:
    return " ".join(text.split())


def section_links(reason: str) -> list[tuple[str, str]]:
    """(words, anchor) of each in-page link the guide writes in the section of `reason`."""
    start = GUIDE.index(f'<a id="runbook-{reason}"></a>')
    end = GUIDE.find("\n<a id=", start + 1)
    return [(words(text), anchor) for text, anchor in LINK.findall(GUIDE[start:end])]


def rendered(client, reason: str) -> Page:
    response = client.get(reverse("console:runbook", args=[reason]))
    assert response.status_code == 200
    page = Page()
    page.feed(response.content.decode())
    return page


def test_the_guide_has_runbooks_that_link_to_each_other_and_to_the_rest_of_the_guide():
    # Otherwise the test below would hold of nothing.
    anchors = [anchor for reason in SERVED for _, anchor in section_links(reason)]
    assert len(SERVED) >= 10
    assert any(anchor.startswith("runbook-") for anchor in anchors)
    assert any(not anchor.startswith("runbook-") for anchor in anchors)


def test_no_runbook_page_links_to_an_anchor_it_does_not_have(client_for, operator):
    client = client_for(operator)
    dead = []
    for reason in SERVED:
        page = rendered(client, reason)
        dead += [(reason, href) for href, _ in page.links
                 if href.startswith("#") and href[1:] not in page.ids]
    assert dead == []


def test_a_link_to_another_runbook_goes_to_its_console_page(client_for, operator):
    client = client_for(operator)
    checked = 0
    for reason in SERVED:
        page = rendered(client, reason)
        for text, anchor in section_links(reason):
            target = anchor.removeprefix("runbook-")
            if not anchor.startswith("runbook-") or target not in SERVED:
                continue
            url = reverse("console:runbook", args=[target])
            assert [url, text] in [[href, words(link)] for href, link in page.links], \
                (reason, anchor)
            checked += 1
    # unknown_outcome from unclassified_error, approval_rejected from approval_timed_out,
    # reopened from ended_unsettled at least.
    assert checked >= 3


def test_a_link_to_a_part_of_the_guide_not_served_keeps_its_words_and_names_the_guide(
        client_for, operator):
    client = client_for(operator)
    checked = 0
    for reason in SERVED:
        page = rendered(client, reason)
        text = words("".join(page.text))
        for link_text, anchor in section_links(reason):
            if anchor.startswith("runbook-") and anchor.removeprefix("runbook-") in SERVED:
                continue
            assert not [href for href, _ in page.links if href.endswith(f"#{anchor}")]
            assert f"{link_text} (see docs/operations.md, " in text, (reason, anchor)
            checked += 1
    assert checked >= 2  # the sweeper is behind, kept events expire


def test_the_guide_heading_a_link_stands_for_is_named(client_for, operator):
    page = rendered(client_for(operator), "approval_timed_out")
    assert ("the sweeper is behind (see docs/operations.md, 'The sweeper is behind')"
            in words("".join(page.text)))


def test_only_a_link_to_a_runbook_by_its_exact_anchor_becomes_a_console_link():
    html = runbook_html(
        '[a](#runbook-reopened%22onmouseover=alert(1)) [b](#runbook-no_such_reason) '
        '<a href="#runbook-reopened" onclick="alert(2)">c</a> [d](javascript:alert(3)) '
        '<a href="#x"><script>alert(4)</script>e</a>')
    page = Page()
    page.feed(html)
    assert [href for href, _ in page.links] == [reverse("console:runbook", args=["reopened"])]
    for hostile in ("onmouseover", "onclick", "javascript:", "<script"):
        assert hostile not in html
