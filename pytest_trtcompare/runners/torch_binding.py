"""How a torch model takes a feed: by keyword, as Python would, never by a guessed position.

`ForwardSignature` reads `forward` (or a function) once. A feed entry named like a parameter
is passed by keyword (by position only for positional-only parameters); parameters without a
default must be fed, the others keep their defaults when the feed lacks them; `**kwargs`
takes any other name, `*args` takes the remaining entries in feed order. `input_names=[...]`
names the inputs the model takes: those that are forward's parameters go by keyword, the
others are the first positional arguments, in order.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import FeedError, RunnerOptionError


@dataclass(frozen=True)
class Parameter:
    name: str
    positional_only: bool
    keyword_only: bool
    required: bool
    annotation: str = ""  # 'torch.LongTensor | None': the dtype the code says, if any


@dataclass(frozen=True)
class ForwardSignature:
    """The parameters a model's forward takes; picklable, so an isolated runner can send it."""

    parameters: tuple[Parameter, ...] = ()
    var_positional: bool = False
    var_keyword: bool = False
    text: str = "forward(...)"
    positional_names: tuple[str, ...] | None = None  # input_names=: the inputs' names
    known: bool = True  # False: the signature could not be read (a builtin, a C extension)

    @classmethod
    def of(cls, target: Any, input_names: Sequence[str] | None = None) -> ForwardSignature:
        names = tuple(input_names) if input_names else None
        schema = getattr(target, "schema", None)  # a TorchScript method: no Python signature
        if schema is not None:
            scripted = tuple(
                Parameter(a.name, False, bool(a.kwarg_only), not a.has_default_value())
                for a in schema.arguments
                if a.name != "self"
            )
            text = f"forward({', '.join(p.name for p in scripted)})"
            return cls(scripted, text=text, positional_names=names)
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            return cls(text="forward(...)", positional_names=names, known=False)
        parameters, var_positional, var_keyword = [], False, False
        for p in signature.parameters.values():
            if p.name == "self":
                continue
            if p.kind is p.VAR_POSITIONAL:
                var_positional = True
            elif p.kind is p.VAR_KEYWORD:
                var_keyword = True
            else:
                parameters.append(
                    Parameter(
                        p.name,
                        positional_only=p.kind is p.POSITIONAL_ONLY,
                        keyword_only=p.kind is p.KEYWORD_ONLY,
                        required=p.default is p.empty,
                        annotation="" if p.annotation is p.empty else str(p.annotation),
                    )
                )
        text = _signature_text(getattr(target, "__name__", "forward"), signature)
        # a RunnerOptionError where input_names= gives more positional inputs than forward
        # takes (no *args)
        keyword = {p.name for p in parameters if not p.positional_only}
        positional = [name for name in names or () if name not in keyword]
        room = [p.name for p in parameters if not p.keyword_only]
        if len(positional) > len(room) and not var_positional:
            raise RunnerOptionError(
                f"torch runner: input_names={list(names or ())}: {positional} go by "
                f"position, but {text} takes {len(room)} input(s) by position"
            )
        return cls(tuple(parameters), var_positional, var_keyword, text, names)

    def by_position(self) -> ForwardSignature:
        """The same parameters, each taken by position only."""
        parameters = tuple(dataclasses.replace(p, positional_only=True) for p in self.parameters)
        return dataclasses.replace(self, parameters=parameters)

    @property
    def required(self) -> list[str]:
        return [p.name for p in self.parameters if p.required]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def input_names(self) -> list[str]:
        """The inputs the model is known to need: `input_names`, else the required
        parameters, else (every parameter has a default) the first one; [] for `*args`."""
        if self.positional_names:
            return list(self.positional_names)
        if self.required:
            return self.required
        return [p.name for p in self.parameters if not p.keyword_only][:1]

    def annotated_dtype(self, name: str) -> str | None:
        """The dtype a parameter's annotation names (`torch.LongTensor` -> int64), if any."""
        annotation = next((p.annotation for p in self.parameters if p.name == name), "")
        return next((dtype for word, dtype in _ANNOTATED_DTYPES if word in annotation), None)

    def bind(self, feed: Mapping[str, Any], runner: str) -> tuple[list[Any], dict[str, Any]]:
        """(args, kwargs) for the call; FeedError for a missing required or an unknown name."""
        if self.positional_names is not None:
            return self._bind_positional(feed, runner)
        if not self.known:
            return list(feed.values()), {}
        by_name = {p.name: p for p in self.parameters}
        unknown = [name for name in feed if name not in by_name]
        if unknown and not (self.var_keyword or self.var_positional):
            raise FeedError(
                f"{runner}: feed has unknown input(s) {unknown}; {self.text} takes "
                f"{', '.join(self.names) or 'no named inputs'}"
            )
        missing = [name for name in self.required if name not in feed]
        if missing:
            raise FeedError(
                f"{runner}: feed lacks required input(s) {missing} of {self.text}; "
                f"it has {list(feed)}"
            )
        star = unknown if not self.var_keyword else []  # *args takes them, in feed order
        if star:  # every parameter that can come before *args is passed by position
            head = [p for p in self.parameters if not p.keyword_only]
            last = len(head) - 1
        else:
            head = [p for p in self.parameters if p.positional_only]
            last = max((i for i, p in enumerate(head) if p.name in feed), default=-1)
        args = []
        for p in head[: last + 1]:
            if p.name not in feed:
                raise FeedError(
                    f"{runner}: {self.text} takes {p.name!r} by position before inputs the "
                    f"feed has; feed it too (the feed has {list(feed)})"
                )
            args.append(feed[p.name])
        args.extend(feed[name] for name in star)
        taken = {p.name for p in head[: last + 1]} | set(star)
        kwargs = {name: value for name, value in feed.items() if name not in taken}
        return args, kwargs

    def _bind_positional(
        self, feed: Mapping[str, Any], runner: str
    ) -> tuple[list[Any], dict[str, Any]]:
        """`input_names=`: a name that is one of forward's parameters (not positional-only)
        goes by keyword, as Python would bind it; the others, in order, by position (they
        fill the leading positional parameters, then `*args`)."""
        assert self.positional_names is not None
        names = self.positional_names
        missing = [name for name in names if name not in feed]
        unknown = [name for name in feed if name not in names]
        if missing or unknown:
            problem = f"lacks {missing}" if missing else f"has unknown input(s) {unknown}"
            raise FeedError(
                f"{runner}: feed {problem}; input_names={list(names)} are the inputs of {self.text}"
            )
        by_keyword = (
            {p.name for p in self.parameters if not p.positional_only} if self.known else ()
        )
        positional = [name for name in names if name not in by_keyword]
        filled = [p.name for p in self.parameters if not p.keyword_only][: len(positional)]
        twice = [name for name in filled if name in names and name not in positional]
        if twice:
            raise FeedError(
                f"{runner}: input_names={list(names)}: {positional} go by position to "
                f"{filled} of {self.text}, which input_names also names ({twice}); name the "
                "inputs as forward's parameters, or give only positional names"
            )
        return [feed[name] for name in positional], {n: feed[n] for n in names if n in by_keyword}


_ANNOTATED_DTYPES = (
    ("LongTensor", "int64"),
    ("IntTensor", "int32"),
    ("BoolTensor", "bool"),
    ("HalfTensor", "float16"),
    ("BFloat16Tensor", "bfloat16"),
    ("DoubleTensor", "float64"),
)


def _signature_text(name: str, signature: inspect.Signature, limit: int = 160) -> str:
    """'forward(input_ids=None, attention_mask=None, ..., **kwargs)': names and defaults
    only (annotations make HF signatures unreadably long)."""
    parts, slash_done, star_done = [], True, False
    for p in signature.parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.POSITIONAL_ONLY:
            slash_done = False
        elif not slash_done:
            parts.append("/")
            slash_done = True
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        elif p.default is p.empty:
            parts.append(p.name)
        else:  # a long default as '...'
            default = repr(p.default)
            parts.append(f"{p.name}={default if len(default) <= 12 else '...'}")
    if not slash_done:
        parts.append("/")
    text = f"{name}({', '.join(parts)})"
    if len(text) > limit:
        text = text[: limit - 5].rsplit(", ", 1)[0] + ", ...)"
    return text
