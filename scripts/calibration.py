"""Leave-one-pair-out check of the gate's history rule on the committed records of one machine
(``fusebench.history.noise.calibration``; docs/gate.md): per gated metric, how many A/A samples
moved beyond the limit learned from the other pairs, and how many limits are at most 1.05. Runs
on any host, no GPU, from the project root:

    PYTHONPATH=. python scripts/calibration.py [machine]      # default h200
"""

import re
import sys
from pathlib import Path

from fusebench.history import noise


def main() -> None:
    machine = sys.argv[1] if len(sys.argv) > 1 else "h200"
    folder = Path("records") / machine
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", machine) or not folder.is_dir():
        sys.exit(f"calibration: no records of machine {machine!r} in records/ (run from the project root)")
    history = noise.from_records(folder, Path("."))
    pairs = {tuple(sorted(s.pair)) for ss in history.samples.values() for s in ss}
    print(f"{machine}: {len(pairs)} A/A pairs with samples")
    for field, c in noise.calibration(history).items():
        print(f"  {field}: {c['samples']} samples, {c['beyond']} beyond their limit, "
              f"{100 * c['at_5']:.1f} % of limits at most 1.05, median limit {c['median_limit']:.3f}")


if __name__ == "__main__":
    main()
