"""Whether the demo's sandbox (the simulated external systems) answers at a URL: what the
drills and the demo's scenarios check before they make anything."""

import httpx

from audit.quoting import quoted

# What the sandbox's counters (its stats page) name: a server that answers with all of them
# is the sandbox. A weaker sign (any JSON 404) let the drills send their business traffic
# (customers, ledger entries) to whatever API answered so, the product's own included.
SANDBOX_COUNTERS = frozenset({"tasks", "ledger_entries", "customers", "model_calls",
                              "faults_pending"})


def sandbox_answers(url: str) -> str | None:
    """None if the demo's sandbox answers at `url`, else what went wrong. The probe reads its
    counters: a read that changes nothing."""
    try:
        response = httpx.get(f"{url}/stats", timeout=3)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL: no HTTPError, a typo
        return f"{type(exc).__name__}: {exc}"
    except UnicodeError:
        # httpx lets through a host no DNS name can be (a label over 63 characters, an
        # empty one): the resolver's IDNA encoding refuses it at connect time.
        return (f"InvalidURL: invalid host {quoted(httpx.URL(url).host)} (a DNS name's labels are "
                "1 to 63 characters, 253 in all)")
    try:
        counters = response.json() if response.status_code == 200 else None
    except ValueError:
        counters = None
    if not isinstance(counters, dict) or not SANDBOX_COUNTERS <= counters.keys():
        return f"HTTP {response.status_code} from something that is not the demo's sandbox"
    return None
