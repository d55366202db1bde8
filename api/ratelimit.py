"""Per-token rate limits: a fixed window counted in a Django cache.

Each token gets `limit` requests per window of API_RATE_LIMIT_WINDOW_SECONDS; the count is
one atomic increment (Redis INCR with the Redis cache; a locked increment with the local
memory cache). With several web processes the cache must be shared (Redis: set
API_CACHE_URL), or each process counts on its own and the effective limit is multiplied by
their number. Windows are cut by the database's clock, which all processes share. A fixed
window allows up to twice the limit across a window boundary, which is fine for protecting
the service from a runaway client, the point of this limit.

When the cache cannot be reached the request is let through: the limit protects the
service, and an outage of the counter store should not become an outage of the API. That is
said once when the outage begins and once when it ends (runs.execution.outages), not with a
traceback at every request.
"""

import logging
import math
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches

from runs import store
from runs.error_text import first_line
from runs.execution.outages import outages

logger = logging.getLogger(__name__)
# The trouble's name in runs.execution.outages.
STORE = "the API's rate limit store"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    limit: int
    count: int
    retry_after: int  # seconds until the window resets


def hit(key: str, *, limit: int, window: int | None = None,
        now: float | None = None) -> Verdict:
    """Count one request for `key` in the current window and say whether it is allowed."""
    window = window or settings.API_RATE_LIMIT_WINDOW_SECONDS
    # By the database's clock, as every web process reads it: by each host's own, hosts
    # whose clocks disagree would count one token in windows of their own.
    now = store.current().now().timestamp() if now is None else now
    slot = int(now // window)
    retry_after = max(1, math.ceil((slot + 1) * window - now))
    cache = caches[settings.API_RATE_LIMIT_CACHE]
    cache_key = f"api-rate:{key}:{window}:{slot}"
    try:
        # add() creates the counter with its expiry only if absent; incr() is atomic.
        cache.add(cache_key, 0, timeout=window + 1)
        try:
            count = cache.incr(cache_key)
        except ValueError:  # expired between add() and incr()
            cache.add(cache_key, 1, timeout=window + 1)
            count = 1
    except Exception as exc:
        if outages.failed_once_more(STORE) == 1:
            logger.warning("rate limit store unavailable (%s: %s); requests are let through "
                           "uncounted until it answers", type(exc).__name__, first_line(exc))
        return Verdict(True, limit, 0, retry_after)
    if missed := outages.answered(STORE):
        logger.warning("rate limit store answers again, after %d request(s) let through "
                       "uncounted", missed)
    return Verdict(count <= limit, limit, count, retry_after)
