"""The options' names: one namespace, `--trt-*`. The names from before it (`--update-goldens`,
`--goldens-dir`, `--trtcompare-report` ...) still work as deprecated aliases, listed beside
the new name in --help, and warn once per session naming the new one.

--update-goldens is left to another plugin or conftest that registers it (pytest-golden does):
our flag takes that alias only once the plugins and initial conftests registered theirs, and
gives it up after parsing, for a conftest loaded during collection (a usage error where the
command line gave it).
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Sequence
from typing import Any

import pytest

from ..session import option_table
from ..session.option_table import marker_options

#: Our markers, registered in pytest_configure (read before anything heavy is imported).
MARKERS = {
    "compare_frameworks": (
        "compare_frameworks(model=..., frameworks=[...], reference=None, golden=False, "
        "tolerance=..., outputs=None, seed=1, val_range=None, iterations=1, "
        + "".join(f"{declared.name}=None, " for declared in marker_options()).rstrip(", ")
        + "): run the model in each framework and compare the outputs (pytest-trtcompare)"
    ),
    "precisions": "precisions(*names): precisions this test runs at, e.g. 'fp16', 'bf16'",
    "shapes": "shapes(*shape_sets, ids=None): input shape sets, e.g. {'input': (1, 3, 224, 224)}",
}

#: deprecated name -> its --trt-* name
ALIASES = {
    "--update-goldens": "--trt-update-goldens",
    "--update-goldens-missing": "--trt-update-goldens-missing",
    "--strict-goldens": "--trt-strict-goldens",
    "--prune-goldens": "--trt-prune-goldens",
    "--goldens-dir": "--trt-goldens-dir",
    "--frameworks": "--trt-frameworks",
    "--trtcompare-report": "--trt-report",
    "--trtcompare-artifacts": "--trt-artifacts-dir",
    "--trtcompare-isolate": "--trt-isolate",
}
_ALIAS_OF = {new: old for old, new in ALIASES.items()}
#: where the parser notes the deprecated names a command line used
USED = "trtcompare_deprecated_names"


class OptionDeprecationWarning(pytest.PytestDeprecationWarning):
    """A deprecated option name was used; the message names the --trt-* one to write.
    Filter it as `pytest_trtcompare.OptionDeprecationWarning`."""


def names(option: str) -> tuple[str, ...]:
    """`--trt-goldens-dir` -> ('--trt-goldens-dir', '--goldens-dir'): the name and its alias."""
    alias = _ALIAS_OF.get(option)
    return (option,) if alias is None else (option, alias)


def deprecated_note(option: str) -> str:
    """For the help text: ' (--goldens-dir: deprecated alias)', or '' without an alias."""
    alias = _ALIAS_OF.get(option)
    return "" if alias is None else f" ({alias}: deprecated alias)"


class NamedOption(argparse.Action):
    """Stores the value (True for a flag, nargs=0) and notes a deprecated name when used."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True if self.nargs == 0 else values)
        if option_string in ALIASES:
            used = getattr(namespace, USED, ())
            if option_string not in used:
                setattr(namespace, USED, (*used, option_string))


def flag(**attrs: Any) -> dict[str, Any]:
    """The attributes of a store-true option that notes its deprecated name."""
    return {"action": NamedOption, "nargs": 0, "default": False, **attrs}


def warn_deprecated(config: pytest.Config) -> None:
    """One warning per deprecated name used, on the controller only (xdist workers parse the
    same command line). Warning filters that make it an error give a usage error saying so."""
    if hasattr(config, "workerinput"):
        return
    for old in getattr(config.option, USED, ()):
        new = ALIASES[old]
        warning = OptionDeprecationWarning(f"{old} is deprecated: write {new} (same meaning)")
        try:
            config.issue_config_time_warning(warning, stacklevel=2)
        except OptionDeprecationWarning:
            raise pytest.UsageError(
                f"{old} is deprecated: write {new} ({old} still works, but the warning filters "
                "of this run (-W, filterwarnings) turn its deprecation warning into an error)"
            ) from None


UPDATE_GOLDENS = "--trt-update-goldens"
UPDATE_GOLDENS_ALIAS = "--update-goldens"  # deprecated; left to another plugin that owns it
#: Installed plugins known to register --update-goldens themselves.
_UPDATE_GOLDENS_OWNERS = frozenset({"pytest-golden"})


def _option_names(parser: pytest.Parser, skip: Any = None) -> set[str]:
    groups = [*getattr(parser, "_groups", []), getattr(parser, "_anonymous", None)]
    return {
        name
        for group in groups
        if group is not None
        for option in group.options
        if option is not skip
        for name in option.names()
    }


