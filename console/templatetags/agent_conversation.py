"""{% agent_conversation run steps %}: the conversation of a run's agent steps, on the
run's page (nothing for a run without an agent step), a page of turns at a time
(?turns_from=N, runs.reads.agent_selectors.TURN_PAGE turns)."""

from django import template

from runs.machine.storable import whole_number
from runs.reads.agent_selectors import TURN_PAGE, conversations

register = template.Library()


@register.inclusion_tag("console/partials/agent_conversation.html", takes_context=True)
def agent_conversation(context, run, steps):
    """`actions` in the page's context are those the run offers and the person may use; a
    call shows those aimed at a tool call that its state allows (the confirmation of the
    undo a compensation paused at, on that call)."""
    offered = {item["action"].name: item["action"] for item in context.get("actions", [])
               if item["action"].names_call}
    request = context.get("request")
    start = request.GET.get("turns_from", "") if request is not None else ""
    first_turn = whole_number(start, digits=6) or 0
    convs = conversations(run, steps, first_turn=first_turn, turns=TURN_PAGE)
    for conv in convs:
        for turn in conv.turns:
            for call in turn.calls:
                # Each with what it will do to this call, for its dialog.
                call["actions"] = [{"action": offered[name],
                                    "explanation": offered[name].explain(run, steps, call)}
                                   for name in call["ops"] if name in offered]
    return {"conversations": convs, "run": run, "csrf_token": context.get("csrf_token")}
