"""The error DynDiff's functions raise for bad inputs (its own module, so `policy.quantile` can raise it too)."""


class DynDiffInputError(ValueError):
    """Raised when a DynDiff function gets inputs of the wrong shape or out-of-range settings."""
