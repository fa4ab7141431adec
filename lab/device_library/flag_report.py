"""Markdown summary of a survey replay (``replay_survey.py --json``): counts, and every flagged call by reason.

    python3 lab/device_library/flag_report.py REPLAY.json
"""

import json
import sys
from collections import defaultdict


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: flag_report.py REPLAY.json", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as fh:
        results = json.load(fh)
    n = len(results)
    exact = sum(r["exact"] for r in results)
    flagged = [r for r in results if not r["modelled"]]
    silent = [r for r in results if r["modelled"] and not r["exact"]]
    print(f"{n} calls: {exact} bit-exact ({100 * exact / n:.1f}%), {len(flagged)} flagged not modelled "
          f"({sum(r['exact'] for r in flagged)} of them exact anyway), {len(silent)} silent misses.\n")
    groups = defaultdict(list)
    for r in flagged:
        groups[(r["family"].split(" (")[0][:70], r["reason"][:160])].append(r)
    print("| flagged family | reason | calls (id: op fmt M x N x K) |\n|---|---|---|")
    for (fam, reason), rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        calls = ", ".join(f"{r['id']}: {r['op']} {r['fmt']} {'x'.join(str(v) for v in r['shape'][1:])}"
                          + (f" (b={r['shape'][0]})" if r["shape"][0] else "") for r in rs)
        print(f"| {fam} | {reason} | {len(rs)}: {calls} |")
    return 1 if silent else 0


if __name__ == "__main__":
    sys.exit(main())
