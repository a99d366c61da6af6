"""What one comparison ended as: the single type every entry point hands to the pytest layer.

`plugin/settle.py` turns an Outcome into records, artifacts and the test's result; nothing
else decides whether a test passes, fails, errors or skips.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine import ComparisonResult


class Kind(enum.Enum):
    PASSED = "passed"  # compared, within tolerance
    MISMATCH = "mismatch"  # compared, out of tolerance: the test fails with the report
    CRASHED = "crashed"  # an isolated runner died: the test fails with the signal
    SKIPPED = "skipped"  # cannot run here (framework, GPU, precision): skip with the reason
    GOLDEN_MISSING = "golden missing"  # missing or damaged, nothing to compare with: fails
    FAILED = "failed"  # the test fails with the message (a golden that could not be written)
    GOLDEN_WRITTEN = "golden written"  # --trt-update-goldens wrote (or kept) it: the test passes
    ERROR = "error"  # a user mistake (model, shapes, feed ...): the message, no traceback


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    message: str = ""  # the reason or problem; for MISMATCH a header before the report
    results: tuple[ComparisonResult, ...] = ()  # one per iteration
    source: str = "compare"  # "compare_frameworks", "compare" or "golden"
    target: Mapping[str, Any] = field(default_factory=dict)  # the target runner's describe()
    reference: Mapping[str, Any] | None = None  # the reference's describe() ({"runner": ...})
    arrays: tuple[Any, Any] | None = None  # (actual, expected) of the iteration `worst` names
    golden: str | None = None  # the golden file involved, for the report
    note: str = ""  # added after the report (e.g. the nodes to keep in fp32)
    details: str = ""  # a framework's traceback (InferenceError), shown with --tb=long / -vv
    #: --trt-reduce: the smallest subgraph that still fails (session/reduce.py ReduceResult),
    #: written with the item's artifacts (plugin/settle.py)
    reduced: Any = None

    @classmethod
    def error(cls, exc: BaseException, source: str = "compare") -> Outcome:
        """One of our own errors (a TrtCompareError) as the message alone, its type first."""
        message = f"{type(exc).__name__}: {exc}"
        return cls(Kind.ERROR, message, source=source, details=getattr(exc, "details", ""))

    @property
    def worst(self) -> ComparisonResult | None:
        """The first failing iteration, else the one closest to failing."""
        if len(self.results) == 1:  # one iteration (a compare call): it, failing or not
            return self.results[0]
        failing = [r for r in self.results if not r.passed]
        if failing:
            return failing[0]
        return max(self.results, key=lambda r: r.margin, default=None)

    def report_text(self, verbosity: int = 0) -> str:
        """A compared outcome's message as every entry point prints it: the header, the
        failing iteration, the report at `verbosity`, the note and the golden's path."""
        worst = self.worst
        assert worst is not None
        head = self.message
        if self.source == "compare_frameworks" and not head:
            head = f"{runner_name(self.target)} vs {runner_name(self.reference)}: "
        text = head + self.failing_iteration + worst.report(verbosity)
        ran = ran_line(self.target)
        if ran:
            text += f"\n\n{ran}"
        if self.note:
            text += f"\n\n{self.note}"
        if self.golden:
            text += f"\n\ngolden: {self.golden}"
        return text

    @property
    def failing_iteration(self) -> str:
        """'iteration 2 of 3: ' when several iterations ran and one failed (counted from 0, as
        Polygraphy counts them), 'iteration 0 of 4 (3 of 4 fail): ' when several failed."""
        worst = self.worst
        if len(self.results) < 2 or worst is None or worst.passed:
            return ""
        failing = sum(not result.passed for result in self.results)
        several = f" ({failing} of {len(self.results)} fail)" if failing > 1 else ""
        return f"iteration {self.results.index(worst)} of {len(self.results)}{several}: "


def compared(
    results: Sequence[ComparisonResult],
    *,
    source: str,
    target: Mapping[str, Any] | None = None,
    reference: Mapping[str, Any] | None = None,
    arrays: tuple[Any, Any] | None = None,
    golden: str | None = None,
    header: str = "",
) -> Outcome:
    """PASSED or MISMATCH from comparison results. `arrays` are kept either way (artifacts of
    passing outputs, --trt-artifacts=all); the plugin drops them once the test is settled."""
    passed = all(r.passed for r in results)
    return Outcome(
        Kind.PASSED if passed else Kind.MISMATCH,
        header,
        tuple(results),
        source,
        dict(target or {}),
        None if reference is None else dict(reference),
        arrays,
        golden,
    )


def ran_text(description: Mapping[str, Any] | None) -> str | None:
    """The precision a runner really ran ('fp16: 48 of 52 nodes in float16, 4 kept in
    float32 (Softmax x2, ...)'), from its describe(); None where it does not say."""
    computed = (description or {}).get("computed")
    text = computed.get("text") if isinstance(computed, Mapping) else None
    return str(text) if text else None


def ran_line(description: Mapping[str, Any] | None) -> str:
    """The failure report's line of what the target ran: 'what ran: trt fp16: ...'."""
    text = ran_text(description)
    if text is None or description is None:
        return ""
    return f"what ran: {description.get('framework') or runner_name(description)} {text}"


def runner_name(description: Mapping[str, Any] | None) -> str | None:
    """'onnxrt-fp32' from a describe() dict (None when there is none)."""
    return None if description is None else str(description.get("runner"))


def runner_key(description: Mapping[str, Any] | None) -> str | None:
    """'onnxrt-fp32@3fa2c1d0': the runner's name and a digest of its description (its
    inference times left out), which tells apart two runners of one name (two models, two
    sets of options) in the JSON report's `runners`; the same in every xdist worker. None
    where no runner ran."""
    if not description or str(description.get("runner", "golden ")).startswith("golden "):
        return None  # no runner, or a golden as the reference (its file is in the record)
    kept = {key: value for key, value in description.items() if key != "inference_ms"}
    text = json.dumps(kept, sort_keys=True, default=str)
    return f"{description['runner']}@{hashlib.sha256(text.encode()).hexdigest()[:8]}"
