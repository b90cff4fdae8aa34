"""JSON text every reader takes: what the project writes to disk holds no bare ``Infinity`` or ``NaN``.

Python's :mod:`json` writes a non-finite float as ``Infinity``, ``-Infinity`` or ``NaN``, which RFC 8259 (section 6)
does not allow: JavaScript's ``JSON.parse``, ``jq`` and strict parsers refuse the whole file. A report or case file
holds such values legitimately (the LSE of a query row that sees no key is -inf; an infinite error has infinite
headroom), so they are written as the strings ``"inf"``, ``"-inf"`` and ``"nan"``, which ``float()`` reads back.
"""

from __future__ import annotations

import json
import math

__all__ = ["dumps", "finite"]


def finite(value):
    """``value`` with every non-finite float in it (at any depth of dicts, lists and tuples) replaced by its string
    (``"inf"``, ``"-inf"``, ``"nan"``); everything else as it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(payload, **kwargs) -> str:
    """:func:`json.dumps` of :func:`finite` ``(payload)`` (``kwargs`` as json.dumps takes them).

    Raises:
        ValueError: a non-finite float that ``kwargs``'s ``default`` made of an object (never one of ``payload``).
    """
    return json.dumps(finite(payload), allow_nan=False, **kwargs)
