"""Reports: what a run and its history say to a reader. The end-of-run summary and its tables
(``summary``), the marks on figures that cannot be taken at face value (``marks``), the generated
result documents (``resultsdoc``), the plots (``plots``) and the ops described without torch for
them (``described``). Reads storage, the asv adapter and the gate; never the site."""
