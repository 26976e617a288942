"""The page's way through a worker: its stages (``stages``), the read stage that orders
and writes out what a reader of line boxes found (``read``), and the worker processes
that run them (``host``)."""
