"""cocotb testbench: replay golden vectors (the tcnumerics hex form) through a dot-product unit.

Environment: ``TCN_VECTORS`` the hex vector file; ``TCN_RESULT`` (optional) a JSON file the
outcome is written to.  The DUT has ports ``a``, ``b`` (K operands packed, element 0 in the
low bits), ``c`` and ``d``.  The test fails at the first vector whose ``d`` differs, naming
the vector's index and family.
"""

import json
import os

import cocotb
from cocotb.triggers import Timer


def read_vectors(path):
    """(family, c, d, a list, b list) per vector line of a tcnumerics hex file."""
    out = []
    with open(path) as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            f = line.split()
            k = (len(f) - 3) // 2
            out.append((f[0], int(f[1], 16), int(f[2], 16), [int(x, 16) for x in f[3:3 + k]],
                        [int(x, 16) for x in f[3 + k:3 + 2 * k]]))
    return out


def pack(values, width):
    word = 0
    for i, v in enumerate(values):
        word |= v << (i * width)
    return word


@cocotb.test()
async def replay(dut):
    vectors = read_vectors(os.environ["TCN_VECTORS"])
    width = len(dut.a) // len(vectors[0][3])
    first = None
    for i, (fam, c, d, a, b) in enumerate(vectors):
        dut.a.value = pack(a, width)
        dut.b.value = pack(b, width)
        dut.c.value = c
        await Timer(1, "step")
        got = int(dut.d.value)
        if got != d:
            first = {"index": i, "family": fam, "expected": d, "got": got}
            break
    if os.environ.get("TCN_RESULT"):
        with open(os.environ["TCN_RESULT"], "w") as fh:
            json.dump({"vectors": len(vectors), "first_failure": first}, fh)
    assert first is None, (f"vector {first['index']} (family {first['family']}) fails: expected d="
                           f"{first['expected']:#010x}, got {first['got']:#010x}")
