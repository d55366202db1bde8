"""{% agent_conversation run steps %}: the conversation of a run's agent steps, on the
run's page (nothing for a run without an agent step)."""

from django import template

from runs.agent_selectors import conversations

register = template.Library()


@register.inclusion_tag("console/partials/agent_conversation.html")
def agent_conversation(run, steps):
    return {"conversations": conversations(run, steps)}
