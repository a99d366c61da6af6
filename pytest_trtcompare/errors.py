"""Error classes: one per kind of user mistake, each with a message that names the culprit."""

from __future__ import annotations


class TrtCompareError(Exception):
    """Base class of every error pytest-trtcompare raises on purpose."""


class InvalidOutputError(TrtCompareError, TypeError):
    """An output handed to a comparison is not a numeric array (a string, an object, ...)."""


class ToleranceError(TrtCompareError, ValueError):
    """A tolerance, check statistic, rule or post-processing step is malformed."""


class ToleranceWarning(UserWarning):
    """A tolerance was given for an output name that the comparison does not have."""


class FeatureNotAvailableError(TrtCompareError):
    """An option or marker is registered but its feature has not landed yet."""
