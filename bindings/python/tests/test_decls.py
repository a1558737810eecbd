"""The ctypes declarations agree with include/tiga.h: _decls.py is what gen_decls.py makes of the
header now (a constant or signature changed without regenerating fails here), every function is
bound and used by the package, struct sizes agree with the library's *_init functions, and the
library's API version is the header's."""
import ctypes as C
import importlib.util
import os
import re

import pytest

import tiga
from tiga import _decls, _ffi

from conftest import REPO

HEADER = os.path.join(REPO, "include", "tiga.h")
PKG = os.path.dirname(tiga.__file__)


def _generator():
    path = os.path.join(REPO, "bindings", "python", "tools", "gen_decls.py")
    spec = importlib.util.spec_from_file_location("gen_decls", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(not os.path.exists(HEADER), reason="needs the source checkout (include/tiga.h)")
def test_decls_match_header():
    gen = _generator()
    with open(HEADER) as f:
        parsed = gen.parse(f.read())
    for key, table in [("functions", _decls.FUNCTIONS), ("constants", _decls.CONSTANTS), ("enums", _decls.ENUMS),
                       ("structs", _decls.STRUCTS), ("callbacks", _decls.CALLBACKS)]:
        want = {k: (tuple(map(tuple, v[1])) if key in ("functions", "callbacks") else v) for k, v in parsed[key].items()}
        got = {k: (tuple(map(tuple, v[1])) if key in ("functions", "callbacks") else v) for k, v in table.items()}
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        assert not missing and not extra, f"{key}: in tiga.h only {missing}; in _decls.py only {extra}"
        for k in want:
            assert want[k] == got[k], f"{key} {k}: tiga.h says {want[k]!r}, _decls.py {got[k]!r}"
        if key in ("functions", "callbacks"):
            for k in want:
                assert parsed[key][k][0] == table[k][0], f"return type of {k}"


def test_parser_sees_every_declaration():
    """The generator must not silently skip a declaration: count TG_API functions by a plain scan."""
    if not os.path.exists(HEADER):
        pytest.skip("needs the source checkout")
    with open(HEADER) as f:
        text = f.read()
    names = set(re.findall(r"TG_API[^;]*?\b(tg_\w+)\s*\(", re.sub(r"/\*.*?\*/", "", text, flags=re.S)))
    assert names == set(_decls.FUNCTIONS)


def test_generated_file_is_current():
    if not os.path.exists(HEADER):
        pytest.skip("needs the source checkout")
    gen = _generator()
    with open(HEADER) as f:
        text = gen.render(gen.parse(f.read()))
    with open(os.path.join(PKG, "_decls.py")) as f:
        assert f.read() == text, "run bindings/python/tools/gen_decls.py"


def test_every_function_is_bound_and_used():
    sources = ""
    for name in os.listdir(PKG):
        if name.endswith(".py") and name != "_decls.py":
            with open(os.path.join(PKG, name)) as f:
                sources += f.read()
    unused = []
    for name, (res, params) in _decls.FUNCTIONS.items():
        f = getattr(_ffi.lib, name)
        assert len(f.argtypes) == len(params), name
        if name in ("tg_api_version",):
            continue
        if name.endswith("_init") and name[:-5] in _decls.STRUCTS and f'"{name[:-5]}"' in sources:
            continue  # called as new_struct("<struct>")
        if not re.search(rf"\b{name}\b", sources):
            unused.append(name)
    assert not unused, f"functions of tiga.h the package does not wrap: {unused}"


def test_struct_sizes_match_the_library():
    for name in _decls.STRUCTS:
        init = getattr(_ffi.lib, name + "_init", None)
        assert init is not None, f"{name} has no {name}_init"
        buf = (C.c_ubyte * 4096)()
        init(buf)
        size = C.c_size_t.from_buffer(buf).value
        assert size == C.sizeof(_ffi.STRUCT_TYPES[name]), f"{name}: library {size}, ctypes {C.sizeof(_ffi.STRUCT_TYPES[name])}"


def test_versions():
    assert tiga.api_version() == _decls.CONSTANTS["TIGA_API_VERSION"] == tiga.API_VERSION
    assert tiga.version().startswith(tiga.__version__)
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return
    try:
        assert version("tiga") == tiga.__version__
    except PackageNotFoundError:
        pass  # running from the source tree


def test_enums_and_names():
    assert tiga.status_string(tiga.Status.TG_ERR_SHAPE) == "TG_ERR_SHAPE"
    assert tiga.dtype_name("bf16") == "bf16" and tiga.dtype_size(tiga.F64) == 8
    assert tiga.provider_name(tiga.HOST) == "host"
    assert int(tiga.CUDA) == _decls.CONSTANTS["TG_PROVIDER_CUDA"]
