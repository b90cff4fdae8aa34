"""The contract's masks as one value: causal or not, windowed or not, and where the diagonal lies.

A :class:`Mask` is what the contract's visibility rule (:func:`jfa_verify.core.contract.key_range`)
reads besides the lengths: the causal flag, whether a sliding window applies, and the alignment of
the diagonal both are placed on. Its string forms are parsed and printed here only:

* a mask *kind*, what a kernel declares it handles (``Capabilities(masks=...)``) and what a call is
  (:attr:`jfa_verify.core.contract.JaggedProblem.mask`): ``none``, ``causal``, ``window`` or
  ``causal+window`` (:data:`MASKS`);
* a mask *class*, the contract model's ``mask`` dimension (:mod:`jfa_verify.cases.dimensions`): a kind
  other than ``"none"`` with its alignment, e.g. ``"causal+window/bottom_right"``; ``"none"`` has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from jfa_verify.core.errors import InvalidInput

__all__ = ["CAUSAL_ALIGNMENTS", "MASKS", "Mask"]

CAUSAL_ALIGNMENTS = ("top_left", "bottom_right")

# (causal, windowed) -> the kind's name: the one table of the spellings.
_KINDS = {(False, False): "none", (True, False): "causal", (False, True): "window", (True, True): "causal+window"}
_FLAGS = {name: flags for flags, name in _KINDS.items()}
# What a kernel may declare it masks (:meth:`Mask.of` names a call's).
MASKS = tuple(_KINDS.values())


@dataclass(frozen=True)
class Mask:
    """A mask: ``causal``, ``windowed`` (a sliding window applies) and the diagonal's ``alignment``
    (one of :data:`CAUSAL_ALIGNMENTS`, or None: the kind alone; always None when there is no mask).

    ``str(mask)`` is its kind (``causal+window``) or, with an alignment, its class
    (``causal+window/bottom_right``); :meth:`parse` reads both back.
    """

    causal: bool = False
    windowed: bool = False
    alignment: Optional[str] = None

    def __post_init__(self) -> None:
        if not (self.causal or self.windowed):
            object.__setattr__(self, "alignment", None)  # no diagonal to place
        elif self.alignment is not None and self.alignment not in CAUSAL_ALIGNMENTS:
            raise InvalidInput(f"mask alignment={self.alignment!r} is not one of {CAUSAL_ALIGNMENTS}")

    @classmethod
    def of(cls, causal: bool, window, alignment: Optional[str] = None) -> "Mask":
        """The mask of a call: ``window`` is its ``(left, right)`` (None: no window)."""
        return cls(bool(causal), window is not None, alignment)

    @classmethod
    def parse(cls, text: Union[str, "Mask"]) -> "Mask":
        """The mask a kind (``"causal"``) or class (``"causal/top_left"``) names; a Mask is returned as is.

        Raises:
            InvalidInput: not one of those forms (the message names the value and the accepted forms).
        """
        if isinstance(text, Mask):
            return text
        kind, slash, alignment = text.partition("/") if isinstance(text, str) else ("", "", "")
        flags = _FLAGS.get(kind)
        if flags is None or (slash and (not any(flags) or alignment not in CAUSAL_ALIGNMENTS)):
            raise InvalidInput(f"mask {text!r} is not a mask; accepted: {cls.forms()}")
        return cls(*flags, alignment or None)

    @staticmethod
    def forms() -> str:
        """The accepted string forms, in words."""
        return (f"one of {MASKS}, or a kind other than 'none' with its alignment, "
                f"'<kind>/{CAUSAL_ALIGNMENTS[0]}' or '<kind>/{CAUSAL_ALIGNMENTS[1]}'")

    @classmethod
    def kinds(cls) -> tuple["Mask", ...]:
        """Every kind, without alignment, in :data:`MASKS`' order."""
        return tuple(cls(*flags) for flags in _KINDS)

    @classmethod
    def classes(cls) -> tuple["Mask", ...]:
        """The mask dimension's classes: no mask, then each other kind at each alignment."""
        return (cls(),) + tuple(cls(k.causal, k.windowed, a) for k in cls.kinds()[1:] for a in CAUSAL_ALIGNMENTS)

    @property
    def kind(self) -> str:
        """The kind's name, one of :data:`MASKS`."""
        return _KINDS[(self.causal, self.windowed)]

    @property
    def none(self) -> bool:
        return not (self.causal or self.windowed)

    def unaligned(self) -> "Mask":
        """This mask's kind alone."""
        return Mask(self.causal, self.windowed)

    def __str__(self) -> str:
        return self.kind if self.alignment is None else f"{self.kind}/{self.alignment}"
