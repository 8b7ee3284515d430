"""The carriers of budget.py against the contract's table (CONVENTIONS.md section 1): the first
present and valid carrier wins; a malformed value counts as absent and is reported."""

from budget import read_budget

CASES = [
    ({"x-budget-ms": "250"}, (250, "x-budget-ms", None)),
    ({"x-budget-ms": "0"}, (0, "x-budget-ms", None)),
    ({"x-budget-ms": "2147483648"}, (2147483648, "x-budget-ms", None)),
    ({"grpc-timeout": "2S"}, (2000, "grpc-timeout", None)),
    ({"grpc-timeout": "1500m"}, (1500, "grpc-timeout", None)),
    ({"grpc-timeout": "1M"}, (60000, "grpc-timeout", None)),
    ({"grpc-timeout": "2500000u"}, (2500, "grpc-timeout", None)),
    ({"grpc-timeout": "99999999n"}, (99, "grpc-timeout", None)),
    ({"x-budget-ms": "300", "grpc-timeout": "1S"}, (300, "x-budget-ms", None)),
    ({"x-budget-ms": "soon", "grpc-timeout": "1S"}, (1000, "grpc-timeout", None)),
    ({"x-budget-ms": "soon"}, (None, "invalid", "soon")),
    ({"x-budget-ms": "-5"}, (None, "invalid", "-5")),
    ({"x-budget-ms": "2147483649"}, (None, "invalid", "2147483649")),
    ({"x-budget-ms": "99999999999"}, (None, "invalid", "99999999999")),
    ({"grpc-timeout": "123456789m"}, (None, "invalid", "123456789m")),
    ({"grpc-timeout": "5s"}, (None, "invalid", "5s")),
    ({}, (None, "none", None)),
]

for headers, expected in CASES:
    got = read_budget(headers)
    assert got == expected, f"{headers}: got {got}, want {expected}"
print(f"{len(CASES)} cases ok")
