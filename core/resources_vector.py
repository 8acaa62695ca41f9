"""`ResourceVector`: the scheduler's view of a Kubernetes ResourceList as integers (cpu in
millicores, everything else via `Quantity.value()`), with Volcano's comparison rules, and the
`fits` / `insufficient_resources` shortcuts.

Separate from the quantities it is read from (`core.resources_quantity`,
`core.resources_parse`) and from the pod request sums built on it (`core.resources_pods`);
everything public here is re-exported by `core.resources`, the module to import from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Literal

from core.resources_format import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, format_quantity
from core.resources_parse import _quote, parse_quantity
from core.resources_quantity import Quantity, QuantityError, _is_int

# ---------------------------------------------------------------------------- ResourceVector

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

    __slots__ = ("_amounts", "_hash")

    _amounts: dict[str, int]
    _hash: int  # computed when first asked (vectors are keys of many memo tables)

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

    @classmethod
    def total(cls, vectors: Iterable[ResourceVector]) -> ResourceVector:
        """Σ `vectors`, as repeated `+` from zero gives it (every name any of them has), built
        in one dict rather than a new vector per term."""
        out: dict[str, int] = {}
        for vector in vectors:
            for name, amount in vector._amounts.items():
                out[name] = out.get(name, 0) + amount
        return cls._of(out)

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
        try:
            return self._hash
        except AttributeError:
            # Consistent with __eq__: zero entries are the same as absent ones.
            found = self._hash = hash(frozenset((n, a) for n, a in self._amounts.items() if a))
            return found

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
