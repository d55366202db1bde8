"""Every view the URLconf serves, and which of them can change state.

A view can change state if it accepts a method other than GET, HEAD and OPTIONS. What a view
accepts is read from the view itself: the method list of `require_http_methods` (and so of
`require_POST` / `require_GET`) in its chain of decorators, the handlers of a class-based
view, the operations of a django-ninja path. A view that declares nothing accepts every
method, so it counts as changing state until the matrix says otherwise (fail closed).
"""

from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# What "accepts every method" means here (a view that declares no list).
ANY_METHOD = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class View:
    """One URL pattern of the URLconf, with what its view accepts."""

    key: str  # "namespace:name", or "route:<route>" for a pattern without a name
    route: str  # the full route, as the patterns spell it
    callback: object
    methods: frozenset[str]
    declared: bool  # the methods come from the view; False: it declares none (any method)
    csrf_exempt: bool

    @property
    def changes_state(self) -> bool:
        return bool(self.methods - SAFE_METHODS)


def _walk(patterns, prefix: str = "", namespace: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), namespace, pattern


def _decorated_methods(callback) -> frozenset[str] | None:
    """The list given to require_http_methods somewhere in the decorator chain, if any."""
    func = callback
    seen = set()
    while func is not None and id(func) not in seen:
        seen.add(id(func))
        code = getattr(func, "__code__", None)
        if code is not None and "request_method_list" in code.co_freevars:
            cell = func.__closure__[code.co_freevars.index("request_method_list")]
            return frozenset(m.upper() for m in cell.cell_contents)
        func = getattr(func, "__wrapped__", None)
    return None


def _ninja_methods(callback) -> frozenset[str] | None:
    # PathView.get_view() returns a closure over the PathView holding the operations.
    for cell in getattr(callback, "__closure__", None) or ():
        operations = getattr(cell.cell_contents, "operations", None)
        if operations is not None and type(cell.cell_contents).__name__ == "PathView":
            return frozenset(m.upper() for op in operations for m in op.methods)
    return None


def methods_of(callback) -> tuple[frozenset[str], bool]:
    """(the methods `callback` accepts, whether the view declares them)."""
    view_class = getattr(callback, "view_class", None)
    if view_class is not None:
        return frozenset(m.upper() for m in view_class.http_method_names
                         if hasattr(view_class, m)), True
    for finder in (_ninja_methods, _decorated_methods):
        found = finder(callback)
        if found is not None:
            return found | {"OPTIONS"}, True
    return ANY_METHOD, False


def all_views() -> list[View]:
    views = []
    for route, namespace, pattern in _walk(get_resolver().url_patterns):
        key = f"{namespace}{pattern.name}" if pattern.name else f"route:{route}"
        methods, declared = methods_of(pattern.callback)
        views.append(View(key=key, route=route, callback=pattern.callback, methods=methods,
                          declared=declared,
                          csrf_exempt=bool(getattr(pattern.callback, "csrf_exempt", False))))
    return views


def state_changing_views() -> list[View]:
    return [v for v in all_views() if v.changes_state]
