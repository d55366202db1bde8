"""What the simulated model answers: an OpenAI-compatible chat completion whose content is a
JSON classification of the invoice text in the last user message.

Deterministic (keywords, not sampling) so that tests and the demo can say in advance which
category and approver group a given invoice gets; `malformed` output fails the workflow's
schema on purpose, to exercise the model-format budget.
"""

import json
import time

CATEGORY_KEYWORDS = {
    "software": ["software", "license", "licence", "subscription", "saas", "cloud", "hosting"],
    "travel": ["travel", "flight", "hotel", "train", "rail", "taxi", "airline"],
    "office-supplies": ["paper", "toner", "stationery", "pens", "chair", "desk", "supplies"],
    "services": ["consulting", "cleaning", "maintenance", "services", "workshop", "legal"],
}
FALLBACK_CATEGORY = "services"
APPROVER_GROUP = "finance-approvers"
MALFORMED_CONTENT = '{"category": "unknown-thing"}'


def classify(text: str) -> dict:
    """The category with the most keyword hits (ties go to the earlier category)."""
    lowered = text.lower()
    hits = {category: [w for w in words if w in lowered]
            for category, words in CATEGORY_KEYWORDS.items()}
    category = max(hits, key=lambda c: len(hits[c]))
    matched = hits[category]
    if not matched:
        return {"category": FALLBACK_CATEGORY, "confidence": 0.4,
                "reasons": ["no category keyword found"], "approver_group": APPROVER_GROUP}
    return {
        "category": category,
        "confidence": round(min(0.55 + 0.1 * len(matched), 0.97), 2),
        "reasons": [f"mentions '{word}'" for word in matched[:3]],
        "approver_group": APPROVER_GROUP,
    }


def last_user_text(messages: list) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content or "")
    return ""


def answer(prompt: str, *, malformed: bool) -> str:
    return MALFORMED_CONTENT if malformed else json.dumps(classify(prompt))


def completion(*, completion_id: str, model: str, prompt: str, content: str) -> dict:
    """A chat.completion object as the OpenAI API returns it (token counts are word counts:
    close enough for a stand-in, and stable)."""
    prompt_tokens, completion_tokens = len(prompt.split()), len(content.split())
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            # No text at all (the fault empty_answer) is null, as the OpenAI API sends it.
            "message": {"role": "assistant", "content": content or None, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }
