"""The import rules docs/dev/architecture.md#layers states, checked on the source: the acting
side and the envs import no trainer, no reward provider and no TensorFlow at module level;
reward providers import no trainer; settings.py and returns.py import nothing of ours."""
import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tftrainers")


def module_imports(path):
    """Names imported by the module's top-level statements (not inside functions)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    names = []
    for node in tree.body:
        for sub in ([node] if not isinstance(node, (ast.If, ast.Try)) else ast.walk(node)):
            if isinstance(sub, ast.Import):
                names += [alias.name for alias in sub.names]
            elif isinstance(sub, ast.ImportFrom) and sub.module and not sub.level:
                names.append(sub.module)
    return names


def files(*parts):
    root = os.path.join(PACKAGE, *parts)
    if root.endswith(".py"):
        return [root]
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".py")]


RULES = [
    (("envs",), ("tftrainers.trainers", "tftrainers.rewards", "tensorflow", "keras")),
    (("processing",), ("tftrainers.trainers", "tftrainers.rewards", "tensorflow", "keras")),
    (("acting",), ("tftrainers.trainers", "tftrainers.rewards", "tensorflow", "keras")),
    (("rewards",), ("tftrainers.trainers",)),
    (("settings.py",), ("tftrainers",)),
    (("returns.py",), ("tftrainers",)),
]


@pytest.mark.parametrize("where, forbidden", RULES, ids=["/".join(w) for w, _ in RULES])
def test_imports_point_down(where, forbidden):
    bad = [f"{os.path.relpath(path, PACKAGE)} imports {name}"
           for path in files(*where) for name in module_imports(path)
           if any(name == f or name.startswith(f + ".") for f in forbidden)]
    assert not bad, bad
