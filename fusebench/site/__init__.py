"""The published site: ``asv publish`` and everything fusebench adds (``site``), its first page,
the answer per GPU (``landing``), asv's pages made readable (``site_fixes``, ``site_readable``),
fusebench's own pages on templates that escape by default (``site_pages``, ``templates/``: the
landing, Runs, Plots and Verdicts pages; ``verdicts``) and which stored results the site will draw
(``drawable``). The top room: nothing imports it but the commands."""
