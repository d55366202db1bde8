"""The client's headers that the failed-login log keeps (django-axes: User-Agent and
Accept), made storable before anything reads them.

Any client can send a NUL in a header, and PostgreSQL stores none: axes masks one only in
the query and form data it keeps, so a failed sign-in (or a forged approval link, which
counts as one) sent with such a header was a server error, and the failure went uncounted,
a way to try passwords or links unthrottled. The NUL is written as "0x00", as axes writes
one in the query."""

# The META keys of the headers axes copies into its log.
LOGGED_HEADERS = ("HTTP_USER_AGENT", "HTTP_ACCEPT")


def storable_headers(request) -> None:
    for header in LOGGED_HEADERS:
        value = request.META.get(header)
        if value and "\x00" in value:
            request.META[header] = value.replace("\x00", "0x00")


class StorableClientHeadersMiddleware:
    """Before AxesMiddleware, which copies the headers onto the request as it comes in."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        storable_headers(request)
        return self.get_response(request)
