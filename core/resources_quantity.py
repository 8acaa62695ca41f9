"""The exact Kubernetes quantity value type: `Quantity`, its errors and formats, and the
integer helpers it is built on (normalising, rounding away from zero, int64 saturation, exact
comparison, the canonical decimal and base-1024 strings).

This is k8s.io/apimachinery/pkg/api/resource's quantity.go / amount.go / suffix.go data without
the parser: `core.resources_parse` turns text into a `Quantity`, `core.resources_format` turns
scheduler integers back into canonical strings. Kept apart so each stays small; everything public
here is re-exported by `core.resources`, the module to import from.
"""

from __future__ import annotations

import enum
import functools
from fractions import Fraction

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# `Quantity.exact` materialises coefficient * 10**exponent. Go itself never does that (it keeps a
# scale), and 10**2147483647 would take gigabytes, so `exact` refuses magnitudes this far out.
# Comparisons between quantities stay exact for every value (see `_compare`).
_MAX_EXACT_EXPONENT = 10_000


class QuantityError(ValueError):
    """A string (or number) that is not a Kubernetes quantity; the message names it."""


class QuantityFormat(enum.StrEnum):
    """How a quantity is serialised, remembered from the suffix it was parsed with (Go's Format)."""

    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_SI = "DecimalSI"  # 12M


_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_DECIMAL_SUFFIX_BY_EXPONENT: dict[int, str] = {exp: sfx for sfx, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIX_BY_POWER_OF_1024 = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


# --------------------------------------------------------------------------------- Quantity


@functools.total_ordering
class Quantity:
    """An exact, immutable Kubernetes quantity: `coefficient * 10**exponent`, plus its format.

    Construct one with `parse_quantity`; the constructor itself is Go's NewScaledQuantity (no
    parse-time rounding or capping) and is what the formatting helpers use.
    """

    __slots__ = ("_coefficient", "_exponent", "_format")

    _coefficient: int
    _exponent: int
    _format: QuantityFormat

    def __init__(
        self,
        coefficient: int,
        exponent: int = 0,
        fmt: QuantityFormat = QuantityFormat.DECIMAL_SI,
    ) -> None:
        if not _is_int(coefficient) or not _is_int(exponent):
            raise TypeError("Quantity coefficient and exponent must be integers")
        coefficient, exponent = _strip_factors_of_ten(coefficient, exponent)
        object.__setattr__(self, "_coefficient", coefficient)
        object.__setattr__(self, "_exponent", exponent)
        object.__setattr__(self, "_format", QuantityFormat(fmt))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Quantity is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Quantity is immutable")

    @property
    def coefficient(self) -> int:
        """Exact value is `coefficient * 10**exponent`; no trailing zeros (0 for zero)."""
        return self._coefficient

    @property
    def exponent(self) -> int:
        return self._exponent

    @property
    def format(self) -> QuantityFormat:
        return self._format

    @property
    def exact(self) -> Fraction:
        """The exact value as a Fraction (OverflowError for exponents beyond ±10000)."""
        if abs(self._exponent) > _MAX_EXACT_EXPONENT:
            raise OverflowError(f"quantity {self} is too large or small to represent exactly")
        if self._exponent >= 0:
            return Fraction(self._coefficient * 10**self._exponent)
        return Fraction(self._coefficient, 10**-self._exponent)

    def sign(self) -> int:
        return (self._coefficient > 0) - (self._coefficient < 0)

    def is_zero(self) -> bool:
        return self._coefficient == 0

    def value(self) -> int:
        """Go's Value(): the integer value rounded away from zero, saturated to int64."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """Go's MilliValue(): ceil(q * 1000) away from zero, saturated to int64."""
        return self.scaled_value(-3)

    def scaled_value(self, scale: int) -> int:
        """Go's ScaledValue(scale): q / 10**scale rounded away from zero, saturated to int64.

        Go's int64 accessors used to wrap silently on overflow (documented as "undefined"); current
        apimachinery saturates to MinInt64/MaxInt64 on both its int64 and inf.Dec backends, e.g.
        "1e100", "8Ei" (capped at parse) and "9223372036854775808" all give MaxInt64. We do the
        same so a huge capacity behaves as "as large as possible" rather than as a random number.
        """
        return _saturate_int64(_round_away(self._coefficient, self._exponent - scale))

    def __str__(self) -> str:
        """Go's canonical String(): "1.5" -> "1500m", "2048Mi" -> "2Gi", "1e3" -> "1e3"."""
        if self._coefficient == 0:
            return "0"
        if self._format is QuantityFormat.BINARY_SI:
            binary = _binary_si_string(self._coefficient, self._exponent)
            if binary is not None:
                return binary
            # Go shows values in (-1024, 1024), fractional values and values past "Ei" in
            # decimal instead, so that nothing is rounded or loses its magnitude.
            return _decimal_string(self._coefficient, self._exponent, QuantityFormat.DECIMAL_SI)
        return _decimal_string(self._coefficient, self._exponent, self._format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self._format.value})"

    def __eq__(self, other: object) -> bool:
        # Like Go's Equal/Cmp: the value matters, the format does not.
        if not isinstance(other, Quantity):
            return NotImplemented
        return (self._coefficient, self._exponent) == (other._coefficient, other._exponent)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return _compare(self, other) < 0

    def __hash__(self) -> int:
        return hash((self._coefficient, self._exponent))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strip_factors_of_ten(coefficient: int, exponent: int) -> tuple[int, int]:
    """Normalise so equal values have equal (coefficient, exponent) pairs."""
    if coefficient == 0:
        return 0, 0
    while coefficient % 10 == 0:
        coefficient //= 10
        exponent += 1
    return coefficient, exponent


