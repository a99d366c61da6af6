"""Every fenced code block of README.md and docs/**/*.md is run or checked, so the manual
cannot drift from the code. A block takes its rule from its language, or from a comment on
the line before it, `<!-- docs-block: RULE key=value ... -->`; a block no rule covers fails.

python blocks:
- `test file=F outcome="2 passed" [args="..."]`: written as F and run by pytest in the
  page's folder (one per page, shared by its blocks in order); the outcome must be that.
- `script [file=F]`: run by python in the page's folder (exit 0); a file= under
  docs/examples/ must equal the block (its docstring aside).
- `exec`: run by python after `PRELUDE` (numpy, pytest, the public names, `actual`,
  `expected`).
- `fragment`: parsed; its imports of pytest_trtcompare resolve, its calls of those names
  bind to their signatures, its markers exist and take the keywords given.
- `tested-by file=T`: the test T runs it, and reads this page.
bash / sh / console blocks: each command is checked: pytest's options against pytest's own
`--help` (the plugins loaded), `trtcompare` by its argparse parser (`parse_args`, or for a
synopsis its command and flags), `polygraphy run` flags against docs/POLYGRAPHY.md's table,
a script's flags in the script; commands of the shell (`SHELL`) pass unchecked, any other
program fails. `command run` also runs each line in the page's folder (exit 0).
text / bare blocks:
- `output script=S` or `output cmd="C" exact`: what S or C prints now, exactly.
- `recorded cmd="C"`: a recording of C's output; C is checked as a command.
- `recorded phrases="a|b"`: an excerpt; each phrase is in it and is text the package writes.
- `$ ` lines (a transcript): each is checked as a command.
ini: parsed, its keys ini keys of ours or pytest's, and pytest starts with it (our checks of
ini values pass). toml: parsed; a tolerance file is read by the plugin's reader, a
pyproject's `[tool.pytest.ini_options]` checked as ini. json: parsed (`...` left out), every
key a string the package writes.

Pages whose blocks another test checks are `OTHER_TESTS`; a page may name a script to run
in its folder first, `<!-- docs-setup: docs/examples/make_model.py -->`.
"""

from __future__ import annotations

import ast
import configparser
import functools
import importlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.toml import loads as toml_loads

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: pages whose blocks another test runs or checks, and that test
OTHER_TESTS = {
    "docs/troubleshooting.md": "tests/test_docs_troubleshooting.py",
    "docs/reference/cli-help.md": "tests/test_docs_reference.py",
}
#: commands of the shell, not ours, that a block may use around ours (not checked)
SHELL = {"cd", "mkdir", "git", "pip", "sed", "tar", "diff", "done", "for", "bash", "tox"}
#: what `exec` blocks start from: the names a page's fragments take as given
PRELUDE = """
import numpy as np
import pytest
from pytest_trtcompare import *

rng = np.random.default_rng(0)
expected = {
    "logits": rng.standard_normal((8, 1000)).astype(np.float32),
    "probs": rng.random((8, 1000)).astype(np.float32),
}
actual = {name: value + np.float32(1e-6) for name, value in expected.items()}
"""
TIMEOUT = 300


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    rule: str = ""
    args: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _annotation(comment: str) -> tuple[str, dict[str, str]]:
    words = shlex.split(comment.removeprefix("<!-- docs-block:").removesuffix("-->"))
    rule, args = words[0], {}
    for word in words[1:]:
        key, _, value = word.partition("=")
        args[key] = value
    return rule, args


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        match = re.match(r"^(\s*)```(\S*)", lines[i])
        if not match:
            i += 1
            continue
        indent, end = match.group(1), i + 1
        while not lines[end].startswith(f"{indent}```"):
            end += 1
        text = "\n".join(line.removeprefix(indent) for line in lines[i + 1 : end]) + "\n"
        block = Block(page, i + 1, match.group(2), text)
        before = i - 1
        while before >= 0 and lines[before].strip().startswith("<!--"):
            if lines[before].strip().startswith("<!-- docs-block:"):
                block.rule, block.args = _annotation(lines[before].strip())
            before -= 1
        found.append(block)
        i = end + 1
    return found


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _run(command: list[str] | str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=folder,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        shell=isinstance(command, str),
    )


# -- commands ----------------------------------------------------------------------------


