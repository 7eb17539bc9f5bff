"""Docs that cannot rot: generated reference pages match the code, every Python snippet in
docs/ and the README runs, every YAML config block loads, every source path cited exists.

A ```python block preceded by the line ``<!-- no-run -->`` is not run (use it sparingly:
for snippets that need a Unity build, a GPU or a long training run).
"""
import dataclasses
import glob
import importlib.util
import os
import re
import subprocess
import sys
from typing import Union, get_args, get_origin, get_type_hints

import pytest
import yaml

from tftrainers import settings as S

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
PAGES = sorted(glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)) + [
    os.path.join(ROOT, "README.md")]
NO_RUN = "<!-- no-run -->"


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_reference",
                                                  os.path.join(DOCS, "gen_reference.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def blocks(language):
    """(page, line, text, runnable) of every fenced block of ``language`` in the pages."""
    found = []
    fence = re.compile(r"^(\s*)```\s*" + language + r"\s*$")
    for page in PAGES:
        lines = open(page, encoding="utf-8").read().splitlines()
        i = 0
        while i < len(lines):
            match = fence.match(lines[i])
            if not match:
                i += 1
                continue
            indent, start = len(match.group(1)), i
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i][indent:])
                i += 1
            before = next((lines[j].strip() for j in range(start - 1, -1, -1)
                           if lines[j].strip()), "")
            found.append((os.path.relpath(page, ROOT), start + 1, "\n".join(body) + "\n",
                          before != NO_RUN))
            i += 1
    return found


def test_the_generated_reference_pages_match_the_code():
    generator = load_generator()
    for path, render in generator.PAGES.items():
        with open(path, encoding="utf-8") as f:
            committed = f.read()
        assert committed == render(), (
            f"{os.path.relpath(path, ROOT)} is out of date: run python docs/gen_reference.py")


def settings_classes():
    """Every settings class a config file can reach from RunOptions."""
    seen, todo = [], [S.RunOptions, S.TorchSettings]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            todo += [t for t in f.metadata.get("types", {}).values()]
            todo += [t for t in f.metadata.get("key_types", {}).values()]
            stack = [hints[f.name]]
            while stack:
                tp = stack.pop()
                if dataclasses.is_dataclass(tp):
                    todo.append(tp)
                elif get_origin(tp) in (Union, list, dict):
                    stack += list(get_args(tp))
    return seen


def test_the_configuration_reference_lists_every_key_settings_accepts():
    page = open(os.path.join(DOCS, "reference", "configuration.md"), encoding="utf-8").read()
    keys = set(re.findall(r"^\| `([^`]+)` \|", page, flags=re.M))
    last = {key.split(".")[-1] for key in keys}
    missing = [f"{cls.__name__}.{f.name}" for cls in settings_classes()
               for f in dataclasses.fields(cls) if f.name not in last]
    assert not missing, f"not in docs/reference/configuration.md: {missing}"
    for cls in settings_classes():
        for key in list(cls._aliases) + list(cls._ignored):
            assert f"{key}`" in page, f"{cls.__name__}'s {key} is not in the reference"


def reference_tables():
    """{section heading: [key, ...]} of docs/reference/configuration.md's key tables."""
    page = open(os.path.join(DOCS, "reference", "configuration.md"), encoding="utf-8").read()
    tables = {}
    for section in re.split(r"^## ", page, flags=re.M)[1:]:
        keys = re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)
        if keys:
            tables[section.splitlines()[0]] = keys
    return tables


