"""The search box of the runs list and of Django admin: what a typed text matches, each way
along its own index, so that a search at a million runs reads only what it finds."""

from django.db.models import Q, QuerySet
from django.db.models.functions import Left, Reverse
from django.db.models.lookups import Exact, StartsWith

from ..agent_models import ToolCall
from ..machine.storable import whole_number
from ..models import Step

# What a search matches, each through its own index: the start of a business key
# (run_business_key_prefix_idx) or its end (run_business_key_suffix_idx), the start of a
# step's or a tool call's idempotency key (step_key_head_idx, toolcall_key_head_idx: the
# whole key, or the first characters a page shows), or exactly a remote reference or a
# compensation reference (step_remote_ref_idx, step_compensation_ref_idx and the tool
# calls' own).
SEARCHED_REFERENCES = ("remote_ref", "compensation_ref")
# Shorter than this, a key prefix would match a large share of all keys: such a search
# matches a whole key only.
KEY_PREFIX_MIN = 8
# The key indexes hold only a key's first KEY_HEAD characters (migration 0044): 64 bits of
# a digest tell one key from billions, and an entry a third the size of the whole key's is
# a third of the index's writes, pages and, past a checkpoint, full-page images (a new key
# lands on a random leaf; at ten million steps these were two thirds of a step's WAL).
KEY_HEAD = 16
_ELLIPSES = ("…", "...")


def key_matches(q: str) -> list:
    """The filters of the rows (steps or tool calls) whose idempotency key is `q`, or starts
    with it when `q` is a long enough hex prefix (an ellipsis after it allowed): the head's
    condition lets PostgreSQL go along the key-head index, the whole key's decides."""
    key = q
    for ellipsis in _ELLIPSES:
        key = key.removesuffix(ellipsis)
    head = Left("idempotency_key", KEY_HEAD)
    if len(key) >= KEY_PREFIX_MIN and all(c in "0123456789abcdef" for c in key.lower()):
        key = key.lower()
        return [StartsWith(head, key[:KEY_HEAD]), Q(idempotency_key__startswith=key)]
    return [Exact(head, q[:KEY_HEAD]), Q(idempotency_key=q)]


def search_branches(runs: QuerySet, q: str) -> list[QuerySet]:
    """`runs` narrowed to each way a run can match the search `q`, one queryset per way."""
    branches = [runs.filter(business_key__startswith=q),
                runs.alias(reversed_key=Reverse("business_key"))
                .filter(reversed_key__startswith=q[::-1])]
    matches = [key_matches(q)] + [[Q(**{field: q})] for field in SEARCHED_REFERENCES]
    branches += [runs.filter(pk__in=Step.objects.filter(*match).values("run_id"))
                 for match in matches]
    branches += [runs.filter(pk__in=ToolCall.objects.filter(*match).values("step__run_id"))
                 for match in matches]
    if (run_id := whole_number(q)) is not None:
        branches.append(runs.filter(pk=run_id))
    return branches
