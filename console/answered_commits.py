"""The console's and the API's requests that change something are doors whose commits are
answered (runs.execution.lost_commit): a COMMIT whose connection is lost is asked about
afterwards, and the page or the API's answer says whether it was done (console.errors,
api.errors). A read (GET, HEAD, OPTIONS) commits nothing a person asked for, and gains no
round trip."""

from runs.execution.lost_commit import door

READS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


class AnsweredCommitsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method in READS:
            return self.get_response(request)
        with door():
            return self.get_response(request)
