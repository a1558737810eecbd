#!/usr/bin/env python3
"""Generates tiga/_decls.py (functions, constants, enums, structs, callbacks) from include/tiga.h.

    python3 bindings/python/tools/gen_decls.py            # rewrites bindings/python/tiga/_decls.py
    python3 bindings/python/tools/gen_decls.py --check    # exit 1 when the file is out of date

tests/test_decls.py runs the check, so a constant or signature that changes in tiga.h without a
regenerated _decls.py fails the suite. The parser knows only the forms tiga.h uses (one
declaration per TG_API line group, typedef enum / struct blocks, #define of numbers)."""
import os
import pprint
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "..", "..", "include", "tiga.h")
OUT = os.path.join(HERE, "..", "tiga", "_decls.py")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def norm_type(t):
    """'const  int64_t*' -> 'const int64_t *' (one space before each '*', none after)."""
    t = re.sub(r"\s+", " ", t.strip())
    t = re.sub(r"\s*\*\s*", " *", t)
    t = t.replace("* const", "*const")
    while "* *" in t:
        t = t.replace("* *", "**")
    return t.strip()


def split_decl(decl):
    """'const int64_t *shape' -> ('const int64_t *', 'shape', None); 'int64_t shape[TG_MAX_DIMS]' -> dims."""
    decl = decl.strip()
    m = re.match(r"^(.*?)([A-Za-z_]\w*)\s*(\[\s*(\w+)\s*\])?$", decl, re.S)
    if not m:
        raise ValueError(f"cannot parse declaration {decl!r}")
    return norm_type(m.group(1)), m.group(2), m.group(4)


def parse(text):
    raw = text
    text = re.sub(r"^\s*#.*$", " ", strip_comments(text), flags=re.M)  # declarations only
    out = {"functions": {}, "constants": {}, "enums": {}, "structs": {}, "callbacks": {}, "typedefs": {}}
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        vals, nxt = {}, 0
        for item in [s.strip() for s in m.group(2).split(",") if s.strip()]:
            if "=" in item:
                k, v = [s.strip() for s in item.split("=", 1)]
                nxt = int(v, 0)
            else:
                k = item
            vals[k] = nxt
            nxt += 1
        out["enums"][m.group(3)] = vals
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        fields = []
        for stmt in [s.strip() for s in m.group(2).split(";") if s.strip()]:
            first, *rest = [s.strip() for s in stmt.split(",")]
            ftype, fname, dims = split_decl(first)
            base = re.sub(r"\s*\*+$", "", ftype).strip()
            fields.append((ftype, fname, dims))
            for r in rest:  # 'double a, b;' and 'tg_id *x, *y;'
                stars = len(r) - len(r.lstrip("*"))
                t2, n2, d2 = split_decl(base + " " + "*" * stars + " " + r.lstrip("*").strip())
                fields.append((t2, n2, d2))
        out["structs"][m.group(3)] = fields
    for m in re.finditer(r"typedef\s+([\w\s\*]+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*?)\)\s*;", text, re.S):
        params = [split_decl(p)[:2] for p in m.group(3).split(",") if p.strip() and p.strip() != "void"]
        out["callbacks"][m.group(2)] = (norm_type(m.group(1)), params)
    for m in re.finditer(r"typedef\s+(\w+)\s+(\w+)\s*;", text):
        out["typedefs"][m.group(2)] = m.group(1)
    for m in re.finditer(r"TG_API\s+([^;{]*?)\b(tg_\w+)\s*\(([^;]*?)\)\s*;", text, re.S):
        params = []
        for p in m.group(3).split(","):
            p = p.strip()
            if p and p != "void":
                params.append(split_decl(p)[:2])
        out["functions"][m.group(2)] = (norm_type(m.group(1)), params)
    enum_vals = {k: v for e in out["enums"].values() for k, v in e.items()}
    defs = {}
    for m in re.finditer(r"^\s*#define\s+((?:TG|TIGA|DLPACK)_\w+)\s+(.+?)\s*$", strip_comments(raw), re.M):
        defs[m.group(1)] = m.group(2)

    def value(expr, depth=0):
        if depth > 8:
            raise ValueError(expr)
        e = expr.strip()
        e = re.sub(r"\((?:tg_id|uint64_t|int64_t|size_t)\)", "", e)
        e = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uU][lL]*\b", r"\1", e)
        e = e.replace("INT32_MIN", "(-2147483648)")
        for name in re.findall(r"\b[A-Z_][A-Z0-9_]*\b", e):
            if name in enum_vals:
                e = re.sub(rf"\b{name}\b", str(enum_vals[name]), e)
            elif name in defs:
                e = re.sub(rf"\b{name}\b", f"({value(defs[name], depth + 1)})", e)
            else:
                raise ValueError(f"unknown name {name} in {expr!r}")
        if not re.fullmatch(r"[\s\d\.\+\-\*/\(\)xXa-fA-F<>]+", e):
            raise ValueError(f"not a constant expression: {expr!r}")
        v = eval(e, {"__builtins__": {}})  # digits and operators only (checked above)
        return v

    for k, v in defs.items():
        if k in ("TG_API",) or k.endswith("_H"):
            continue
        try:
            out["constants"][k] = value(v)
        except ValueError:
            continue
    return out


def render(d):
    lines = [
        '"""Declarations of include/tiga.h for the ctypes binding.',
        "",
        "Generated by bindings/python/tools/gen_decls.py; do not edit (tests/test_decls.py checks it).",
        '"""',
        "",
    ]
    for key, name in [("constants", "CONSTANTS"), ("enums", "ENUMS"), ("typedefs", "TYPEDEFS"),
                      ("structs", "STRUCTS"), ("callbacks", "CALLBACKS"), ("functions", "FUNCTIONS")]:
        lines.append(f"{name} = " + pprint.pformat(d[key], width=110, sort_dicts=True))
        lines.append("")
    return "\n".join(lines)


def main():
    with open(HEADER) as f:
        text = render(parse(f.read()))
    if "--check" in sys.argv:
        with open(OUT) as f:
            if f.read() != text:
                print(f"{OUT} is out of date with {HEADER}: run {sys.argv[0]}")
                return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
