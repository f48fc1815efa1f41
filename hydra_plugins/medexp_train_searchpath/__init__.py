"""Search path of ``python -m medexp.train`` (see :mod:`.medexp_train_searchpath`)."""
