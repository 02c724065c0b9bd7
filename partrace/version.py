"""The package's version, in a module of its own at the bottom of the house: what stamps a
file it writes (the HDF5 layout's ``created_by``) and ``--version`` read it here, not from
``partrace/__init__.py``, whose lazy API would tie them to every room above."""
__version__ = "0.1.0"
