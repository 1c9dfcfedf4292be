"""The gate: did a change make it slower? Two stored runs judged case by case (``compare``, its
limits learned from A/A pairs of the history: ``noise``), two revisions measured side by side on
one GPU (``ab``, its cases chosen from the diff: ``ab_cases``, its two children: ``ab_probe``,
the interval of a ratio from pairs: ``paired``, the hardware counters behind a flagged case:
``ab_counters``),
and the commit that made a case slower (``bisect``, ``bisect_git``, ``bisect_probe``). Reads
storage and the asv adapter; never the reports or the site."""
