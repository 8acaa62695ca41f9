"""Kubernetes resource quantities, resource vectors and pod requests.

Three layers, each mirroring the Go code the real cluster runs:

1. `Quantity` / `parse_quantity`: k8s.io/apimachinery/pkg/api/resource (quantity.go, suffix.go,
   amount.go). Values are kept exactly as (coefficient, power-of-ten exponent) integers; the int64
   accessors `value()` / `milli_value()` round away from zero and saturate like Go's.
2. `ResourceVector`: the scheduler's view of a ResourceList as integers (cpu in millicores,
   everything else via `value()`), with Volcano's comparison rules.
3. `pod_requests` / `pod_nonzero_requests`: k8s.io/component-helpers/resource `PodRequests`, as
   kube-scheduler's NodeResourcesFit filter and scorers compute it.

Stdlib only; nothing here does I/O.
"""

from __future__ import annotations

import enum
import functools
import math
import re
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any, Literal

import orjson

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "INT64_MAX",
    "INT64_MIN",
    "Quantity",
    "QuantityError",
    "QuantityFormat",
    "ResourceVector",
    "cpu_milli",
    "fits",
    "format_bytes",
    "format_cpu",
    "format_quantity",
    "format_shortfall",
    "insufficient_resources",
    "is_byte_resource",
    "parse_quantity",
    "pod_nonzero_requests",
    "pod_requests",
    "to_int",
]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# Go parses a decimal exponent at 64 bits and then stores it in an int32 scale that is later
# negated, so current apimachinery accepts exactly [-MaxInt32, MaxInt32] and rejects the rest
# (older releases silently truncated "1e4294967297" to 1e1; we follow the fixed behaviour).
_MAX_EXPONENT = 2**31 - 1

# Python refuses int<->str conversions beyond sys.get_int_max_str_digits() (4300 by default, 640
# at the lowest setting) as a denial-of-service guard. Go has no such limit, but no resource
# amount needs hundreds of significant digits (int64 has 19), so we reject longer numbers with a
# clear error instead of a stray ValueError. 600 + 19 (a 2^60 binary factor) + 2 (the alignment of
# the exponent to a multiple of 3) stays below 640, so every later str()/int() is safe.
_MAX_SIGNIFICANT_DIGITS = 600

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

# Sign, integer digits, optional "." and fraction digits; the rest of the string is the suffix.
# Explicit [0-9] because Python's \d and int() also accept non-ASCII digits, which Go does not.
_NUMBER_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT_RE = re.compile(r"[eE]([+-]?)([0-9]+)")


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


# ------------------------------------------------------------------------------------ parsing


def parse_quantity(text: str | int | float) -> Quantity:
    """Parse a Kubernetes quantity exactly as apimachinery's ParseQuantity does.

    Grammar: an optionally signed decimal number ("1", "1.5", ".5", "5.", "+1", "-1") followed by
    a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal suffix (n u m "" k M G T P E) or a decimal
    exponent ("e3", "E-3", "e+6"). Non-zero values finer than 1n are rounded up (away from zero)
    to the next nano; binary quantities are capped at 2**63-1 in magnitude, as Go does.

    Ints and floats are accepted the way a JSON number reaches Go's UnmarshalJSON: as their
    decimal text. Deliberate differences from Go: a number must have at least one digit (Go
    accepts a bare suffix such as "Gi", or ".", "+", "-" as zero - kubernetes/apimachinery#165),
    and more than 600 significant digits are refused (see _MAX_SIGNIFICANT_DIGITS).
    """
    source = _quantity_text(text)
    if source == "":
        raise _invalid(source, "empty string")
    if any(ch.isspace() for ch in source):
        raise _invalid(source, "whitespace is not allowed")
    match = _NUMBER_RE.match(source)
    assert match is not None  # every part of the pattern is optional
    sign, whole, fraction = match.group(1), match.group(2), match.group(3) or ""
    if not whole and not fraction:
        raise _invalid(source, "expected a number, optionally followed by a suffix")
    base, power, fmt = _interpret_suffix(source, source[match.end() :])

    coefficient, exponent = _significand(source, whole, fraction)
    exponent += power if base == 10 else 0
    if sign == "-":
        coefficient = -coefficient
    if base == 2:
        coefficient <<= power
    coefficient, exponent = _round_up_to_nano(coefficient, exponent)
    if fmt is QuantityFormat.BINARY_SI:
        coefficient, exponent = _cap_binary(coefficient, exponent)
        if coefficient != 0 and exponent < 0 and abs(coefficient) < 10**-exponent:
            # Go: a binary value strictly between 0 and 1 in magnitude becomes DecimalSI.
            fmt = QuantityFormat.DECIMAL_SI
    return Quantity(coefficient, exponent, fmt)