def update_goldens_owned_elsewhere(parser: pytest.Parser, skip: Any = None) -> bool:
    if UPDATE_GOLDENS_ALIAS in _option_names(parser, skip):
        return True
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        dist = getattr(entry_point, "dist", None)
        if dist is not None and dist.name in _UPDATE_GOLDENS_OWNERS:
            return True
    return False


def add_update_goldens(group: Any, alias: bool) -> None:
    flags = (UPDATE_GOLDENS, UPDATE_GOLDENS_ALIAS) if alias else (UPDATE_GOLDENS,)
    note = deprecated_note(UPDATE_GOLDENS) if alias else ""
    declared = option_table.option("update_goldens")
    group.addoption(*flags, **flag(dest=declared.attribute, help=declared.help + note))


def _ours(group: Any) -> Any:
    return next((o for o in group.options if o.dest == "trtcompare_update_goldens"), None)


def _forget_strings(action: Any, strings: Sequence[str]) -> None:
    """Take option strings out of argparse's table (pytest 9 registers eagerly), so that
    another option may use them; AttributeError where argparse lacks these internals."""
    for name in strings:
        action.container._option_string_actions.pop(name, None)


def claim_update_goldens_alias(parser: pytest.Parser) -> None:
    """After the plugins and the initial conftests registered their options: our flag takes
    the deprecated --update-goldens too, unless one of them owns that name. Until then the
    flag is --trt-update-goldens alone, so none of them (a -p plugin loaded after us, a
    conftest) crashes pytest's argument parser by registering --update-goldens."""
    group = parser.getgroup("trtcompare")
    ours = _ours(group)
    if ours is None or update_goldens_owned_elsewhere(parser, skip=ours):
        return
    action = getattr(ours, "_action", None)
    if action is not None:  # pytest 8 builds argparse later: nothing registered yet
        try:
            action.container._remove_action(action)
            _forget_strings(action, action.option_strings)
        except (AttributeError, ValueError):  # an argparse without these internals
            return
    group.options.remove(ours)
    add_update_goldens(group, alias=True)


def release_update_goldens_alias(config: pytest.Config) -> None:
    """After the command line is parsed: a conftest loaded later (below the rootdir, not named
    on the command line) may register its own --update-goldens without crashing pytest's
    parser; LateUpdateGoldens says when that matters."""
    ours = _ours(config._parser.getgroup("trtcompare"))
    if ours is None or UPDATE_GOLDENS_ALIAS not in ours.names():
        return
    action = getattr(ours, "_action", None)  # pytest 9 builds argparse's actions eagerly
    if action is not None:
        try:
            _forget_strings(action, [UPDATE_GOLDENS_ALIAS])
        except AttributeError:
            return
    config.pluginmanager.register(LateUpdateGoldens(config), "trtcompare-late-options")


class LateUpdateGoldens:
    """A conftest loaded during collection that registers --update-goldens when the command
    line gave --update-goldens, which pytest read before that conftest, as our deprecated
    alias: a usage error naming the conftest and both ways out, instead of running with the
    flag given to the wrong owner."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.owner: str | None = None

    def pytest_plugin_registered(self, plugin: Any, plugin_name: str) -> None:
        if self.owner is not None or UPDATE_GOLDENS_ALIAS not in getattr(
            self.config.option, USED, ()
        ):
            return
        ours = _ours(self.config._parser.getgroup("trtcompare"))
        if UPDATE_GOLDENS_ALIAS in _option_names(self.config._parser, skip=ours):
            self.owner = str(getattr(plugin, "__file__", None) or plugin_name)

    def message(self) -> str:
        return (
            f"--update-goldens: {self.owner} registers its own --update-goldens, but pytest "
            "read the command line before it loaded that conftest (it is below the rootdir "
            "and its folder was not named on the command line), so --update-goldens went to "
            "pytest-trtcompare (its deprecated alias of --trt-update-goldens). Register the "
            "option in the rootdir's conftest.py (pytest-trtcompare then leaves "
            "--update-goldens to it), or run pytest with that folder, or write "
            "--trt-update-goldens to update pytest-trtcompare's goldens"
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self) -> None:
        # an xdist worker cannot end the session with a usage error: its tests error instead
        if self.owner is not None and not hasattr(self.config, "workerinput"):
            raise pytest.UsageError(self.message())

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self) -> None:
        if self.owner is not None:
            pytest.fail(self.message(), pytrace=False)


def ini_value(config: pytest.Config, name: str) -> Any:
    """config.getini; a bad boolean's error (pytest's names no key) names the key."""
    try:
        return config.getini(name)
    except (ValueError, pytest.UsageError) as exc:  # UsageError since pytest 9
        raise pytest.UsageError(f"ini {name}: {exc}; give true or false") from None
