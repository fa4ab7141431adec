"""Pack an op survey (``survey_ops.py`` output) into one committed replay file.

    PYTHONPATH=src:lab/device_library python3 lab/device_library/export_survey.py SURVEY_DIR \
        vectors/library/hopper_op_survey_h100.npz

The file holds the sampled output bits and sample indices of every call (``d{id}``, ``rows{id}``,
``cols{id}``, ``batches{id}``) and ``meta``: the JSON index (calls, seeds, kernels torch.profiler
recorded, environment).  Operands are not stored: ``inputs.hashed_values`` rebuilds them from the seeds.
"""

import json
import os
import sys

import numpy as np


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: export_survey.py SURVEY_DIR OUT.npz", file=sys.stderr)
        return 2
    src, dst = sys.argv[1:]
    with open(os.path.join(src, "index.json")) as fh:
        index = json.load(fh)
    with np.load(os.path.join(src, "survey.npz"), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez_compressed(dst, meta=np.array(json.dumps(index)), **arrays)
    print(f"{dst}: {len(index['records'])} calls, {os.path.getsize(dst) / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