def cpu_milli(text: str | int | float) -> int:
    """MilliValue of a quantity: "1.5" -> 1500, "100m" -> 100."""
    return parse_quantity(text).milli_value()


def to_int(text: str | int | float) -> int:
    """Value of a quantity: "1Gi" -> 1073741824, "0.5" -> 1 (rounded up)."""
    return parse_quantity(text).value()


def _quantity_text(text: object) -> str:
    if isinstance(text, str):
        return text
    if isinstance(text, bool) or not isinstance(text, int | float):
        raise QuantityError(f"invalid quantity {text!r}: expected a string or a number")
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"invalid quantity {text!r}: not a finite number")
        return repr(text)  # shortest round-trip form, e.g. "0.5", "1e+16": both valid quantities
    try:
        return str(text)
    except ValueError:  # beyond Python's int->str digit limit
        raise QuantityError("invalid quantity: an integer with too many digits") from None


def _quote(text: str) -> str:
    """Go's %q for the plain strings we report: double quotes, escaped quote and backslash."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _invalid(text: str, reason: str) -> QuantityError:
    return QuantityError(f"invalid quantity {_quote(text)}: {reason}")


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, QuantityFormat]:
    """(base, exponent, format) for a suffix, as Go's suffixer.interpret."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    match = _EXPONENT_RE.fullmatch(suffix)
    if match is None:
        raise _invalid(text, _explain_bad_suffix(suffix))
    digits = match.group(2).lstrip("0") or "0"
    # Compare lengths first so a thousand-digit exponent never reaches int().
    if len(digits) > 10 or int(digits) > _MAX_EXPONENT:
        raise _invalid(
            text, f"exponent {_quote(suffix)} is out of range (at most ±{_MAX_EXPONENT})"
        )
    exponent = -int(digits) if match.group(1) == "-" else int(digits)
    return 10, exponent, QuantityFormat.DECIMAL_EXPONENT


def _explain_bad_suffix(suffix: str) -> str:
    if re.fullmatch(r"[eE][+-]?", suffix):
        return f"exponent {_quote(suffix)} has no digits (e.g. 1e3, 5E-3)"
    if re.fullmatch(r"[eE][+-]?[0-9]*\.[0-9]*", suffix):
        return f"exponent {_quote(suffix)} must be a whole number"
    if suffix.startswith("."):
        return "more than one decimal point"
    reason = f"unknown suffix {_quote(suffix)}"
    hints = _suffix_hints(suffix)
    if hints:
        reason += " (suffixes are case-sensitive; did you mean " + " or ".join(hints) + "?)"
    return reason


def _suffix_hints(suffix: str) -> list[str]:
    """Valid suffixes a typo probably meant: "K" -> k/Ki, "mi" -> Mi, "KiB"/"GB" -> Ki/G(i)."""
    stem = suffix[:-1] if len(suffix) > 1 and suffix[-1] in "bB" else suffix
    if not stem:
        return []
    known = [*_DECIMAL_SUFFIXES, *_BINARY_SUFFIXES]
    wanted = {stem.lower(), stem.lower() + "i"}
    return [_quote(s) for s in known if s and s.lower() in wanted and s != suffix]


def _significand(text: str, whole: str, fraction: str) -> tuple[int, int]:
    """The digits as (coefficient, exponent), without leading/trailing zeros."""
    digits = whole + fraction
    exponent = -len(fraction)
    significant = digits.rstrip("0")
    exponent += len(digits) - len(significant)
    significant = significant.lstrip("0")
    if len(significant) > _MAX_SIGNIFICANT_DIGITS:
        raise _invalid(
            text, f"more than {_MAX_SIGNIFICANT_DIGITS} significant digits is not supported"
        )
    return (int(significant) if significant else 0), exponent


def _round_up_to_nano(coefficient: int, exponent: int) -> tuple[int, int]:
    """Go keeps nothing finer than 1n: "if you want some resources, you should get some"."""
    if exponent >= -9 or coefficient == 0:
        return coefficient, exponent
    return _round_away(coefficient, exponent + 9), -9


