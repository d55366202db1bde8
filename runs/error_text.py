"""An error as one line of a log or a message: the store and the execution layer both say
what went wrong so, and neither may import the other's modules for it."""


def first_line(exc: BaseException) -> str:
    """The first line of what `exc` says (a server's message may go on for lines), or its
    class where it says nothing."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
