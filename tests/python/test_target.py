"""Target strings: parsing, formatting, per-core defaults and ISA overrides."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.core.target import DEFAULT_TARGET, Core, Isa, Target, TargetError

# The table from the design, written out independently of core/target.py.
EXPECTED_DEFAULT_ISA = {
    "cortex-m0": Isa.SCALAR,
    "cortex-m0plus": Isa.SCALAR,
    "cortex-m3": Isa.SCALAR,
    "cortex-m23": Isa.SCALAR,
    "cortex-m4": Isa.DSP,
    "cortex-m7": Isa.DSP,
    "cortex-m33": Isa.DSP,
    "cortex-m35p": Isa.DSP,
    "cortex-m52": Isa.MVE,
    "cortex-m55": Isa.MVE,
    "cortex-m85": Isa.MVE,
}
ORDER = [Isa.SCALAR, Isa.DSP, Isa.MVE]  # scalar ⊂ DSP ⊂ MVE

ALL_PAIRS = list(itertools.product(Core, Isa))
ALLOWED = [(c, i) for c, i in ALL_PAIRS if ORDER.index(i) <= ORDER.index(c.best_isa)]
REFUSED = [(c, i) for c, i in ALL_PAIRS if ORDER.index(i) > ORDER.index(c.best_isa)]


def _id(pair: tuple[Core, Isa]) -> str:
    return f"{pair[0].value}+{pair[1].value}"


def test_cores_are_exactly_the_documented_ones():
    assert {c.value for c in Core} == set(EXPECTED_DEFAULT_ISA)


def test_isa_values_and_order():
    assert [i.value for i in Isa] == ["scalar", "dsp", "mve"]
    assert [i.rank for i in ORDER] == [0, 1, 2]


@pytest.mark.parametrize("name", sorted(EXPECTED_DEFAULT_ISA))
def test_default_isa_per_core(name):
    target = Target.parse(name)
    assert target.core.value == name
    assert target.isa is EXPECTED_DEFAULT_ISA[name]
    assert target.core.best_isa is EXPECTED_DEFAULT_ISA[name]
    assert Target.for_core(target.core) == target
    assert str(target) == name


def test_default_target_is_cortex_m55_mve():
    assert DEFAULT_TARGET == Target(Core.M55, Isa.MVE)
    assert str(DEFAULT_TARGET) == "cortex-m55"


def test_allowed_and_refused_cover_every_pair():
    assert len(ALLOWED) + len(REFUSED) == len(Core) * len(Isa)
    # 4 scalar-only cores allow 1, 4 DSP cores allow 2, 3 MVE cores allow 3.
    assert len(ALLOWED) == 4 * 1 + 4 * 2 + 3 * 3


@pytest.mark.parametrize("pair", ALLOWED, ids=_id)
def test_every_allowed_override(pair):
    core, isa = pair
    target = Target.parse(f"{core.value}+{isa.value}")
    assert target == Target(core, isa)
    assert (target.core, target.isa) == (core, isa)
    if isa is core.best_isa:
        # Naming the default ISA explicitly is allowed and formats without the suffix.
        assert str(target) == core.value
    else:
        assert str(target) == f"{core.value}+{isa.value}"
    assert Target.parse(str(target)) == target


@pytest.mark.parametrize("pair", REFUSED, ids=_id)
def test_every_refused_override(pair):
    core, isa = pair
    with pytest.raises(TargetError) as parsed:
        Target.parse(f"{core.value}+{isa.value}")
    with pytest.raises(TargetError) as constructed:
        Target(core, isa)
    allowed = [i.value for i in ORDER if ORDER.index(i) <= ORDER.index(core.best_isa)]
    for error in (parsed.value, constructed.value):
        message = str(error)
        assert core.value in message
        assert isa.value in message
        assert "\n" not in message
        for name in allowed:
            assert name in message
        assert isa.value not in message.split(":")[-1]  # the refused ISA is not offered


@pytest.mark.parametrize(
    "text, expected",
    [
        ("cortex-m0plus", Target(Core.M0PLUS, Isa.SCALAR)),
        ("cortex-m33+scalar", Target(Core.M33, Isa.SCALAR)),
        ("cortex-m55+dsp", Target(Core.M55, Isa.DSP)),
        ("Cortex-M55+DSP", Target(Core.M55, Isa.DSP)),
        ("  cortex-m85 ", Target(Core.M85, Isa.MVE)),
        ("CORTEX-M35P", Target(Core.M35P, Isa.DSP)),
    ],
)
def test_parse_examples(text, expected):
    assert Target.parse(text) == expected


@pytest.mark.parametrize(
    "text, bad",
    [
        ("cortex-m99", "cortex-m99"),
        ("m55", "m55"),
        ("cortex-m55p", "cortex-m55p"),
        ("", "''"),
        ("cortex-a53+mve", "cortex-a53"),
    ],
)
def test_unknown_core_lists_valid_cores(text, bad):
    with pytest.raises(TargetError) as error:
        Target.parse(text)
    message = str(error.value)
    assert "unknown core" in message
    assert bad in message
    for core in Core:
        assert core.value in message
    assert "\n" not in message


@pytest.mark.parametrize("isa", ["helium", "neon", "dsp+scalar", "MVEI", "fp"])
def test_unknown_isa_lists_valid_isas(isa):
    with pytest.raises(TargetError) as error:
        Target.parse(f"cortex-m55+{isa}")
    message = str(error.value)
    assert "unknown ISA" in message
    assert isa.lower() in message
    for name in ("scalar", "dsp", "mve"):
        assert name in message
    assert "\n" not in message


def test_trailing_plus_is_an_error():
    with pytest.raises(TargetError):
        Target.parse("cortex-m55+")


def test_target_error_is_a_value_error():
    assert issubclass(TargetError, ValueError)


def test_target_is_frozen_and_hashable():
    target = Target.parse("cortex-m33+scalar")
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.isa = Isa.DSP  # type: ignore[misc]
    assert len({target, Target(Core.M33, Isa.SCALAR)}) == 1


@given(st.sampled_from(ALLOWED))
def test_format_parse_round_trip(pair):
    target = Target(*pair)
    assert Target.parse(str(target)) == target
    assert Target.parse(str(target).upper()) == target


@given(st.text(max_size=30))
def test_any_text_parses_or_raises_target_error(text):
    try:
        target = Target.parse(text)
    except TargetError:
        return
    assert isinstance(target, Target)
    assert Target.parse(str(target)) == target