def _cap_binary(coefficient: int, exponent: int) -> tuple[int, int]:
    """Go silently caps a binary-suffixed value at 2**63-1 in magnitude ("8Ei" -> 2**63-1)."""
    if coefficient == 0:
        return coefficient, exponent
    if exponent > 19:
        too_big = True  # at least 10**20
    elif exponent >= 0:
        too_big = abs(coefficient) * 10**exponent > INT64_MAX
    else:
        too_big = abs(coefficient) > INT64_MAX * 10**-exponent
    if not too_big:
        return coefficient, exponent
    return (INT64_MAX if coefficient > 0 else -INT64_MAX), 0


# --------------------------------------------------------------------------------- formatting


def format_cpu(milli: int) -> str:
    """Canonical string for millicores: 1500 -> "1500m", 2000 -> "2", 1_000_000 -> "1k"."""
    return str(Quantity(milli, -3, QuantityFormat.DECIMAL_SI))


def format_bytes(n: int) -> str:
    """Canonical BinarySI string for a byte count, as Go prints it.

    A multiple of 1024 gets a binary suffix ("2Gi", "1536Mi"); other values are plain integers
    ("1500"), except that Go prints values below 1024 in DecimalSI, so 1000 -> "1k".
    """
    return str(Quantity(n, 0, QuantityFormat.BINARY_SI))


def is_byte_resource(name: str) -> bool:
    """Resources measured in bytes, shown with binary suffixes."""
    return name in _BYTE_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def format_quantity(name: str, amount: int) -> str:
    """Canonical string for a `ResourceVector` amount of resource `name` (round-trip safe)."""
    if name == CPU:
        return format_cpu(amount)
    if is_byte_resource(name):
        return format_bytes(amount)
    return str(Quantity(amount, 0, QuantityFormat.DECIMAL_SI))


def format_shortfall(name: str, need: int, free: int) -> str:
    """A scheduling reason: "not enough nvidia.com/gpu (need 4, free 2)"."""
    return (
        f"not enough {name} (need {format_quantity(name, need)}, "
        f"free {format_quantity(name, free)})"
    )


# ---------------------------------------------------------------------------- ResourceVector

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
HUGEPAGES_PREFIX = "hugepages-"
_BYTE_RESOURCES = frozenset({MEMORY, EPHEMERAL_STORAGE, "storage"})

# Order of "insufficient" reports: kube-scheduler's fitsRequest checks pods, cpu, memory and
# ephemeral-storage first, then the scalar resources (which we sort for determinism).
_REPORT_ORDER = {PODS: 0, CPU: 1, MEMORY: 2, EPHEMERAL_STORAGE: 3}

MissingDimension = Literal["zero", "infinity"]


def _amount_of(name: str, quantity: Quantity) -> int:
    """The scheduler's integer for a quantity: cpu in millicores, everything else Value()."""
    return quantity.milli_value() if name == CPU else quantity.value()