@functools.cache
def _pytest_help() -> tuple[frozenset[str], frozenset[str]]:
    """The options and ini keys pytest knows with the plugin (and the dev plugins) loaded."""
    text = _run([sys.executable, "-m", "pytest", "--help"], Path("/")).stdout
    options, ini_keys, in_ini = set(), set(), False
    for line in text.splitlines():
        if line.startswith("[pytest] ini-options"):
            in_ini = True
        elif in_ini and re.match(r"^  \w", line):
            ini_keys.add(line.split()[0])
        elif not in_ini and re.match(r"^  -", line):  # an option, not a wrapped help line
            options.update(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", line.split("  ")[1]))
    return frozenset(options), frozenset(ini_keys)


def _check_pytest(words: list[str]) -> None:
    options, ini_keys = _pytest_help()
    for i, word in enumerate(words):
        if not word.startswith("-") or word == "-":
            continue
        name = word.split("=", 1)[0]
        if not name.startswith("--"):
            name = name[:2]  # -rA, -vv, -n2: the option is its first letter
        assert name in options, f"pytest knows no option {name}"
        if name == "-o":
            key = words[i + 1].split("=", 1)[0]
            assert key in ini_keys, f"pytest knows no ini key {key}"


def _subparsers() -> dict[str, object]:
    import argparse

    from pytest_trtcompare.cli import build_parser

    parser = build_parser()
    for action in parser._actions:  # argparse offers no public way to its subparsers
        if isinstance(action, argparse._SubParsersAction):
            return {"": parser, **action.choices}
    return {"": parser}


def _check_trtcompare(words: list[str]) -> None:
    from pytest_trtcompare.cli import build_parser

    synopsis = any(re.search(r"[\[\]|]|\.\.\.|^[A-Z]+", w) for w in words)
    if not synopsis:
        try:
            build_parser().parse_args(words)
        except SystemExit as error:
            raise AssertionError(f"trtcompare {' '.join(words)}: argparse refused it") from error
        return
    # a synopsis (`trtcompare show FILE [--meta]`): its command and flags exist
    parsers = _subparsers()
    command = words[0] if words and not words[0].startswith("-") else ""
    assert command in parsers, f"trtcompare has no command {command}"
    known = {s for a in parsers[command]._actions for s in a.option_strings}  # type: ignore[attr-defined]
    for word in words:
        flag = word.strip("[]").split("=", 1)[0]
        if flag.startswith("-") and flag not in ("-", "|"):
            assert flag in known, f"trtcompare {command} has no flag {flag}"


def _check_polygraphy(words: list[str]) -> None:
    from pytest_trtcompare.cli.polygraphy_flags import FLAGS

    assert words[0] == "run", "the manual shows only `polygraphy run`"
    known = {row.flag for row in FLAGS}
    for word in words[1:]:
        if word.startswith("--"):
            assert word in known, f"docs/POLYGRAPHY.md's table lacks polygraphy's {word}"


def _check_script(words: list[str]) -> None:
    script = ROOT / words[0]
    assert script.is_file(), f"no script {words[0]}"
    source = script.read_text(encoding="utf-8")
    for word in words[1:]:
        flag = word.split("=", 1)[0]
        if flag.startswith("--"):
            assert f'"{flag}"' in source, f"{words[0]} takes no {flag}"


def _simple_commands(text: str) -> list[list[str]]:
    text = re.sub(r"\\\n", " ", text)
    # a synopsis' alternatives, `[--update | --update-missing]`, are not a pipe
    text = re.sub(r"\[[^\]\n]*\]", lambda m: m.group(0).replace("|", " "), text)
    commands = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        words = list(lexer)
        skip = False
        for word in words:
            if skip:
                skip = False
            elif word in (">", ">>", "<"):
                skip = True
            elif word in ("&&", "||", ";", "|", "&"):
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
    return [c for c in commands if c]


def check_command(words: list[str]) -> str:
    """Checks one command; returns what it was (for the counts)."""
    while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in ("time", "do")):
        words = words[1:]
    if not words:
        return "shell"
    program = Path(words[0]).name
    if program == "pytest":
        _check_pytest(words[1:])
        return "pytest"
    if re.fullmatch(r"python[\d.]*", program):
        if words[1:3] == ["-m", "pytest"]:
            _check_pytest(words[3:])
            return "pytest"
        if words[1:3] == ["-m", "venv"]:
            return "shell"
        _check_script(words[1:])
        return "script"
    if program == "trtcompare":
        _check_trtcompare(words[1:])
        return "trtcompare"
    if program == "polygraphy":
        _check_polygraphy(words[1:])
        return "polygraphy"
    assert program in SHELL, f"a command no rule covers: {' '.join(words)}"
    return "shell"


