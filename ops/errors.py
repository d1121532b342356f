"""The operator's mistakes and the states a command refuses to act on: a message, exit 2."""

from collections.abc import Callable

# Asks a yes/no question; None: the caller passed --yes.
Confirm = Callable[[str], bool] | None


class OpsError(Exception):
    """Bad input (unknown stack, queue, function, malformed key) or a refused action."""
