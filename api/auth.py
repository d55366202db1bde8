"""Bearer-token authentication and the per-token rate limit, run before every operation.

Only the Authorization header opens the API: a console session (cookie) does not, and since
the console reads only its session, a token does not open the console either.
"""

from django.conf import settings
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer

from . import ratelimit
from .models import ApiToken
from .tokens import token_check


class RateLimited(Exception):
    def __init__(self, retry_after: int, limit: int):
        super().__init__(f"rate limit of {limit} requests per "
                         f"{settings.API_RATE_LIMIT_WINDOW_SECONDS}s exceeded")
        self.retry_after = retry_after
        self.limit = limit


class TokenAuth(HttpBearer):
    def __call__(self, request):
        # Unlike HttpBearer's own, never logs the header it refuses (it may be a secret).
        scheme, _, credentials = request.headers.get(self.header, "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return None
        return self.authenticate(request, credentials.strip())

    def authenticate(self, request, token: str) -> ApiToken:
        checked = token_check(token)
        if checked.token is None:
            raise AuthenticationError(401, checked.problem)
        api_token = checked.token
        limit = api_token.rate_limit or settings.API_RATE_LIMIT
        verdict = ratelimit.hit(f"token:{api_token.pk}", limit=limit)
        if not verdict.allowed:
            raise RateLimited(verdict.retry_after, limit)
        return api_token
