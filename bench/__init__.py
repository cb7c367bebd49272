"""Benchmarks and prepared checks of the SRU layer and the tasks, kept outside the layer library ``sru``
(which ships without them). ``scripts/`` holds one thin command per module here; ``harness`` holds what
every benchmark shares: timers, interleaved rounds, paired ratios, the machine description, Markdown
tables and the one relative-error measure."""
