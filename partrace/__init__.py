"""partrace: MPI-parallel trace processing (OTF, DUMPI, ovni, ROSS -> HDF5 / OTF).

``partrace.open(path)`` and ``partrace.merge(trace, output)`` are the Python
API (see partrace.api); they are imported on first use so that importing the
package (at every rank of a large job) stays cheap.
"""
__version__ = "0.1.0"
__all__ = ["open", "merge", "__version__"]


def __getattr__(name):
    if name in ("open", "merge", "TraceData"):
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'partrace' has no attribute {name!r}")
