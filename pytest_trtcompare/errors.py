"""Error classes: one per kind of user mistake, each with a message that names the culprit."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TrtCompareError(Exception):
    """Base class of every error pytest-trtcompare raises on purpose."""


class InvalidOutputError(TrtCompareError, TypeError):
    """An output handed to a comparison is not a numeric array (a string, an object, ...)."""


class ToleranceError(TrtCompareError, ValueError):
    """A tolerance, check statistic, rule or post-processing step is malformed."""


class ToleranceWarning(UserWarning):
    """A tolerance was given for an output name that the comparison does not have."""


class LayerDivergenceWarning(UserWarning):
    """A per-layer test with layers='report' passed on its model outputs while a layer
    diverged: the warning names the first divergence."""


class FeatureNotAvailableError(TrtCompareError):
    """An option or marker is registered but its feature has not landed yet."""


class ModelLoadError(TrtCompareError, ValueError):
    """A model file is missing, corrupt, or cannot be loaded by the framework."""


class FeedError(TrtCompareError, ValueError):
    """An input feed does not match the model: unknown name, wrong shape or dtype."""


class LayerMatchError(TrtCompareError, ValueError):
    """A per-layer comparison of a torch twin against its export matched none of the twin's
    modules (the twin is not the module that was exported): the message names the twin, its
    modules and the export's outer scopes."""


class StatisticError(TrtCompareError, TypeError):
    """A registered statistic (`register_statistic`) is malformed, gives other figures than
    it names, or raised while it was fed: the message names it and the output."""


class ReportError(TrtCompareError, ValueError):
    """A JSON report (--trt-report) that `trtcompare merge` cannot take: unreadable,
    damaged, of another report format or of another suite."""


class InferenceError(TrtCompareError, RuntimeError):
    """A framework raised while running a model (onnxruntime, onnx.reference, torch,
    TensorRT, a callable): the message names the runner, the feed, the node and op where the
    library says them, and the library's own last line; the library's exception is the
    cause (`__cause__`), shown with --tb=long or -vv."""

    #: The library's traceback without our frames, for --tb=long / -vv.
    details: str = ""


class InputDataError(TrtCompareError, ValueError):
    """Input data cannot be made or loaded (no shape for a dynamic dim, bad file ...).
    `shape_needed`: for an input whose shape is not known, (the problem, the input's name,
    an example shape), so an entry point other than a test can say how to give it."""

    def __init__(
        self, message: str, shape_needed: tuple[str, str, tuple[int, ...]] | None = None
    ) -> None:
        super().__init__(message)
        self.shape_needed = shape_needed

    def with_shape_flag(self, flag: str) -> InputDataError:
        """This error as a command whose `flag` gives shapes says it ('give its shape with
        --shapes x:[1,4]'); itself where no shape is missing."""
        if self.shape_needed is None:
            return self
        problem, name, example = self.shape_needed
        return InputDataError(
            f"{problem}: give its shape with {flag} {name}:[{','.join(map(str, example))}]"
        )


class RunnerSkip(TrtCompareError):
    """The comparison cannot run here; the plugin turns this into a skip with the reason."""


class FrameworkUnavailable(RunnerSkip):
    """The framework (or the GPU it needs) is not available; the message has the install hint."""


class PrecisionUnsupported(RunnerSkip):
    """The runner cannot run at the requested precision on this machine."""


class FP64Unavailable(TrtCompareError):
    """The fp64 check's float64 run cannot be made (the reference framework has no float64):
    an error with the reason, not a skip, since the check was the test's own choice."""


class UnknownFrameworkError(TrtCompareError, ValueError):
    """A runner name that no built-in or registered runner has (a typo, or a third-party
    runner whose package is not installed): the message lists the known names. A user
    mistake, so an error, never a skip."""


class RunnerOptionError(TrtCompareError, TypeError):
    """A runner option that the runner does not take (the message lists the ones it does), or
    a value of a kind the option does not take (the message says which it takes)."""


class MarkerError(TrtCompareError, ValueError):
    """A marker argument of the wrong type or value; the message names the test, the
    argument, what it got and what it takes."""


_PACKAGE = Path(__file__).resolve().parent


def user_code_raised(excinfo: Any) -> bool:
    """The `__tracebackhide__` of our frames between a test and the user's own code: hidden
    when the error was raised outside this package (a callable runner's function, a module's
    forward), so pytest shows the user's frames alone; shown for our own errors and bugs."""
    try:
        raised_in = Path(str(excinfo.traceback[-1].path)).resolve()
    except (IndexError, AttributeError, OSError):
        return False
    return _PACKAGE not in raised_in.parents
