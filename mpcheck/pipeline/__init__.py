"""The run: one file through the engine and the rules (:mod:`one_file`), many files in workers
(:mod:`pool`), and the cache that skips unchanged ones (:mod:`cache`, :mod:`incremental`)."""
