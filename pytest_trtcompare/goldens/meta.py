"""What a golden records beside its tensors (docs/GOLDEN_FORMAT.md, `meta`): one typed object,
made where a golden is written and turned into the header's JSON in one place (`record`).

A golden read back keeps its metadata as the dict it holds (`Golden.meta`): goldens of other
versions and tools hold other keys.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

#: A field nobody gave: left out of the record (None is a value, written as null).
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()


@dataclass(frozen=True)
class GoldenMeta:
    test: str | None = UNSET  # the node id of the test that wrote it
    name: str | None = UNSET  # golden.check(name=); None: the test's one golden
    precision: str | None = UNSET
    seed: int | None = UNSET  # of the synthetic inputs stored with it
    shapes: dict[str, list[int]] | None = UNSET
    val_range: Any = UNSET  # inputs.val_range_record's form
    runner: Any = UNSET  # the target's describe() (model_digest ...), or a runner's name
    tolerance: Any = UNSET  # the tolerance it was written under (engine entry_record)
    plugin_version: str | None = UNSET
    source: str | None = UNSET  # "polygraphy": imported from a --save-outputs file
    iteration: int | None = UNSET  # the one Polygraphy iteration imported

    def record(self) -> dict[str, Any]:
        """The header's `meta`: every field given."""
        return {
            field.name: value
            for field in dataclasses.fields(self)
            if (value := getattr(self, field.name)) is not UNSET
        }

    def but(self, **changes: Any) -> GoldenMeta:
        """This metadata with some fields given (others kept)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def kept_from(cls, stored: dict[str, Any], *names: str) -> GoldenMeta:
        """The fields `names` of a golden's stored metadata, where it holds them."""
        return cls(**{name: stored[name] for name in names if name in stored})
