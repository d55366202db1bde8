"""Sending a person who is signed out to sign in, and back to the page they asked for: the
approver's pages here, and the operator console's (console.views), which add what htmx
needs to it."""

from functools import wraps
from urllib.parse import urlsplit

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import DisallowedRedirect


def to_sign_in(then: str):
    """The redirect to sign in and then to `then`; to `then` without its query, or to the
    console's first page, where the sign-in address would be longer than Django redirects
    to (MAX_URL_REDIRECT_LENGTH). A link as long as the console hands out (a saved view's)
    grows once written into `next`, and Django's refusal answered "Bad request", with no
    way to sign in."""
    for candidate in (then, urlsplit(then).path):
        try:
            return redirect_to_login(candidate)
        except DisallowedRedirect:
            continue
    return redirect_to_login("/")


def login_required(view):
    """Django's login_required, sending a person signed out to sign in by to_sign_in: a
    link too long to be carried whole in the sign-in address leads to sign in, then to its
    page, instead of to "Bad request"."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        return to_sign_in(request.get_full_path())

    return wrapper
