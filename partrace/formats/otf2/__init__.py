"""OTF2 (Score-P's Open Trace Format 2): an encoder only, on the official library.

The ``otf2`` package (PyPI) bundles libotf2 and its ctypes bindings (``_otf2``).
Definitions are few and go through those bindings (definitions.py); events go
straight from a numba loop to the library's C event writers (events.py), so the
library itself encodes every record (compressed integers, timestamps, chunks)
and checks what it can (a location's timestamps never go back).
"""
