"""An admin change page's form as a browser posts it: every input, textarea and select as
rendered (the hidden copies of what the page showed included), a checkbox only when ticked,
each name with all its values."""

from html.parser import HTMLParser


class ChangeForm(HTMLParser):
    """The fields the form `form_id` posts, read from a page."""

    def __init__(self, form_id: str | None):
        super().__init__()
        self.form_id = form_id
        self.fields: dict[str, list[str]] = {}
        self._inside = False
        self._textarea: str | None = None
        self._select: str | None = None

    def _add(self, name: str, value: str) -> None:
        self.fields.setdefault(name, []).append(value)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            # Without an id asked for, the page's form: not the header's sign-out one.
            self._inside = attrs.get("id") == self.form_id if self.form_id is not None \
                else attrs.get("id") != "logout-form"
        elif not self._inside:
            return
        elif tag == "option" and self._select is not None and "selected" in attrs:
            self._add(self._select, attrs.get("value") or "")
        elif "name" not in attrs or "disabled" in attrs:
            return
        elif tag == "input" and attrs.get("type") in ("submit", "button"):
            return
        elif tag == "input" and attrs.get("type") in ("checkbox", "radio"):
            if "checked" in attrs:
                self._add(attrs["name"], attrs.get("value") or "on")
        elif tag == "input":
            self._add(attrs["name"], attrs.get("value") or "")
        elif tag == "textarea":
            self._textarea = attrs["name"]
            self._add(self._textarea, "")
        elif tag == "select":
            self._select = attrs["name"]
            self.fields.setdefault(self._select, [])

    def handle_data(self, data):
        if self._textarea is not None:
            self.fields[self._textarea][-1] += data

    def handle_endtag(self, tag):
        if tag == "textarea" and self._textarea is not None:
            # The first line break is the markup's, not the value's.
            self.fields[self._textarea][-1] = self.fields[self._textarea][-1].removeprefix("\n")
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self._inside = False


def shown_form(client, url: str, form_id: str | None = None) -> dict[str, list[str]]:
    """The form of the page at `url` (the one with id `form_id`, or the page's own), as a
    browser would post it unchanged."""
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return form_of(response.text, form_id)


def form_of(html: str, form_id: str | None = None) -> dict[str, list[str]]:
    form = ChangeForm(form_id)
    form.feed(html)
    assert "csrfmiddlewaretoken" in form.fields
    return form.fields


def ticked(fields: dict, name: str, on: bool) -> dict:
    """`fields` with the checkbox `name` ticked or not."""
    fields = {key: value for key, value in fields.items() if key != name}
    return {**fields, name: ["on"]} if on else fields