# -- python ------------------------------------------------------------------------------


def _outcome(text: str) -> dict[str, int]:
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|errors?|skipped)", text)}


def _check_fragment(block: Block) -> None:
    from pytest_trtcompare.plugin.names import MARKERS
    from pytest_trtcompare.session.spec import arguments

    tree = ast.parse(block.text)
    imported: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_trt"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
                imported[alias.asname or alias.name] = getattr(module, alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        keywords = [k.arg for k in node.keywords if k.arg is not None]
        if name.startswith("pytest.mark."):
            marker = name.removeprefix("pytest.mark.")
            assert marker in MARKERS or marker in ("parametrize", "skip", "xfail"), marker
            if marker == "compare_frameworks":
                unknown = set(keywords) - set(arguments())
                assert not unknown, f"compare_frameworks takes no {sorted(unknown)}"
        elif name in imported and callable(imported[name]):
            signature = inspect.signature(imported[name])  # type: ignore[arg-type]
            signature.bind_partial(*node.args, **dict.fromkeys(keywords))


def check_python(block: Block, folder: Path) -> None:
    if block.rule == "test":
        name = block.args["file"]
        (folder / name).write_text(block.text, encoding="utf-8")
        extra = shlex.split(block.args.get("args", ""))
        result = _run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", name, *extra], folder
        )
        last = result.stdout.strip().splitlines()[-1]
        assert _outcome(last) == _outcome(block.args["outcome"]), result.stdout[-3000:]
    elif block.rule == "script":
        name = block.args.get("file", "block.py")
        if name.startswith("docs/examples/"):
            kept = (ROOT / name).read_text(encoding="utf-8")
            assert kept.split('"""\n\n', 1)[-1] == block.text, f"the block differs from {name}"
            name = Path(name).name
        (folder / name).write_text(block.text, encoding="utf-8")
        result = _run([sys.executable, name], folder)
        assert result.returncode == 0, result.stderr[-3000:]
    elif block.rule == "exec":
        (folder / "block.py").write_text(PRELUDE + block.text, encoding="utf-8")
        result = _run([sys.executable, "block.py"], folder)
        assert result.returncode == 0, result.stderr[-3000:]
    elif block.rule == "fragment":
        _check_fragment(block)
    elif block.rule == "tested-by":
        test = ROOT / block.args["file"]
        page = str(block.page.relative_to(ROOT))
        assert page in test.read_text(encoding="utf-8"), f"{test} does not read {page}"
    else:
        raise AssertionError("a python block needs a rule: test, script, exec or fragment")


# -- other blocks ------------------------------------------------------------------------


def check_output(block: Block, folder: Path) -> None:
    if block.rule == "output":
        if "script" in block.args:
            printed = _run([sys.executable, str(ROOT / block.args["script"])], folder).stdout
        else:
            assert "exact" in block.args, "an output block runs its command: add exact"
            printed = _run(block.args["cmd"], folder).stdout
        assert printed.rstrip("\n") == block.text.rstrip("\n"), printed
    elif block.rule == "recorded" and "cmd" in block.args:
        for words in _simple_commands(block.args["cmd"]):
            check_command(words)
    elif block.rule == "recorded":
        source = "".join(
            p.read_text(encoding="utf-8") for p in (ROOT / "pytest_trtcompare").rglob("*.py")
        )
        for phrase in block.args["phrases"].split("|"):
            assert phrase in block.text, f"the block does not show {phrase!r}"
            assert phrase in source, f"the package writes no {phrase!r}"
    elif "\n$ " in "\n" + block.text:
        lines = [line[2:] for line in block.text.splitlines() if line.startswith("$ ")]
        for words in _simple_commands("\n".join(lines)):
            check_command(words)
    else:
        raise AssertionError("an output block needs a rule: output, recorded, or `$ ` lines")


def check_ini(block: Block, folder: Path) -> None:
    from pytest_trtcompare.session.option_table import OPTIONS

    parser = configparser.ConfigParser()
    parser.read_string(block.text)
    ours = {o.ini for o in OPTIONS}
    for key in parser["pytest"]:
        assert key in ours or key in _pytest_help()[1], f"no ini key {key}"
    (folder / "pytest.ini").write_text(block.text, encoding="utf-8")
    result = _run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q"], folder)
    (folder / "pytest.ini").unlink()
    assert result.returncode in (0, 5), result.stdout[-2000:] + result.stderr[-2000:]


