"""Storage: what a run leaves and how it is kept. The run records (``runrecord``: the source of
every figure), the one transactional writer of results and records (``transaction``), the checks
of every file from another host or a user (``untrusted``), the merge of many hosts' folders
(``collect``, ``shares``), the check that a run can store before it measures (``preflight``) and
the reader of stored asv results (``results``). Imports nothing of the rooms above it (asv, gate,
report, site)."""
