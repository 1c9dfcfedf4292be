"""Nsight Systems captures: the plan of cases, NVTX ranges, the capture window (also used by the
``torch.profiler`` trace of the same plan), the nsys tool and its statistics, the per-range summary;
and Nsight Compute's counters of the same plan (the ncu tool, its raw page, the per-case summary)."""