class ResourceVector:
    """Integer amounts per resource name, as Kubernetes spells the names.

    cpu is in millicores, memory / ephemeral-storage / hugepages-* in bytes, pods a count, any
    other (extended) resource its integer value. A name that is absent counts as 0, except where
    a method says otherwise. Instances are never mutated: every operation returns a new vector.
    """

    __slots__ = ("_amounts",)

    _amounts: dict[str, int]

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        checked: dict[str, int] = {}
        for name, amount in (amounts or {}).items():
            if not isinstance(name, str) or not _is_int(amount):
                raise TypeError(
                    f"ResourceVector needs str -> int amounts, got {name!r}: {amount!r}"
                )
            checked[name] = amount
        self._amounts = checked

    @classmethod
    def _of(cls, amounts: dict[str, int]) -> ResourceVector:
        """Wrap a dict we built ourselves (already validated) without copying it again."""
        vector = cls.__new__(cls)
        vector._amounts = amounts
        return vector

    @classmethod
    def from_resource_list(
        cls, resources: Mapping[str, str | int | float] | None, *, where: str = "resources"
    ) -> ResourceVector:
        """A Kubernetes ResourceList ({"cpu": "500m", "memory": "1Gi"}) as a vector.

        Errors name the entry: `resources["memory"]: invalid quantity "2GG": ...`; `where`
        replaces "resources" with a field path such as "spec.containers[0].resources.requests".
        """
        if resources is None:
            return cls._of({})
        if not isinstance(resources, Mapping):
            raise QuantityError(f"{where}: expected a mapping of resource name to quantity")
        amounts: dict[str, int] = {}
        for name, text in resources.items():
            try:
                amounts[str(name)] = _amount_of(str(name), parse_quantity(text))
            except QuantityError as exc:
                raise QuantityError(f"{where}[{_quote(str(name))}]: {exc}") from None
        return cls._of(amounts)

    def to_resource_list(self) -> dict[str, str]:
        """Canonical quantity strings by name (sorted); `from_resource_list` gives back `self`."""
        return {name: format_quantity(name, self._amounts[name]) for name in sorted(self._amounts)}

    # -- access

    def get(self, name: str) -> int:
        return self._amounts.get(name, 0)

    @property
    def cpu(self) -> int:
        """Millicores."""
        return self.get(CPU)

    @property
    def memory(self) -> int:
        """Bytes."""
        return self.get(MEMORY)

    @property
    def ephemeral_storage(self) -> int:
        """Bytes."""
        return self.get(EPHEMERAL_STORAGE)

    @property
    def pods(self) -> int:
        return self.get(PODS)

    def names(self) -> tuple[str, ...]:
        """Every name present (including explicit zeros), sorted."""
        return tuple(sorted(self._amounts))

    def items(self) -> Iterator[tuple[str, int]]:
        return iter(self._amounts.items())

    def as_dict(self) -> dict[str, int]:
        return dict(self._amounts)

    def view(self) -> Mapping[str, int]:
        """The amounts without a copy, for hot loops. Read-only by contract."""
        return self._amounts

    def __contains__(self, name: object) -> bool:
        return name in self._amounts

    def is_zero(self) -> bool:
        return not any(self._amounts.values())

    # -- arithmetic (absent names count as 0)

    def __add__(self, other: ResourceVector) -> ResourceVector:
        if not isinstance(other, ResourceVector):
            return NotImplemented
        out = dict(self._amounts)
        for name, amount in other._amounts.items():
            out[name] = out.get(name, 0) + amount
        return ResourceVector._of(out)

    def __sub__(self, other: ResourceVector) -> ResourceVector:
        """Plain difference; may go negative (an over-committed node)."""
        if not isinstance(other, ResourceVector):
            return NotImplemented
        out = dict(self._amounts)
        for name, amount in other._amounts.items():
            out[name] = out.get(name, 0) - amount
        return ResourceVector._of(out)

    def saturating_sub(self, other: ResourceVector) -> ResourceVector:
        """Difference clamped at 0 in every dimension (e.g. free = allocatable - used)."""
        return ResourceVector._of({n: max(0, a) for n, a in (self - other)._amounts.items()})

    def scaled(self, factor: int) -> ResourceVector:
        """Every amount multiplied by an integer factor (e.g. a task's request times replicas)."""
        if not _is_int(factor):
            raise TypeError("ResourceVector.scaled needs an integer factor")
        return ResourceVector._of({n: a * factor for n, a in self._amounts.items()})

    def elementwise_max(self, other: ResourceVector) -> ResourceVector:
        names = self._amounts.keys() | other._amounts.keys()
        return ResourceVector._of({n: max(self.get(n), other.get(n)) for n in sorted(names)})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ResourceVector):
            return NotImplemented
        if self is other or self._amounts == other._amounts:
            return True  # the common case, without a walk over the names
        names = self._amounts.keys() | other._amounts.keys()
        return all(self.get(n) == other.get(n) for n in names)

    def __hash__(self) -> int:
        # Consistent with __eq__: zero entries are the same as absent ones.
        return hash(frozenset((n, a) for n, a in self._amounts.items() if a))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={self._amounts[n]}" for n in sorted(self._amounts))
        return f"ResourceVector({inner})"

    # -- comparisons

    def less_equal(self, other: ResourceVector, missing: MissingDimension = "zero") -> bool:
        """Volcano's Resource.LessEqual(rr, DimensionDefaultValue): self <= other everywhere.

        `missing` says what a dimension absent from `other` is worth: "zero" (Volcano's Zero) or
        "infinity" (Volcano's Infinity, e.g. a queue capability that does not limit that
        resource). A dimension absent from `self` is 0. Unlike Volcano, cpu and memory follow the
        same rule as every other resource: in Go they are struct fields that can never be absent.
        Amounts are exact integers, so Volcano's float tolerance (minResource) is not needed.
        """
        if missing not in ("zero", "infinity"):
            raise ValueError(f'missing must be "zero" or "infinity", not {missing!r}')
        for name in self._amounts.keys() | other._amounts.keys():
            if name not in other._amounts and missing == "infinity":
                continue
            if self.get(name) > other.get(name):
                return False
        return True

    def fits_in(self, free: ResourceVector) -> bool:
        """Volcano's fit rule: only dimensions this request asks for (> 0) are compared.

        So a request for 0 GPUs fits a node without GPUs, while a request for 1 GPU does not fit
        a node that lacks the resource (absent = 0 free).
        """
        return all(free.get(name) >= need for name, need in self._amounts.items() if need > 0)

    def insufficient(self, free: ResourceVector) -> list[tuple[str, int, int]]:
        """(name, need, free) for every requested dimension that does not fit, in report order."""
        short = [
            (name, need, free.get(name))
            for name, need in self._amounts.items()
            if need > 0 and free.get(name) < need
        ]
        return sorted(short, key=lambda item: _report_key(item[0]))