def test_each_settings_class_is_one_table_of_the_configuration_reference():
    """Every field of a settings class is a row of one table, under one key path (so a key
    cannot pass by a same-named key of another class), and every trainer type, reward signal
    and sampler type the loader accepts is named."""
    tables = reference_tables()
    for cls in settings_classes():
        names = [f.name for f in dataclasses.fields(cls)]
        found = False
        for keys in tables.values():
            prefixes = {key[:len(key) - len(name)] for key in keys for name in names
                        if key == name or key.endswith("." + name)}
            if any(all(prefix + name in keys for name in names) for prefix in prefixes):
                found = True
                break
        assert found, (f"{cls.__name__}: no table of docs/reference/configuration.md lists all "
                       f"of {names} under one key path")
    rows = {key: line for line in open(os.path.join(DOCS, "reference", "configuration.md"),
                                       encoding="utf-8")
            for key in re.findall(r"^\| `([^`]+)` \|", line)}
    keys = [key for table in tables.values() for key in table]
    field = {f.name: f for f in dataclasses.fields(S.TrainerSettings)}
    for trainer in field["hyperparameters"].metadata["types"]:
        assert f"`{trainer}`" in rows["trainer_type"], trainer
    for signal in field["reward_signals"].metadata["key_types"]:
        assert any(key.startswith(f"reward_signals.{signal}.") for key in keys), signal
    sampler = {f.name: f for f in dataclasses.fields(S.SamplerSettings)}["sampler_parameters"]
    (sampler_row,) = [line for key, line in rows.items() if key.endswith(".sampler_type")]
    for name in sampler.metadata["types"]:
        assert f"`{name}`" in sampler_row, name


def test_the_cli_reference_has_every_command_and_option():
    page = open(os.path.join(DOCS, "reference", "cli.md"), encoding="utf-8").read()
    for name, parser in load_generator().parsers().items():
        assert f"## {name}" in page
        for action in parser._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                assert f"`{option}" in page or f", {option}" in page, f"{name} {option}"


PYTHON = blocks("python")


@pytest.mark.parametrize("page, line, code, runnable", PYTHON,
                         ids=[f"{p}:{n}" for p, n, _, _ in PYTHON])
def test_python_snippets_run(page, line, code, runnable, tmp_path):
    if not runnable:
        pytest.skip(f"{page}:{line} is marked {NO_RUN}")
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", MPLBACKEND="Agg",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{page}:{line} failed:\n{done.stderr[-3000:]}"


YAML = [b for b in blocks("yaml") if re.search(r"^behaviors:", b[2], flags=re.M)]


@pytest.mark.parametrize("page, line, text, runnable", YAML,
                         ids=[f"{p}:{n}" for p, n, _, _ in YAML])
def test_yaml_configs_load_through_the_settings_loader(page, line, text, runnable):
    options = S.RunOptions.from_dict(yaml.safe_load(text), source=f"{page}:{line}")
    assert options.behaviors


def test_the_snippet_tests_found_blocks():
    assert len(PYTHON) >= 3 and len(YAML) >= 3


SOURCE_PATH = re.compile(r"`((?:tftrainers|tests|benchmarks|configs|export)/[\w./-]+)`")


def test_every_source_path_the_docs_cite_exists():
    missing = []
    for page in PAGES:
        text = open(page, encoding="utf-8").read()
        for path in SOURCE_PATH.findall(text):
            path = path.rstrip(".")
            if "*" in path or "<" in path or re.search(r"NAME|RUN|STEP|ENV\b", path):
                continue
            if not os.path.exists(os.path.join(ROOT, path)):
                missing.append(f"{os.path.relpath(page, ROOT)}: {path}")
    assert not missing, missing


def test_the_readme_starts_with_the_two_commands_ci_runs():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    first = re.search(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S).group(1)
    commands = first.strip().splitlines()
    assert len(commands) == 2
    assert "pip install" in commands[0] and "tftrainers-learn" in commands[0]
    assert "pip install" in commands[1] and "pytest" in commands[1]


def test_the_readme_links_point_at_files_that_exist():
    """The README is not built by MkDocs, so its links into docs/ are checked here."""
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    missing = [target for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
               if "://" not in target and not os.path.exists(os.path.join(ROOT, target))]
    assert not missing, missing


def test_every_architecture_anchor_the_code_cites_exists():
    """Code cites the architecture page by its anchors; each must be a heading's id."""
    page = open(os.path.join(DOCS, "dev", "architecture.md"), encoding="utf-8").read()
    anchors = set(re.findall(r"\{#([\w-]+)\}", page))
    cited = {}
    for folder in ("tftrainers", "tests", "configs", "benchmarks"):
        for path in glob.glob(os.path.join(ROOT, folder, "**", "*.*"), recursive=True):
            if not path.endswith((".py", ".yaml")):
                continue
            for anchor in re.findall(r"architecture\.md#([\w-]+)",
                                     open(path, encoding="utf-8").read()):
                cited.setdefault(anchor, os.path.relpath(path, ROOT))
    missing = {a: where for a, where in cited.items() if a not in anchors}
    assert cited and not missing, missing
