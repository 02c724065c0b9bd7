from .engine.stop import install

install()       # first: a signal during the imports below exits 143 cleanly
from .cli import entry  # noqa: E402

entry()
