"""A workflow's or a schedule's name as one segment of a URL path, the one way every surface
writes it (the console's pages, the API's dispatch routes): the path converter `name`,
registered here, once (Django warns at a second registration of a name, and will refuse it).
A URL module that uses `<name:...>` imports this module."""

from django.urls import register_converter


class NameInPath:
    """A workflow's or a schedule's name as one segment of a path. Declared in code, a name
    may hold any character: "/" would split it (Django's str converter then fails to
    reverse, and one run of such a workflow made the runs list a 500), and a segment "." or
    ".." is rewritten by browsers. Those are written as "~" and their code, and "~" itself
    too, so that no two names share a path."""

    regex = r"[^/]+"
    ESCAPED = {"~": "~7E", "/": "~2F", ".": "~2E"}
    UNESCAPED = {escape: character for character, escape in ESCAPED.items()}

    def to_python(self, value: str) -> str:
        parts = value.split("~")
        name = [parts[0]]
        for part in parts[1:]:
            character = self.UNESCAPED.get(f"~{part[:2]}")
            if character is None:
                raise ValueError(f"no escape ~{part[:2]}")  # no match: the page is not found
            name.append(character + part[2:])
        return "".join(name)

    def to_url(self, value: str) -> str:
        text = value.replace("~", self.ESCAPED["~"]).replace("/", self.ESCAPED["/"])
        # Dots only where a browser would read the segment as "here" or "up".
        return self.ESCAPED["."] * len(text) if text in (".", "..") else text


register_converter(NameInPath, "name")
