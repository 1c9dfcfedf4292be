"""The lecture's experiments (the timing pitfalls, the ``torch.profiler`` table, the MLP scaling)
and their stored reports."""
