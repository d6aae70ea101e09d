"""A DataFrame that keeps its numbers but shows them as people read them (`workbench.units.readable_frame`).

`Run.tasks()` and `Run.progress()` return one: code reads `share` as 0.7167 and `default_us` in microseconds, while a
notebook shows '72 %' and one time unit per column. Only the display hooks differ from a DataFrame's; every
operation that returns a new frame returns a plain-data one of this class (pandas' `_constructor`).
"""
from __future__ import annotations

import pandas as pd

from workbench.units import readable_frame


class ReadableFrame(pd.DataFrame):
    """A pandas DataFrame displayed through `readable_frame` (its `__repr__`, `_repr_html_` and `to_string`
    without arguments); `.plain()` gives the plain DataFrame."""

    @property
    def _constructor(self):  # noqa: ANN202 - pandas' subclassing hook
        return ReadableFrame

    def plain(self) -> pd.DataFrame:
        return pd.DataFrame(self)

    def __repr__(self) -> str:
        return repr(readable_frame(self.plain()))

    def _repr_html_(self) -> str | None:
        return readable_frame(self.plain())._repr_html_()


def readable(df: pd.DataFrame) -> ReadableFrame:
    """`df` shown readably: the same data and columns (see `readable_frame`)."""
    return ReadableFrame(df)