def _report_key(name: str) -> tuple[int, str]:
    return _REPORT_ORDER.get(name, len(_REPORT_ORDER)), name


def fits(request: ResourceVector, free: ResourceVector) -> bool:
    """`request.fits_in(free)`: only the request's non-zero dimensions are compared."""
    return request.fits_in(free)


def insufficient_resources(
    request: ResourceVector, free: ResourceVector
) -> list[tuple[str, int, int]]:
    """`request.insufficient(free)`: [("nvidia.com/gpu", 4, 2), ...]."""
    return request.insufficient(free)


# ------------------------------------------------------------------------------ pod requests

# kube-scheduler's pkg/scheduler/util: scorers pretend a container that requests no cpu/memory
# asks for this much, so such pods are not seen as free ("0.1 core", "200 MB").
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_SIDECAR_RESTART_POLICY = "Always"
_POD_LEVEL_RESOURCES = frozenset({CPU, MEMORY})  # plus hugepages-*, see _is_pod_level_resource


def pod_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool = True,
    default_requests_from_limits: bool = True,
    pod_level_resources: bool = True,
) -> ResourceVector:
    """A pod's effective request, as kube-scheduler's NodeResourcesFit filter computes it.

    `spec` is the pod's `spec` as raw API JSON. The result is
    max(sum(containers) + sum(sidecars), max over init containers i of (init_i + sidecars
    started before i)) + spec.overhead, where sidecars are init containers with
    `restartPolicy: Always` (component-helpers PodRequests, KEP-753). Without sidecars that is
    max(sum(containers), largest init container) + overhead.

    count_pod: add `pods: 1`, the pod slot the pod occupies on a node.
    default_requests_from_limits: a container with a limit but no request for a resource
        requests its limit; the API server applies this default to every Pod it stores, so it is
        a no-op for pods read from the API and makes pods built locally (e.g. from a Volcano job
        template) count the same.
    pod_level_resources: `spec.resources.requests` (PodLevelResources) replace the aggregate for
        cpu, memory and hugepages-*.
    """
    return _pod_requests(
        spec,
        count_pod=count_pod,
        from_limits=default_requests_from_limits,
        pod_level=pod_level_resources,
        non_missing=None,
    )


# kube-scheduler's NonMissingContainerRequests defaults (one object: the memo relies on it).
_NON_MISSING: Mapping[str, int] = {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}


def pod_nonzero_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool = True,
    default_requests_from_limits: bool = True,
    pod_level_resources: bool = True,
) -> ResourceVector:
    """`pod_requests` as kube-scheduler's scorers see it (NonMissingContainerRequests).

    Every container (and init container) that does not mention cpu / memory in its requests is
    counted as requesting 100m cpu / 200Mi memory. An explicit "0" stays 0, as in Go.
    """
    return _pod_requests(
        spec,
        count_pod=count_pod,
        from_limits=default_requests_from_limits,
        pod_level=pod_level_resources,
        non_missing=_NON_MISSING,
    )


# Pods of one workload ask the same, and every watch event of a pod (a status write) would
# parse its quantities again: answers are remembered by what they are computed from.
_REQUESTS_MEMO: dict[bytes, ResourceVector] = {}
_REQUESTS_MEMO_SIZE = 4096


