"""`SpecError`: bad user input, named by its field. Every layer raises it; the CLI and the panel show it as one line.
`last_line`: any other error, as one line."""
from __future__ import annotations


class SpecError(ValueError):
    """Bad user input. `field` names the offending field; the message says what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def last_line(err: BaseException, limit: int = 300) -> str:
    """An error's last line, at most `limit` characters (TVM's messages carry their C++ trace above it); its type's
    name when it says nothing."""
    text = str(err).strip()
    return (text.splitlines()[-1] if text else type(err).__name__)[:limit]
