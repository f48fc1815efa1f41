"""The kernel: small modules every layer builds on, importing nothing of medexp above them.

``atomic`` (write-then-rename, building a directory once under a lock), ``hashing`` (stable
content hashes, file digests and derived seeds), ``registry`` (``import_object("module:attr")``,
which every table resolves its entries with), ``portable`` (a build in a pinned-kernel process,
and how a process's CPU kernels were chosen), ``cell`` (the cell key and the seed derived from it)
and ``shards`` (the verified, resumable shard store the caches fill, several jobs together).
"""
