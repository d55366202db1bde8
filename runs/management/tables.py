"""Plain-text tables for the management commands' reports."""


def render_table(headers: tuple[str, ...], rows: list[tuple]) -> str:
    """A Markdown-style table, columns padded to their widest cell."""
    cells = [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(x) for x in col) for col in zip(headers, *cells, strict=False)]
    line = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line.format(*headers), rule, *(line.format(*row) for row in cells)])
