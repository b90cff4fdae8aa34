"""The Mask value: every string form of a mask is parsed and printed in one place."""

import pytest

from jfa_verify.cases.dimensions import dimension
from jfa_verify.core.contract import mask_kind
from jfa_verify.core.errors import InvalidInput
from jfa_verify.core.masks import CAUSAL_ALIGNMENTS, MASKS, Mask
from jfa_verify.protocol.kernel import Capabilities


def test_every_kind_and_class_round_trips():
    forms = [*MASKS, *dimension("mask").classes]
    assert len(set(forms)) == 4 + 6 and set(map(str, Mask.kinds())) == set(MASKS)
    for text in forms:
        assert str(Mask.parse(text)) == text
        assert Mask.parse(Mask.parse(text)) == Mask.parse(text)
    for m in (*Mask.kinds(), *Mask.classes()):
        assert Mask.parse(str(m)) == m
    assert [str(m) for m in Mask.classes()] == list(dimension("mask").classes)


def test_flags_and_alignment():
    m = Mask.parse("causal+window/bottom_right")
    assert (m.causal, m.windowed, m.alignment, m.kind) == (True, True, "bottom_right", "causal+window")
    assert m.unaligned() == Mask.parse("causal+window")
    assert Mask.of(False, None, "top_left") == Mask() and str(Mask()) == "none"  # no mask, no diagonal
    assert str(Mask.of(False, (2, 3), "top_left")) == "window/top_left"
    assert [mask_kind(c, w) for w in (None, (1, 1)) for c in (False, True)] == list(MASKS)
    assert set(CAUSAL_ALIGNMENTS) == {m.alignment for m in Mask.classes()} - {None}


@pytest.mark.parametrize("bad", ["sliding", "causal+window/", "window/diagonal", "none/top_left", "window+causal",
                                 "", "Causal", 3, None])
def test_a_bad_mask_is_refused_naming_the_value_and_the_forms(bad):
    with pytest.raises(InvalidInput) as e:
        Mask.parse(bad)
    assert repr(bad) in str(e.value) and all(repr(k) in str(e.value) for k in MASKS)
    assert "top_left" in str(e.value) and "bottom_right" in str(e.value)


def test_capabilities_take_mask_strings_or_values_and_keep_the_strings():
    caps = Capabilities(masks=[Mask(), Mask(causal=True, windowed=True), "window"])
    assert caps.masks == ("none", "causal+window", "window") and caps.window and not caps.causal
    assert caps.supports_mask("causal+window/top_left") and not caps.supports_mask(Mask(causal=True))
    assert Capabilities(masks=("none", "causal")) == Capabilities()
    with pytest.raises(InvalidInput, match=r"masks=.*subset.*'sliding' is not a mask"):
        Capabilities(masks=("none", "sliding"))
    with pytest.raises(InvalidInput, match="masks=.*subset"):
        Capabilities(masks=("causal/top_left",))  # a kind is declared, its alignments apart
    assert not Capabilities(masks=("none", "causal"), causal_alignments=()).supports_mask("causal")
