"""Leave-one-pair-out check of the gate's history rule on the committed records of one machine
(``fusebench.gate.noise.calibration``; docs/gate.md): per gated metric, how many A/A samples
moved beyond the limit learned from the other pairs, and how many limits are at most 1.05. Runs
on any host, no GPU, from the project root of a git checkout that holds the records' commits:

    PYTHONPATH=. python scripts/calibration.py [machine]      # default h200

Bad input (an unknown machine, more than one argument, records with no A/A pair) is one line and
exit 1.
"""

import re
import sys
from pathlib import Path

from fusebench.gate import noise

USAGE = "usage: PYTHONPATH=. python scripts/calibration.py [machine]   (from the project root)"


def main(argv: list[str]) -> None:
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        sys.exit(USAGE)
    machine = argv[0] if argv else "h200"
    folder = Path("records") / machine
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", machine) or not folder.is_dir():
        sys.exit(f"calibration: no records of machine {machine!r} in records/ (run from the project root)")
    history = noise.from_records(folder, Path("."))
    pairs = {tuple(sorted(s.pair)) for ss in history.samples.values() for s in ss}
    if not pairs:
        sys.exit(f"calibration: no A/A pair in {folder}: it needs two readable records of the same "
                 "environment whose commits are in this git checkout")
    print(f"{machine}: {len(pairs)} pairs of records give A/A samples")
    for field, c in noise.calibration(history).items():
        print(f"  {field}: {c['samples']} samples, {c['beyond']} beyond their limit, "
              f"{100 * c['at_5']:.1f} % of limits at most 1.05, median limit {c['median_limit']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
