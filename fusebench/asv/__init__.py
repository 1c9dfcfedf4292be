"""The asv adapter: the generated asv suite (``asvsuite``: one class per op, its parameters and
metrics), asv's environment settings (``asv_env``), the asv result files written from a run record
with asv's own classes (``store``) and ``asv publish`` run with its step detection streamed
(``asv_publish``). Above storage; below the gate, the reports and the site."""
