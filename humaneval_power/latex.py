"""LaTeX output: booktabs tables of a DataFrame, numbers to a stated precision, text escaped."""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import pandas as pd

from .errors import InputError

_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
            "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def escape(text: object) -> str:
    """Text with LaTeX's special characters escaped (safe in text mode)."""
    return "".join(_ESCAPES.get(ch, ch) for ch in str(text))


def _missing(value: object) -> bool:
    return value is None or (pd.api.types.is_scalar(value) and not isinstance(value, str) and bool(pd.isna(value)))


def format_number(value: object, digits: int, missing: str = "--") -> str:
    """A number to ``digits`` decimals (a minus sign as ``$-$``; NaN/None as ``missing``); text is escaped."""
    if _missing(value):
        return missing
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return escape(value)
    number = float(value)
    if math.isinf(number):
        return "$\\infty$" if number > 0 else "$-\\infty$"
    text = f"{number:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]  # no "-0.00"
    return "$-$" + text[1:] if text.startswith("-") else text


def booktabs_table(frame: pd.DataFrame, precision: Mapping[str, int] | None = None, *,
                   header: Mapping[str, str] | None = None, align: Sequence[str] | None = None,
                   missing: str = "--") -> str:
    """A booktabs ``tabular`` (toprule, midrule, bottomrule) of ``frame``, ready to ``\\input``.

    ``precision``: decimals per numeric column (a non-integer numeric column not named is an error, so every
    printed number has a stated precision; integer columns print whole);
    ``header``: LaTeX text replacing column names (not escaped; names are);
    ``align``: column alignments (default ``r`` for numeric columns, ``l`` otherwise). Text cells are escaped.
    """
    precision = dict(precision or {})
    header = dict(header or {})
    columns = list(frame.columns)
    unknown = [c for c in [*precision, *header] if c not in columns]
    if unknown:
        raise InputError(f"no column {unknown[0]!r} in the table (columns: {', '.join(map(str, columns))})")
    numeric = [c for c in columns if pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])]
    unstated = [c for c in numeric if c not in precision and not pd.api.types.is_integer_dtype(frame[c])]
    if unstated:
        raise InputError(f"state the precision of numeric column {unstated[0]!r}")
    bad = [c for c, d in precision.items() if not isinstance(d, int) or isinstance(d, bool) or d < 0]
    if bad:
        raise InputError(f"the precision of {bad[0]!r} must be a whole number of decimals >= 0")
    spec = list(align) if align is not None else ["r" if c in numeric else "l" for c in columns]
    if len(spec) != len(columns) or any(a not in ("l", "c", "r") for a in spec):
        raise InputError(f"align needs one of l, c, r per column ({len(columns)} columns)")

    def cell(column: str, value: object) -> str:
        if column in precision or column in numeric:
            return format_number(value, precision.get(column, 0), missing)
        return missing if _missing(value) else escape(value)

    lines = [f"\\begin{{tabular}}{{{''.join(spec)}}}", "\\toprule",
             " & ".join(header.get(c, escape(c)) for c in columns) + " \\\\", "\\midrule"]
    for row in frame.itertuples(index=False, name=None):
        lines.append(" & ".join(cell(c, v) for c, v in zip(columns, row)) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", ""]
    return "\n".join(lines)
