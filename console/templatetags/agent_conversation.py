"""{% agent_conversation run steps %}: the conversation of a run's agent steps, on the
run's page (nothing for a run without an agent step)."""

from django import template

from runs.agent_selectors import conversations

register = template.Library()


@register.inclusion_tag("console/partials/agent_conversation.html", takes_context=True)
def agent_conversation(context, run, steps):
    """`actions` in the page's context are those the run offers and the person may use; a
    call shows the tool-call ones its state allows."""
    offered = {item["action"].name: item["action"] for item in context.get("actions", [])
               if item["action"].takes_call}
    convs = conversations(run, steps)
    for conv in convs:
        for turn in conv.turns:
            for call in turn.calls:
                call["actions"] = [offered[name] for name in call["ops"] if name in offered]
    return {"conversations": convs, "run": run, "csrf_token": context.get("csrf_token")}