def pod_resources_key(spec: Mapping[str, Any], flags: tuple[Any, ...] = ()) -> bytes | None:
    """A memo key for what a pod's resource sums are computed from (its containers' and init
    containers' resources, restart policies, overhead, pod-level resources), with `flags`
    saying which sum; None when the spec is not plain JSON (compute it without a memo)."""
    try:
        return orjson.dumps(
            (
                flags,
                [c.get("resources") for c in spec.get("containers") or ()],
                [
                    (c.get("resources"), c.get("restartPolicy"))
                    for c in spec.get("initContainers") or ()
                ],
                spec.get("overhead"),
                spec.get("resources"),
            )
        )
    except (AttributeError, TypeError, orjson.JSONEncodeError):
        return None  # not plain JSON: compute (and report errors) without the memo


def _pod_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool,
    from_limits: bool,
    pod_level: bool,
    non_missing: Mapping[str, int] | None,
) -> ResourceVector:
    if not isinstance(spec, Mapping):
        raise TypeError("pod_requests needs the pod spec as a mapping")
    if "containers" not in spec and "spec" in spec:
        raise TypeError("pod_requests needs pod['spec'], not the whole pod")
    flags = (count_pod, from_limits, pod_level, non_missing is None)
    key = (
        pod_resources_key(spec, flags)
        if non_missing is None or non_missing is _NON_MISSING
        else None
    )
    if key is not None:
        known = _REQUESTS_MEMO.get(key)
        if known is not None:
            return known
    total = _compute_pod_requests(
        spec,
        count_pod=count_pod,
        from_limits=from_limits,
        pod_level=pod_level,
        non_missing=non_missing,
    )
    if key is not None:
        if len(_REQUESTS_MEMO) >= _REQUESTS_MEMO_SIZE:
            _REQUESTS_MEMO.clear()
        _REQUESTS_MEMO[key] = total
    return total


def _compute_pod_requests(
    spec: Mapping[str, Any],
    *,
    count_pod: bool,
    from_limits: bool,
    pod_level: bool,
    non_missing: Mapping[str, int] | None,
) -> ResourceVector:

    def requests_of(container: object, path: str) -> ResourceVector:
        return _container_requests(container, path, from_limits, non_missing)

    total = ResourceVector()
    for index, container in enumerate(spec.get("containers") or []):
        total += requests_of(container, f"spec.containers[{index}]")

    # KEP-753: sidecars run for the pod's whole life, so they add to the steady state and to
    # every init container that starts after them.
    sidecars = ResourceVector()
    init_peak = ResourceVector()
    for index, container in enumerate(spec.get("initContainers") or []):
        request = requests_of(container, f"spec.initContainers[{index}]")
        if container.get("restartPolicy") == _SIDECAR_RESTART_POLICY:
            total += request
            sidecars += request
            init_peak = init_peak.elementwise_max(sidecars)
        else:
            init_peak = init_peak.elementwise_max(request + sidecars)
    total = total.elementwise_max(init_peak)

    if pod_level:
        total = _apply_pod_level_requests(total, spec)
    total += ResourceVector.from_resource_list(spec.get("overhead"), where="spec.overhead")
    if count_pod:
        total += ResourceVector._of({PODS: 1})
    return total


def _container_requests(
    container: object, path: str, from_limits: bool, non_missing: Mapping[str, int] | None
) -> ResourceVector:
    if not isinstance(container, Mapping):
        raise TypeError(f"{path}: expected a container object")
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    amounts = ResourceVector.from_resource_list(
        requests, where=f"{path}.resources.requests"
    ).as_dict()
    if from_limits:
        limits = resources.get("limits") or {}
        limit_amounts = ResourceVector.from_resource_list(limits, where=f"{path}.resources.limits")
        for name, amount in limit_amounts.items():
            amounts.setdefault(name, amount)
    # Go's applyNonMissing: only a resource the container does not mention at all is defaulted.
    for name, amount in (non_missing or {}).items():
        amounts.setdefault(name, amount)
    return ResourceVector._of(amounts)


def _is_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def _apply_pod_level_requests(total: ResourceVector, spec: Mapping[str, Any]) -> ResourceVector:
    requests = (spec.get("resources") or {}).get("requests") or {}
    pod_level = ResourceVector.from_resource_list(requests, where="spec.resources.requests")
    supported = {n: a for n, a in pod_level.items() if _is_pod_level_resource(n)}
    if not supported:
        return total
    return ResourceVector._of({**total.as_dict(), **supported})
