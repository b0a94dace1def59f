"""The one "finite number" test of training/: a value read from a config, a reward option or a log row is
an ``int`` or ``float`` that is not NaN or +/-inf.

Decision: a bool is not a number (``weight: true`` in a config is a mistake, not 1.0) unless the caller says
so: the log readers (``bools=True``: training/report.py, training/best.py, training/metrics_log.py) keep reading
a bool as 0 / 1, as they did when each spelled the test out itself.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard


def finite_number(value: Any, *, bools: bool = False) -> TypeGuard[int | float]:
    """Whether ``value`` is an int or float (a bool only with ``bools``) that is finite."""
    if isinstance(value, bool) and not bools:
        return False
    return isinstance(value, int | float) and math.isfinite(value)