def _digit_count(n: int) -> int:
    """Decimal digits of n > 0, without str() (which Python limits for huge ints)."""
    guess = (n.bit_length() * 1233) >> 12  # 1233/4096 ~ log10(2): guess is digits or digits-1
    return guess + 1 if n >= 10**guess else guess


def _round_away(coefficient: int, exponent: int) -> int:
    """coefficient * 10**exponent as an integer, rounding any fraction away from zero."""
    if coefficient == 0:
        return 0
    magnitude = abs(coefficient)
    if exponent >= 0:
        # Anything past 10**40 saturates anyway; don't build a giant power of ten to find out.
        result = magnitude * 10 ** min(exponent, 40)
    elif -exponent >= magnitude.bit_length():
        result = 1  # magnitude < 2**bits <= 10**-exponent: a non-zero fraction below one
    else:
        quotient, remainder = divmod(magnitude, 10**-exponent)
        result = quotient + (remainder != 0)
    return result if coefficient > 0 else -result


def _saturate_int64(n: int) -> int:
    return max(INT64_MIN, min(INT64_MAX, n))


def _compare(a: Quantity, b: Quantity) -> int:
    """Exact three-way comparison that never materialises 10**exponent for huge exponents."""
    if a.sign() != b.sign():
        return -1 if a.sign() < b.sign() else 1
    if a.is_zero():
        return 0
    # |value| lies in [10**(order-1), 10**order): different orders decide the magnitudes.
    order_a = _digit_count(abs(a.coefficient)) + a.exponent
    order_b = _digit_count(abs(b.coefficient)) + b.exponent
    if order_a != order_b:
        bigger = 1 if order_a > order_b else -1
        return bigger * a.sign()
    # Same order, so the exponents differ by at most the digit counts: align them exactly.
    low = min(a.exponent, b.exponent)
    left = a.coefficient * 10 ** (a.exponent - low)
    right = b.coefficient * 10 ** (b.exponent - low)
    return (left > right) - (left < right)


def _decimal_string(coefficient: int, exponent: int, fmt: QuantityFormat) -> str:
    """Go's AsCanonicalBytes + suffix: the exponent moves to a multiple of three."""
    shift = exponent % 3  # Python's % is non-negative: 1 for exponents 1 and -2, as in Go
    coefficient *= 10**shift
    exponent -= shift
    if fmt is QuantityFormat.DECIMAL_SI:
        suffix = _DECIMAL_SUFFIX_BY_EXPONENT.get(exponent)
        if suffix is None:
            # No SI suffix beyond "E" (or below "n"): current Go falls back to exponent notation
            # ("1000E" -> "1e21") instead of dropping the magnitude as old releases did.
            suffix = f"e{exponent}"
    else:
        suffix = "" if exponent == 0 else f"e{exponent}"
    return f"{coefficient}{suffix}"


def _binary_si_string(coefficient: int, exponent: int) -> str | None:
    """Go's base-1024 form, or None when Go would print the value in decimal instead."""
    if exponent < 0 or exponent > 400:
        return None  # fractional (no trailing zeros after normalising), or astronomically large
    value = coefficient * 10**exponent
    if -1024 < value < 1024:
        return None
    magnitude, power = abs(value), 0
    while magnitude >= 1024 and magnitude % 1024 == 0:
        magnitude //= 1024
        power += 1
    if power >= len(_BINARY_SUFFIX_BY_POWER_OF_1024):
        return None  # past "Ei" there is no suffix
    sign = "-" if value < 0 else ""
    return f"{sign}{magnitude}{_BINARY_SUFFIX_BY_POWER_OF_1024[power]}"
