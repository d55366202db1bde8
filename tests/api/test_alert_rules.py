"""docs/alerts.yml: every rule is complete, uses only metrics /metrics exposes, and links to
a runbook section that exists in docs/operations.md."""

import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from runs.models import AttentionReason

DOCS = Path(__file__).resolve().parents[2] / "docs"
RULES = yaml.safe_load((DOCS / "alerts.yml").read_text())
ALL_RULES = [rule for group in RULES["groups"] for rule in group["rules"]]


def test_the_rules_file_is_prometheus_rule_groups():
    assert RULES.keys() == {"groups"}
    assert len(ALL_RULES) >= 10
    for group in RULES["groups"]:
        assert group["name"] and group["rules"]
    names = [rule["alert"] for rule in ALL_RULES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r["alert"])
def test_each_rule_is_complete(rule):
    assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}
    assert re.fullmatch(r"[A-Z][A-Za-z]+", rule["alert"])
    assert re.fullmatch(r"\d+[smhd]", rule["for"])
    assert rule["labels"]["severity"] in ("page", "warning")
    assert {"summary", "description", "runbook_url"} <= set(rule["annotations"])
    expr = rule["expr"]
    assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}")


@pytest.mark.django_db
def test_every_metric_a_rule_uses_is_exposed(client):
    from runs.execution import executor
    from tests.factories import new_run

    # A finished run, so that the step duration histogram has samples too.
    executor.advance_run(new_run().pk, worker="w1")
    response = client.get("/metrics")
    exposed = {sample.name for family in text_string_to_metric_families(response.content.decode())
               for sample in family.samples}
    used = {name for rule in ALL_RULES for name in re.findall(r"\bdurable_[a-z_]+\b",
                                                              rule["expr"])}
    assert used and used <= exposed, used - exposed


def test_every_runbook_link_leads_to_a_section_of_operations_md():
    text = (DOCS / "operations.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    for rule in ALL_RULES:
        link = rule["annotations"]["runbook_url"]
        assert link.startswith("docs/operations.md#"), link
        anchor = link.split("#", 1)[1]
        if "{{ $labels.reason }}" in anchor:
            for reason in AttentionReason:
                assert anchor.replace("{{ $labels.reason }}", reason.value) in anchors
        else:
            assert anchor in anchors, anchor


def test_every_attention_reason_has_a_runbook():
    text = (DOCS / "operations.md").read_text()
    for reason in AttentionReason:
        assert f'<a id="runbook-{reason.value}"></a>' in text, reason


def test_no_anchor_of_the_guide_shares_its_id_with_a_heading():
    """A browser goes to the first element of an id: an anchor named as a heading is named
    (a Markdown viewer's #metrics for "## Metrics") is never reached by a link to it."""
    def slug(heading: str) -> str:
        return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")

    text = (DOCS / "operations.md").read_text()
    anchors = re.findall(r'<a id="([^"]+)"></a>', text)
    # An anchor right above its own heading, named alike, leads to the same place.
    own = {anchor for anchor, heading in re.findall(
        r'<a id="([^"]+)"></a>\n#{1,6} +(.+?) *$', text, re.MULTILINE)
        if anchor == slug(heading)}
    headings = {slug(h) for h in re.findall(r"^#{1,6} +(.+?) *$", text, re.MULTILINE)}
    assert len(anchors) == len(set(anchors))
    assert not (set(anchors) - own) & headings
