"""The results' history: asv storage, the run records, the regression gate, the end-of-run
summary, the published site and its plots, and the merge of many hosts' results."""
