"""core.resources: quantities as apimachinery parses them, resource vectors, pod requests.

Expected values for quantities come from Kubernetes itself: the tables in apimachinery's
pkg/api/resource quantity_test.go (TestQuantityParse, TestQuantityString, TestQuantityParseEmit)
and quantity_overflow_test.go (accessor baselines after the int64 saturation fix), or follow
directly from ParseQuantity / CanonicalizeBytes where a row is not in those tables.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from core.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    INT64_MAX,
    INT64_MIN,
    Quantity,
    QuantityError,
    QuantityFormat,
    ResourceVector,
    cpu_milli,
    fits,
    format_bytes,
    format_cpu,
    format_quantity,
    format_shortfall,
    insufficient_resources,
    parse_quantity,
    pod_nonzero_requests,
    pod_requests,
    to_int,
)

DSI = QuantityFormat.DECIMAL_SI
BSI = QuantityFormat.BINARY_SI
DEX = QuantityFormat.DECIMAL_EXPONENT
GI = 2**30
MI = 2**20

# (input, Value(), MilliValue(), String(), Format)
VALID_QUANTITIES = [
    # Plain decimal SI.
    ("100m", 1, 100, "100m", DSI),
    ("1.5", 2, 1500, "1500m", DSI),
    ("1k", 1000, 1_000_000, "1k", DSI),
    ("1000", 1000, 1_000_000, "1k", DSI),
    ("1000M", 10**9, 10**12, "1G", DSI),  # TestQuantityParseEmit
    ("4096M", 4_096_000_000, 4_096_000_000_000, "4096M", DSI),
    ("0.1", 1, 100, "100m", DSI),
    ("100.035k", 100_035, 100_035_000, "100035", DSI),  # TestQuantityParse
    ("10.035M", 10_035_000, 10_035_000_000, "10035k", DSI),
    ("0", 0, 0, "0", DSI),
    ("0.0", 0, 0, "0", DSI),
    # Number forms: leading/trailing dot, explicit signs; negatives round away from zero.
    (".5", 1, 500, "500m", DSI),
    ("5.", 5, 5000, "5", DSI),
    ("1.G", 10**9, 10**12, "1G", DSI),  # "things written by trolls"
    ("+1", 1, 1000, "1", DSI),
    ("-1", -1, -1000, "-1", DSI),
    ("-1.5", -2, -1500, "-1500m", DSI),
    # Sub-unit values: Value and MilliValue round up, parse keeps nothing finer than 1n.
    ("0.1m", 1, 1, "100u", DSI),
    ("1u", 1, 1, "1u", DSI),
    ("1n", 1, 1, "1n", DSI),
    ("0.0000000001", 1, 1, "1n", DSI),  # TestQuantityParse: rounds up to 1n
    ("3.001n", 1, 1, "4n", DSI),  # TestQuantityParse
    ("0.00000012345", 1, 1, "124n", DSI),  # TestQuantityParse
    # Decimal exponents keep their format; the exponent is moved to a multiple of three.
    ("1e3", 1000, 1_000_000, "1e3", DEX),
    ("1E3", 1000, 1_000_000, "1e3", DEX),
    ("2e+6", 2_000_000, 2_000_000_000, "2e6", DEX),
    ("1.3E+6", 1_300_000, 1_300_000_000, "1300e3", DEX),
    ("1e-3", 1, 1, "1e-3", DEX),
    ("1e-10", 1, 1, "1e-9", DEX),  # rounded up to 1n
    ("0.5e-9", 1, 1, "1e-9", DEX),  # TestQuantityParse
    ("1e-2147483647", 1, 1, "1e-9", DEX),
    # Binary SI.
    ("2Gi", 2 * GI, 2000 * GI, "2Gi", BSI),
    ("500Mi", 500 * MI, 500_000 * MI, "500Mi", BSI),
    ("1536Mi", 1536 * MI, 1_536_000 * MI, "1536Mi", BSI),
    ("2048Mi", 2 * GI, 2000 * GI, "2Gi", BSI),
    ("1024Mi", GI, 1000 * GI, "1Gi", BSI),  # TestQuantityParseEmit
    ("1.5Gi", 1536 * MI, 1_536_000 * MI, "1536Mi", BSI),
    ("0.5Mi", 512 * 1024, 512_000 * 1024, "512Ki", BSI),
    ("1.1Ki", 1127, 1_126_400, "1126400m", BSI),  # not whole: shown in decimal
    (".001Ki", 2, 1024, "1024m", BSI),  # TestQuantityParseEmit
    ("0.000000000001Ki", 1, 1, "2n", DSI),  # TestQuantityParse: rounds up, changes format
    ("0Gi", 0, 0, "0", BSI),  # TestQuantityParse keeps BinarySI for 0Ki..0Ti
    ("-9.5Gi", -10_200_547_328, -10_200_547_328_000, "-9728Mi", BSI),  # overflow baseline
    (
        "-9.5000000001Gi",
        -10_200_547_329,
        -10_200_547_328_108,
        "-10200547328107374183n",
        BSI,
    ),  # quantity_overflow_test.go
    # Large values: exact strings, int64 accessors saturate (quantity_overflow_test.go).
    ("1Ei", 2**60, INT64_MAX, "1Ei", BSI),
    ("8Ei", INT64_MAX, INT64_MAX, "9223372036854775807", BSI),  # binary capped at 2^63-1
    ("-8Ei", -INT64_MAX, INT64_MIN, "-9223372036854775807", BSI),
    ("9223372036854775807Ki", INT64_MAX, INT64_MAX, "9223372036854775807", BSI),
    ("1E", 10**18, INT64_MAX, "1E", DSI),
    ("100E", INT64_MAX, INT64_MAX, "100E", DSI),
    ("1000E", INT64_MAX, INT64_MAX, "1e21", DSI),  # no SI suffix past E: exponent form
    ("9e18", 9 * 10**18, INT64_MAX, "9e18", DEX),
    ("1e19", INT64_MAX, INT64_MAX, "10e18", DEX),
    ("1e100", INT64_MAX, INT64_MAX, "10e99", DEX),
    ("1e1000", INT64_MAX, INT64_MAX, "10e999", DEX),
    ("1e2147483647", INT64_MAX, INT64_MAX, "10e2147483646", DEX),
    ("-1e30", INT64_MIN, INT64_MIN, "-1e30", DEX),
    ("9223372036854775807", INT64_MAX, INT64_MAX, "9223372036854775807", DSI),
    ("9223372036854775808", INT64_MAX, INT64_MAX, "9223372036854775808", DSI),
    (
        "123456789012345678901234567890",
        INT64_MAX,
        INT64_MAX,
        "123456789012345678901234567890",
        DSI,
    ),
]


@pytest.mark.parametrize(("text", "value", "milli", "canonical", "fmt"), VALID_QUANTITIES)
def test_quantity_matches_kubernetes(
    text: str, value: int, milli: int, canonical: str, fmt: QuantityFormat
) -> None:
    quantity = parse_quantity(text)
    assert quantity.value() == value
    assert quantity.milli_value() == milli
    assert str(quantity) == canonical
    assert quantity.format is fmt


@pytest.mark.parametrize(("text", "value", "milli", "canonical", "fmt"), VALID_QUANTITIES)
def test_canonical_string_parses_back_to_the_same_value(
    text: str, value: int, milli: int, canonical: str, fmt: QuantityFormat
) -> None:
    assert parse_quantity(canonical) == parse_quantity(text)


def test_table_is_large_enough() -> None:
    assert len(VALID_QUANTITIES) >= 40


# (input, fragment the message must contain besides the quoted input)
INVALID_QUANTITIES = [
    ("1K", 'unknown suffix "K"'),
    ("1KiB", 'unknown suffix "KiB"'),
    ("1mi", 'unknown suffix "mi"'),
    ("0.1am", 'unknown suffix "am"'),
    ("1i", 'unknown suffix "i"'),
    (".5i", 'unknown suffix "i"'),
    ("1e3i", 'unknown suffix "e3i"'),
    ("1+1.0M", "unknown suffix"),
    ("0x10", "unknown suffix"),
    ("1_000", "unknown suffix"),
    ("1 Gi", "whitespace"),
    (" 1", "whitespace"),
    ("1 ", "whitespace"),
    ("", "empty string"),
    ("Gi", "expected a number"),
    ("abc", "expected a number"),
    ("--1", "expected a number"),
    (".", "expected a number"),
    ("-", "expected a number"),
    ("١", "expected a number"),  # Arabic-Indic one: Go only takes ASCII digits
    ("1.2.3", "more than one decimal point"),
    ("1.1.M", "more than one decimal point"),
    ("1e", "has no digits"),
    ("-3.01e-", "has no digits"),
    ("1e1.5", "whole number"),
    ("1e4294967297", "out of range"),  # TestQuantityParse: rejected, not truncated to 1e1
    ("1E-2147483648", "out of range"),  # TestInterpretExponentInt32Bounds
    ("1" * 601, "significant digits"),
]


@pytest.mark.parametrize(("text", "fragment"), INVALID_QUANTITIES)
def test_invalid_quantity_names_the_string(text: str, fragment: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(text)
    message = str(caught.value)
    assert f'invalid quantity "{text}"' in message
    assert fragment in message


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="2GG"):
        parse_quantity("2GG")


@pytest.mark.parametrize(
    ("text", "hint"),
    [("1K", '"k" or "Ki"'), ("1KiB", '"Ki"'), ("1mi", '"Mi"'), ("8GB", '"G" or "Gi"')],
)
def test_suffix_typos_get_a_suggestion(text: str, hint: str) -> None:
    with pytest.raises(QuantityError, match=f"did you mean {hint}"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("number", "canonical"), [(1, "1"), (0.5, "500m"), (2.0, "2"), (-3, "-3"), (1e16, "10e15")]
)
def test_json_numbers_parse_like_their_text(number: int | float, canonical: str) -> None:
    assert str(parse_quantity(number)) == canonical


@pytest.mark.parametrize("bad", [True, None, float("inf"), float("nan"), [1]])
def test_non_quantity_types_are_rejected(bad: object) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse_quantity(bad)  # type: ignore[arg-type]


def test_zeros_do_not_count_towards_the_digit_limit() -> None:
    assert parse_quantity("1" + "0" * 5000).value() == INT64_MAX
    assert str(parse_quantity("0." + "0" * 5000 + "1")) == "1n"


def test_quantity_is_immutable() -> None:
    quantity = parse_quantity("1Gi")
    with pytest.raises(AttributeError):
        quantity._coefficient = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        quantity.extra = 1  # type: ignore[attr-defined]


def test_quantity_equality_ignores_format_like_go_cmp() -> None:
    assert parse_quantity("1Ki") == parse_quantity("1024")
    assert parse_quantity("1e3") == parse_quantity("1k")
    assert hash(parse_quantity("1e3")) == hash(parse_quantity("1000"))
    assert parse_quantity("1Ki") != parse_quantity("1k")


def test_quantity_ordering_is_exact_even_for_huge_exponents() -> None:
    assert parse_quantity("100m") < parse_quantity("0.2")
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("1e1000") > parse_quantity("9223372036854775807")
    assert parse_quantity("1e2147483647") > parse_quantity("9e2147483646")
    assert parse_quantity("-1e30") < parse_quantity("-1")
    assert parse_quantity("-1") < parse_quantity("0") < parse_quantity("1n")
    assert sorted(parse_quantity(t) for t in ["1Mi", "1M", "1k", "1Ki"]) == [
        parse_quantity(t) for t in ["1k", "1Ki", "1M", "1Mi"]
    ]


def test_exact_value() -> None:
    assert parse_quantity("100m").exact == Fraction(1, 10)
    assert parse_quantity("1.5Gi").exact == Fraction(1536 * MI)
    assert parse_quantity("-2e3").exact == -2000
    with pytest.raises(OverflowError):
        _ = parse_quantity("1e20000").exact


@pytest.mark.parametrize(
    ("coefficient", "exponent", "fmt", "text"),
    [  # TestQuantityString, TestQuantityStringBelowNano, TestBinarySIZeroExponentString
        (1, 21, DSI, "1e21"),
        (5, 21, DSI, "5e21"),
        (1, -10, DSI, "100e-12"),
        (1, -12, DSI, "1e-12"),
        (5, 0, BSI, "5"),
        (500, -3, BSI, "500m"),
        (2000, 0, BSI, "2000"),
        (-2000, 0, BSI, "-2000"),
        (1, 70, BSI, "10e69"),
        (1, 72, BSI, "1e72"),
        (108, -2, DSI, "1080m"),
        (80, -3, DEX, "80e-3"),
        (0, 0, DEX, "0"),
    ],
)
def test_constructed_quantity_strings(
    coefficient: int, exponent: int, fmt: QuantityFormat, text: str
) -> None:
    assert str(Quantity(coefficient, exponent, fmt)) == text


def test_convenience_accessors() -> None:
    assert cpu_milli("1.5") == 1500
    assert cpu_milli("250m") == 250
    assert cpu_milli(2) == 2000
    assert to_int("1Gi") == GI
    assert to_int("0.5") == 1


@pytest.mark.parametrize(
    ("milli", "text"),
    [(1500, "1500m"), (2000, "2"), (100, "100m"), (0, "0"), (1_000_000, "1k"), (-500, "-500m")],
)
def test_format_cpu(milli: int, text: str) -> None:
    assert format_cpu(milli) == text
    assert cpu_milli(text) == milli


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (2 * GI, "2Gi"),
        (1536 * MI, "1536Mi"),
        (1500, "1500"),
        (512, "512"),
        (1000, "1k"),  # Go prints BinarySI values below 1024 as DecimalSI
        (0, "0"),
        (2**70, "1180591620717411303424"),  # past Ei: plain digits (TestBinarySIPastEi...)
        (-2 * GI, "-2Gi"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text
    assert to_int(text) == min(n, INT64_MAX)  # Value() saturates past int64


def test_format_quantity_chooses_by_resource_name() -> None:
    assert format_quantity("cpu", 1500) == "1500m"
    assert format_quantity("memory", 2 * GI) == "2Gi"
    assert format_quantity("ephemeral-storage", 10 * GI) == "10Gi"
    assert format_quantity("hugepages-2Mi", 4 * MI) == "4Mi"
    assert format_quantity("nvidia.com/gpu", 4) == "4"
    assert format_quantity("pods", 110) == "110"


# ----------------------------------------------------------------------------- vectors

NODE_LIST = {
    "cpu": "7910m",
    "memory": "31Gi",
    "pods": "110",
    "ephemeral-storage": "100G",
    "hugepages-2Mi": "1Gi",
    "nvidia.com/gpu": 4,
    "example.com/foo": "2k",
}


def test_from_resource_list_uses_the_scheduler_units() -> None:
    node = ResourceVector.from_resource_list(NODE_LIST)
    assert node.cpu == 7910
    assert node.memory == 31 * GI
    assert node.pods == 110
    assert node.ephemeral_storage == 100 * 10**9
    assert node.get("hugepages-2Mi") == GI
    assert node.get("nvidia.com/gpu") == 4
    assert node.get("example.com/foo") == 2000
    assert node.get("absent") == 0
    assert "nvidia.com/gpu" in node and "absent" not in node


def test_resource_list_round_trip() -> None:
    node = ResourceVector.from_resource_list(NODE_LIST)
    assert node.to_resource_list() == {
        "cpu": "7910m",
        "ephemeral-storage": "97656250Ki",  # 10^11 bytes = 2^10 * 97656250
        "example.com/foo": "2k",
        "hugepages-2Mi": "1Gi",
        "memory": "31Gi",
        "nvidia.com/gpu": "4",
        "pods": "110",
    }
    assert ResourceVector.from_resource_list(node.to_resource_list()) == node
    assert list(node.to_resource_list()) == sorted(NODE_LIST)


def test_resource_list_errors_name_the_resource() -> None:
    with pytest.raises(QuantityError) as caught:
        ResourceVector.from_resource_list({"cpu": "1", "memory": "2GG"})
    assert str(caught.value).startswith('resources["memory"]: invalid quantity "2GG": ')
    with pytest.raises(QuantityError, match=r'^spec\.overhead\["cpu"\]: invalid quantity "x"'):
        ResourceVector.from_resource_list({"cpu": "x"}, where="spec.overhead")
    with pytest.raises(QuantityError, match="expected a mapping"):
        ResourceVector.from_resource_list(["cpu"])  # type: ignore[arg-type]


def test_constructor_validates_amounts() -> None:
    with pytest.raises(TypeError):
        ResourceVector({"cpu": 1.5})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        ResourceVector({"cpu": True})


def test_arithmetic() -> None:
    a = ResourceVector({"cpu": 1000, "memory": GI})
    b = ResourceVector({"cpu": 1500, "nvidia.com/gpu": 1})
    assert (a + b).as_dict() == {"cpu": 2500, "memory": GI, "nvidia.com/gpu": 1}
    assert (a - b).as_dict() == {"cpu": -500, "memory": GI, "nvidia.com/gpu": -1}
    assert a.saturating_sub(b).as_dict() == {"cpu": 0, "memory": GI, "nvidia.com/gpu": 0}
    assert a.scaled(3) == ResourceVector({"cpu": 3000, "memory": 3 * GI})
    assert a.elementwise_max(b).as_dict() == {"cpu": 1500, "memory": GI, "nvidia.com/gpu": 1}
    assert a.as_dict() == {"cpu": 1000, "memory": GI}, "operands are never mutated"
    assert sum([a, b, a], ResourceVector()).cpu == 3500


def test_equality_treats_missing_as_zero() -> None:
    assert ResourceVector({"cpu": 1, "nvidia.com/gpu": 0}) == ResourceVector({"cpu": 1})
    assert hash(ResourceVector({"cpu": 1, "pods": 0})) == hash(ResourceVector({"cpu": 1}))
    assert ResourceVector({"cpu": 1}) != ResourceVector({"cpu": 2})
    assert ResourceVector({"x": 0}).is_zero()
    assert ResourceVector().is_zero()
    assert not ResourceVector({"x": -1}).is_zero()


def test_less_equal_missing_zero_and_infinity() -> None:
    used = ResourceVector({"cpu": 1000, "nvidia.com/gpu": 1})
    capability = ResourceVector({"cpu": 2000})  # says nothing about GPUs
    assert not used.less_equal(capability, missing="zero")
    assert used.less_equal(capability, missing="infinity")
    assert used.less_equal(ResourceVector({"cpu": 2000, "nvidia.com/gpu": 1}))
    # Present on the right but too small fails either way.
    tight = ResourceVector({"cpu": 500})
    assert not used.less_equal(tight, missing="zero")
    assert not used.less_equal(tight, missing="infinity")
    # Absent on the left is 0.
    assert ResourceVector({"cpu": 1}).less_equal(ResourceVector({"cpu": 1, "memory": 5}))
    with pytest.raises(ValueError):
        used.less_equal(capability, missing="none")  # type: ignore[arg-type]


def test_fits_compares_only_requested_dimensions() -> None:
    node_without_gpus = ResourceVector({"cpu": 4000, "memory": 8 * GI, "pods": 10})
    zero_gpus = ResourceVector({"cpu": 1000, "nvidia.com/gpu": 0, "pods": 1})
    one_gpu = ResourceVector({"cpu": 1000, "nvidia.com/gpu": 1, "pods": 1})
    assert zero_gpus.fits_in(node_without_gpus)
    assert not one_gpu.fits_in(node_without_gpus)
    assert fits(zero_gpus, node_without_gpus) and not fits(one_gpu, node_without_gpus)
    # Exactly full fits; one millicore more does not.
    assert ResourceVector({"cpu": 4000}).fits_in(node_without_gpus)
    assert not ResourceVector({"cpu": 4001}).fits_in(node_without_gpus)
    # An over-committed node (negative free) still takes requests that do not need that dimension.
    overcommitted = ResourceVector({"cpu": -500, "memory": GI})
    assert ResourceVector({"memory": GI}).fits_in(overcommitted)


def test_insufficient_names_dimensions_in_report_order() -> None:
    request = ResourceVector(
        {"nvidia.com/gpu": 4, "memory": 2 * GI, "cpu": 1500, "pods": 1, "example.com/a": 1}
    )
    free = ResourceVector({"nvidia.com/gpu": 2, "memory": GI, "cpu": 1000, "pods": 0})
    short = insufficient_resources(request, free)
    assert short == [
        ("pods", 1, 0),
        ("cpu", 1500, 1000),
        ("memory", 2 * GI, GI),
        ("example.com/a", 1, 0),
        ("nvidia.com/gpu", 4, 2),
    ]
    assert request.insufficient(request) == []
    assert [format_shortfall(*item) for item in short[1:3]] + [format_shortfall(*short[4])] == [
        "not enough cpu (need 1500m, free 1)",
        "not enough memory (need 2Gi, free 1Gi)",
        "not enough nvidia.com/gpu (need 4, free 2)",
    ]


# ------------------------------------------------------------------------------ pod requests


def container(requests: dict | None = None, limits: dict | None = None, **extra: object) -> dict:
    resources: dict = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources, **extra}


def sidecar(requests: dict) -> dict:
    return container(requests, restartPolicy="Always")


def test_plain_containers_are_summed_and_occupy_one_pod_slot() -> None:
    spec = {
        "containers": [
            container({"cpu": "100m", "memory": "1Gi"}),
            container({"cpu": "200m", "memory": "512Mi", "nvidia.com/gpu": "1"}),
        ]
    }
    assert pod_requests(spec).as_dict() == {
        "cpu": 300,
        "memory": GI + 512 * MI,
        "nvidia.com/gpu": 1,
        "pods": 1,
    }
    assert "pods" not in pod_requests(spec, count_pod=False)


def test_init_container_larger_than_the_sum_wins_per_dimension() -> None:
    spec = {
        "initContainers": [container({"cpu": "2", "memory": "100Mi"})],
        "containers": [container({"cpu": "500m", "memory": "512Mi"})] * 2,
    }
    requests = pod_requests(spec, count_pod=False)
    assert requests.cpu == 2000  # the init container
    assert requests.memory == GI  # the two regular containers


def test_sidecars_add_to_the_pod_and_to_later_init_containers() -> None:
    spec = {
        "initContainers": [
            sidecar({"cpu": "100m"}),
            container({"cpu": "1"}),  # runs next to the first sidecar: 1100m
            sidecar({"cpu": "200m"}),
            container({"cpu": "500m"}),  # runs next to both sidecars: 800m
        ],
        "containers": [container({"cpu": "300m"})],  # steady state: 300 + 100 + 200 = 600m
    }
    assert pod_requests(spec, count_pod=False).cpu == 1100


def test_sidecar_order_matters() -> None:
    regular = [container({"cpu": "1"})]
    late_sidecar = {
        "initContainers": [container({"cpu": "1200m"}), sidecar({"cpu": "500m"})],
        "containers": regular,
    }
    early_sidecar = {
        "initContainers": [sidecar({"cpu": "500m"}), container({"cpu": "1200m"})],
        "containers": regular,
    }
    assert pod_requests(late_sidecar, count_pod=False).cpu == 1500  # 1000 + 500 steady state
    assert pod_requests(early_sidecar, count_pod=False).cpu == 1700  # 1200 + 500 during init


def test_overhead_is_added() -> None:
    spec = {
        "containers": [container({"cpu": "1", "memory": "1Gi"})],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert pod_requests(spec).as_dict() == {"cpu": 1250, "memory": GI + 120 * MI, "pods": 1}


def test_containers_without_requests_contribute_nothing() -> None:
    spec = {
        "containers": [
            {"name": "a", "image": "x"},
            {"name": "b", "image": "x", "resources": {}},
            {"name": "c", "image": "x", "resources": {"requests": None}},
            container({"cpu": "250m"}),
        ],
        "initContainers": [{"name": "i", "image": "x"}],
    }
    assert pod_requests(spec).as_dict() == {"cpu": 250, "pods": 1}
    empty = {"containers": [{"name": "a", "image": "x"}]}
    assert pod_requests(empty) == ResourceVector({"pods": 1})
    assert pod_requests(empty, count_pod=False).is_zero()


def test_limits_default_missing_requests_like_the_api_server() -> None:
    spec = {
        "containers": [
            container(limits={"cpu": "1", "nvidia.com/gpu": "2"}),
            container({"cpu": "500m"}, limits={"cpu": "2", "memory": "1Gi"}),
        ]
    }
    assert pod_requests(spec, count_pod=False).as_dict() == {
        "cpu": 1500,
        "nvidia.com/gpu": 2,
        "memory": GI,
    }
    as_given = pod_requests(spec, count_pod=False, default_requests_from_limits=False)
    assert as_given.as_dict() == {"cpu": 500}


def test_pod_level_requests_replace_cpu_and_memory() -> None:
    spec = {
        "resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "8"}},
        "containers": [container({"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"})],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec, count_pod=False).as_dict() == {
        "cpu": 2100,  # pod-level 2 + overhead
        "memory": 4 * GI,
        "nvidia.com/gpu": 1,  # not a pod-level resource: the containers' sum stays
    }
    assert pod_requests(spec, count_pod=False, pod_level_resources=False).cpu == 600


def test_pod_request_errors_name_the_field() -> None:
    spec = {"containers": [container({"cpu": "1"}), container({"cpu": "1 core"})]}
    with pytest.raises(QuantityError) as caught:
        pod_requests(spec)
    assert str(caught.value).startswith(
        'spec.containers[1].resources.requests["cpu"]: invalid quantity "1 core"'
    )


def test_pod_requests_wants_the_spec_not_the_pod() -> None:
    with pytest.raises(TypeError, match=r"pod\['spec'\]"):
        pod_requests({"metadata": {}, "spec": {"containers": []}})


def test_nonzero_requests_default_missing_cpu_and_memory() -> None:
    assert DEFAULT_MILLI_CPU_REQUEST == 100
    assert DEFAULT_MEMORY_REQUEST == 200 * MI
    spec = {
        "containers": [
            {"name": "a", "image": "x"},
            container({"cpu": "0", "memory": "1Gi"}),  # explicit 0 cpu stays 0
        ]
    }
    assert pod_nonzero_requests(spec, count_pod=False).as_dict() == {
        "cpu": 100,
        "memory": 200 * MI + GI,
    }
    assert pod_requests(spec, count_pod=False).as_dict() == {"cpu": 0, "memory": GI}


def test_nonzero_requests_apply_to_init_containers_too() -> None:
    spec = {
        "initContainers": [{"name": "i", "image": "x"}, container({"cpu": "50m"})],
        "containers": [container({"cpu": "10m", "memory": "10Mi"})],
    }
    requests = pod_nonzero_requests(spec)
    assert requests.cpu == 100  # the defaulted init container beats 10m
    assert requests.memory == 200 * MI  # so does its defaulted memory
    assert requests.pods == 1


def test_a_total_is_the_sum_of_repeated_additions() -> None:
    """`ResourceVector.total` keeps every name any term has, explicit zeros too, as `+` does."""
    terms = [
        ResourceVector({"cpu": 1000, "memory": 2}),
        ResourceVector({"nvidia.com/gpu": 0}),
        ResourceVector({"cpu": -250, "pods": 1}),
    ]
    added = ResourceVector()
    for term in terms:
        added = added + term
    total = ResourceVector.total(terms)
    assert (
        total.as_dict()
        == added.as_dict()
        == {
            "cpu": 750,
            "memory": 2,
            "nvidia.com/gpu": 0,
            "pods": 1,
        }
    )
    assert total.names() == added.names()
    assert ResourceVector.total([]).as_dict() == {}
