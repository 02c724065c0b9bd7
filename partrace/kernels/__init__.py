"""What every layer's compiled kernels stand on, and no format owns.

``jit``: the lazy ``@njit`` (a kernel runs as Python on small inputs, compiled by
numba otherwise) and the process's jit mode.  ``reduce``: one-pass reductions
(a column's smallest and largest element) that the engine and the HDF5 codec
both need.  Nothing here imports a format, the engine or an output.
"""