def check_toml(block: Block, folder: Path) -> None:
    data = toml_loads(block.text)
    if "calibration" in data:
        from pytest_trtcompare.reports.calibration import read_calibration

        path = folder / "trtcompare-tolerances.toml"
        path.write_text(block.text, encoding="utf-8")
        assert read_calibration(path)
    else:
        check_ini(Block(block.page, block.line, "ini", _as_ini(data)), folder)


def _as_ini(data: dict[str, object]) -> str:
    options = data["tool"]["pytest"]["ini_options"]  # type: ignore[index]
    return "[pytest]\n" + "".join(f"{k} = {v}\n" for k, v in options.items())


def check_json(block: Block) -> None:
    text = re.sub(r",\s*\.\.\.", "", block.text).replace("{...}", "{}").replace("... ", "")
    keys = re.findall(r'"([\w:/.]+)":', text)
    json.loads(text)
    source = "".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "pytest_trtcompare").rglob("*.py")
    )
    for key in keys:
        stem = key.split(":")[0].split("/")[0]
        assert f'"{stem}' in source or f"'{stem}" in source, f"the package writes no key {key}"


def check_block(block: Block, folder: Path) -> str:
    """Checks one block; returns the rule that covered it (for the counts)."""
    lang = block.lang
    if lang == "python":
        check_python(block, folder)
        return f"python {block.rule}"
    if lang in ("bash", "sh", "console") and "\n$ " not in "\n" + block.text:
        kinds = [check_command(words) for words in _simple_commands(block.text)]
        if block.rule == "command" and "run" in block.args:
            for line in re.sub(r"\\\n", " ", block.text).splitlines():
                if line.strip() and not line.startswith("#"):
                    result = _run(line, folder)
                    assert result.returncode == 0, (
                        f"{line}: {result.stdout[-2000:]}{result.stderr[-2000:]}"
                    )
            return "command run"
        return "command " + ",".join(sorted(set(kinds)))
    if lang in ("text", "", "console"):
        check_output(block, folder)
        return f"output {block.rule or 'transcript'}"
    if lang == "ini":
        check_ini(block, folder)
        return "ini"
    if lang == "toml":
        check_toml(block, folder)
        return "toml"
    if lang == "json":
        check_json(block)
        return "json"
    raise AssertionError(f"no rule covers a {lang or 'bare'} block")


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_block_of_the_page_is_run_or_checked(page, tmp_path):
    other = OTHER_TESTS.get(_page_id(page))
    found = blocks(page)
    for setup in re.findall(r"<!-- docs-setup: (\S+) -->", page.read_text(encoding="utf-8")):
        assert _run([sys.executable, str(ROOT / setup)], tmp_path).returncode == 0, setup
    if other is not None:
        assert not found or (ROOT / other).is_file(), f"{other} should check {_page_id(page)}"
        return
    for block in found:
        try:
            check_block(block, tmp_path)
        except Exception as error:
            raise AssertionError(
                f"{block.where} ({block.lang or 'bare'} block): {error}"
            ) from error


def test_the_manual_has_blocks_of_every_rule():
    rules = {b.rule for page in PAGES for b in blocks(page)}
    assert {"test", "script", "exec", "fragment", "output", "recorded", "command"} <= rules


def test_a_block_no_rule_covers_fails(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n```\n\n```yaml\na: 1\n```\n", encoding="utf-8")
    python, yaml = blocks(page)
    with pytest.raises(AssertionError, match="needs a rule"):
        check_block(python, tmp_path)
    with pytest.raises(AssertionError, match="no rule covers a yaml block"):
        check_block(yaml, tmp_path)


@pytest.mark.parametrize(
    "command, message",
    [
        ("pytest --trt-precison fp16", "pytest knows no option --trt-precison"),
        ("pytest -o trtcompare_tolerance=x", "pytest knows no ini key trtcompare_tolerance"),
        ("trtcompare diff a.npz b.npz --atoll 1", "argparse refused it"),
        ("trtcompare show FILE [--metadata]", "trtcompare show has no flag --metadata"),
        ("python bench/bench_compare.py --sizez 16M", "takes no --sizez"),
        ("curl https://example.com", "a command no rule covers"),
    ],
)
def test_a_wrong_command_fails(command, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        for words in _simple_commands(command):
            check_command(words)
