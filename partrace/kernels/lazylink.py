"""A kernel loaded from numba's cache parses its LLVM bitcode only when something links it.

numba caches a kernel as its object code (what runs) and its bitcode (kept so that a
kernel compiled later can link the cached one in and inline it).  Loading parses both:
the bitcode for nothing but the names of the symbols the object defines, which numba
keeps to answer ``is_symbol_defined`` before asking the execution engine for an address.
A run that only loads kernels never links one, so the parse (and the walk over the
parsed module) is about 10 % of numba's whole start-up, on every rank.

Here a cached library keeps its bitcode as bytes and parses it the first time a
library links it in (``_get_module_for_linking``).  The names come from the object
code's own ELF symbol table instead: a name defined there is defined in the engine.  A
name not found there is answered as numba answers it, after parsing every library
still waiting (names that exist only in the bitcode: private constants), so a "no" is
always numba's.

numba's internals are used as found in the numba versions listed in ``VERIFIED``; any
other version, a codegen or library class that is not numba's own, or object code that
is not 64-bit little-endian ELF, loads the numba way.
"""
from __future__ import annotations

import struct

VERIFIED = ("0.68",)

_ELF64_LE = b"\x7fELF\x02\x01"
_SHT_SYMTAB = 2
_STT_OBJECT, _STT_FUNC = 1, 2
# how numba mangles the name of a kernel's Python wrapper (fndesc.llvm_cpython_wrapper_name)
_CPYTHON_WRAPPER = "_ZN7cpython"


def elf_defined_symbols(obj: bytes) -> set[str] | None:
    """Names of the functions and data objects ``obj`` (a 64-bit little-endian ELF object)
    defines; None if it is not one this reads."""
    if obj[:6] != _ELF64_LE or len(obj) < 64:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    if shentsize != 64 or shoff + shnum * 64 > len(obj):
        return None
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * 64) for i in range(shnum)]
    names: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != _SHT_SYMTAB:
            continue
        if entsize != 24 or link >= shnum or offset + size > len(obj):
            return None
        str_off, str_size = sections[link][4], sections[link][5]
        strtab = obj[str_off:str_off + str_size]
        symbols = struct.iter_unpack("<IBBHQQ", obj[offset:offset + size])
        for name_at, info, _, shndx, _, _ in symbols:
            if shndx != 0 and (info & 0xF) in (_STT_OBJECT, _STT_FUNC):
                names.add(strtab[name_at:strtab.index(b"\0", name_at)].decode())
    return names


def _classes(codegen_module):
    """The library and engine classes that defer the bitcode (made once numba is imported)."""
    base_library, base_engine = codegen_module.JITCodeLibrary, codegen_module.JitEngine

    class LazyLinkLibrary(base_library):
        """A library from the cache whose bitcode is parsed when it is first linked."""
        _pending_bitcode: bytes | None = None

        def parse_pending(self) -> None:
            if self._pending_bitcode is not None:
                bitcode, self._pending_bitcode = self._pending_bitcode, None
                self._shared_module = codegen_module.ll.parse_bitcode(bitcode)
                self._codegen._engine._load_defined_symbols(self._shared_module)

        def _get_module_for_linking(self):
            self.parse_pending()
            return super()._get_module_for_linking()

    class LazyLinkEngine(base_engine):
        """Answers from the object code's symbols first; a miss is numba's answer, once
        every waiting library's bitcode is parsed."""

        def is_symbol_defined(self, name):
            if name in self._defined_symbols:
                return True
            if name.startswith(_CPYTHON_WRAPPER):
                # a function (numba's Python wrapper of a kernel), so in the object code's
                # symbols if it is anywhere: a C callback (cfunc) loaded from the cache has
                # none, and asking for it parsed every waiting library's bitcode
                return False
            waiting = getattr(self, "_waiting", None)
            while waiting:
                library = waiting.pop()
                library.parse_pending()
            return name in self._defined_symbols

    return LazyLinkLibrary, LazyLinkEngine


def _unserialize_lazily(codegen, state, classes):
    """numba's ``CPUCodeLibrary._unserialize`` for an object-code library, the bitcode
    left unparsed; None where it would not be numba's own steps (the caller loads the
    numba way)."""
    name, kind, data = state
    if kind != "object":
        return None
    object_code, shared_bitcode = data
    defined = elf_defined_symbols(object_code)
    if defined is None:
        return None
    library_class, engine_class = classes
    library = codegen.create_library(name)
    if type(library) is not library_class.__mro__[1]:
        return None
    library.__class__ = library_class
    engine = codegen._engine
    if type(engine) is engine_class.__mro__[1]:
        engine.__class__ = engine_class
        engine._waiting = []
    if type(engine) is not engine_class:
        return None
    library.enable_object_caching()
    library._set_compiled_object(object_code)
    library._pending_bitcode = shared_bitcode
    library._finalize_final_module()
    engine._defined_symbols |= defined
    engine._waiting.append(library)
    return library


_installed: dict[int, bool] = {}     # id of a codegen -> whether it loads lazily


def install(codegen) -> bool:
    """Make ``codegen`` (numba's CPU JIT codegen of the process) load cached libraries with
    their bitcode deferred; False (numba's own loading) where it is not the verified
    numba or class.  Decided once per codegen: every kernel load asks."""
    if id(codegen) not in _installed:
        _installed[id(codegen)] = _install(codegen)
    return _installed[id(codegen)]


def _install(codegen) -> bool:
    try:
        import numba
        from numba.core import codegen as codegen_module
        if ".".join(numba.__version__.split(".")[:2]) not in VERIFIED:
            return False
        if type(codegen) is not codegen_module.JITCPUCodegen:
            return False
        needed = ((codegen_module.CPUCodeLibrary, ("_get_module_for_linking",
                   "_finalize_final_module", "enable_object_caching", "_set_compiled_object")),
                  (codegen_module.JitEngine, ("_load_defined_symbols", "is_symbol_defined")))
        if not all(hasattr(cls, m) for cls, names in needed for m in names):
            return False
        if not hasattr(codegen, "_engine") or not hasattr(codegen._engine, "_defined_symbols"):
            return False
        classes = _classes(codegen_module)
    except Exception:       # an unexpected numba: its own loading
        return False
    numba_unserialize = codegen.unserialize_library

    def unserialize_library(serialized):
        try:
            library = _unserialize_lazily(codegen, serialized, classes)
        except Exception:
            library = None
        return library if library is not None else numba_unserialize(serialized)

    codegen.unserialize_library = unserialize_library
    return True
