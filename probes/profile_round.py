"""Where a round's time goes: GELU and softmax (eager, torch, compile, triton), one round, under
cProfile (issue 26's cost; docs/gate.md). Run on a GPU host from the project root:
PYTHONPATH=. python probes/profile_round.py
"""

import cProfile
import io
import pstats
import time

from fusebench import ops as registry
from fusebench.measure import sweep

ops = [registry.get_op("gelu"), registry.get_op("softmax")]
pr = cProfile.Profile()
t = time.perf_counter()
pr.enable()
s = sweep.run(
    ops,
    quick=False,
    rounds=1,
    backend_names=("eager", "torch", "compile", "triton"),
    out=open("/dev/null", "w"),
)
pr.disable()
print("wall", round(time.perf_counter() - t, 1), "phases", s.phases)
for key in ("tottime", "cumulative"):
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats(key).print_stats(28)
    print(buf.getvalue()[-6000:])
