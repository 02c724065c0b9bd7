"""partrace: MPI-parallel trace processing (OTF, DUMPI, ovni, ROSS -> HDF5 / OTF)."""
__version__ = "0.1.0"
