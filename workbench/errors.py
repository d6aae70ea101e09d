"""`SpecError`: bad user input, named by its field. Every layer raises it; the CLI and the panel show it as one line."""
from __future__ import annotations


class SpecError(ValueError):
    """Bad user input. `field` names the offending field; the message says what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
