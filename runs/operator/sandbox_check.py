"""Whether the demo's sandbox (the simulated external systems) answers at a URL: what the
drills and the demo's scenarios check before they make anything."""

import uuid

import httpx


def sandbox_answers(url: str) -> str | None:
    """None if the demo's sandbox answers at `url`, else what went wrong. The probe is a
    lookup by a key nobody used: a read that changes nothing."""
    try:
        response = httpx.get(f"{url}/tracker/tasks", params={"key": f"probe-{uuid.uuid4()}"},
                             timeout=3)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL: no HTTPError, a typo
        return f"{type(exc).__name__}: {exc}"
    if response.status_code != 404 or response.headers.get("content-type", "").split(";")[0] \
            != "application/json":
        return f"HTTP {response.status_code} from something that is not the demo's sandbox"
    return None
