"""The page's way through a worker: the stages around the engine (``host``), and the read
stage that orders and writes out what a reader of line boxes found (``read``)."""
