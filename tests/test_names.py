"""Names imported across modules are public: no module imports or reaches for another
module's underscore name (issue 25).

An underscore says "only this module relies on it": a name another module imports is part of
that module's surface and is named as such. Standard-library and third-party modules are not
checked; nor are dunder names (__version__, __all__).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("console", "api", "observability", "archive", "approvals", "runs", "audit", "demo",
            "tests")


def project_files():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def absolute(module, node, is_package):
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def underscore_uses(path, modules):
    """(line, text) for each underscore name this file takes from another project module
    (modules: the names of every project module)."""
    module = module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    bound = {}  # local name -> project module it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = absolute(module, node, path.name == "__init__.py")
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in modules:
                    bound[alias.asname or alias.name] = full
                elif source in modules and source != module and private(alias.name):
                    found.append((node.lineno, f"from {source} import {alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    bound[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                target = ".".join([bound[value.id], *reversed(chain[1:])])
                if target in modules and target != module:
                    found.append((node.lineno, f"{target}.{node.attr}"))
    return found


def test_no_module_takes_another_modules_underscore_names():
    # The module names are read once: reading them again for each file made this test
    # take a minute.
    files = list(project_files())
    modules = {module_name(path) for path in files}
    uses = [f"{path.relative_to(ROOT)}:{line}: {text}"
            for path in files for line, text in underscore_uses(path, modules)]
    assert not uses, "underscore names used across modules:\n" + "\n".join(uses)
