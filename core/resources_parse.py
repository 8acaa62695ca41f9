"""Parsing Kubernetes quantities exactly as apimachinery's ParseQuantity does: `parse_quantity`
and its shortcuts `cpu_milli` / `to_int`, with the suffix and exponent rules, nano rounding,
binary capping and the error messages that name what was wrong (and suggest a suffix).

Separate from the `Quantity` value type (`core.resources_quantity`), which it builds; everything
public here is re-exported by `core.resources`, the module to import from.
"""

from __future__ import annotations

import math
import re

from core.resources_quantity import (
    _BINARY_SUFFIXES,
    _DECIMAL_SUFFIXES,
    INT64_MAX,
    Quantity,
    QuantityError,
    QuantityFormat,
    _round_away,
)

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

# Sign, integer digits, optional "." and fraction digits; the rest of the string is the suffix.
# Explicit [0-9] because Python's \d and int() also accept non-ASCII digits, which Go does not.
_NUMBER_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT_RE = re.compile(r"[eE]([+-]?)([0-9]+)")


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
