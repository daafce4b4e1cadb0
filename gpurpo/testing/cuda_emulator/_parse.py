"""Source analysis for the CUDA emulator: kernel signatures and ``__shared__``.

Works on the output of the C preprocessor (``g++ -E``) so that macros,
``#if`` blocks and comments are already resolved. The text keeps GNU line
markers (``# 12 "histogram.cu"``), which this module preserves so that the
C++ compiler reports errors at the lines of the original ``.cu`` file.

Three transformations produce the C++ that :mod:`._build` compiles:

* :func:`find_kernels` lists the ``extern "C" __global__`` functions (the ones
  ``cupy.RawModule.get_function`` can find by name) with their parameters;
* :func:`rewrite_shared` turns every ``__shared__`` declaration into storage
  that belongs to the running block (see ``emulator.h``);
* :func:`strip_global` removes the ``__global__`` keyword.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "KernelDecl",
    "SourceError",
    "find_kernels",
    "rewrite_shared",
    "split_user_section",
    "strip_global",
    "trampolines",
]


class SourceError(ValueError):
    """A construct of the CUDA source that the emulator cannot translate."""


@dataclass(frozen=True)
class KernelDecl:
    """One ``extern "C" __global__`` kernel as written in the source.

    Attributes
    ----------
    name : str
        The kernel's (unmangled) name.
    param_names : tuple of str
        Parameter names (``arg<i>`` for unnamed parameters).
    param_decls : tuple of str
        Each parameter's declaration with whitespace normalised, e.g.
        ``"const float* __restrict__ y"``.
    """

    name: str
    param_names: tuple[str, ...]
    param_decls: tuple[str, ...]


_LINE_MARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:[^"\\]|\\.)*)"[^\n]*$', re.M)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_TYPE_WORDS = frozenset(
    "void bool char short int long float double signed unsigned const volatile "
    "__restrict__ __restrict restrict struct class enum union".split()
)


_MASKED = re.compile(
    r"//[^\n]*"
    r"|/\*.*?\*/"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'(?:[^'\\\n]|\\.)*'"
    r"|^[ \t]*#(?:\\\n|[^\n])*",
    re.S | re.M,
)


def _blank(m: re.Match[str]) -> str:
    s = m.group(0)
    if s == '"C"':
        return s
    if s[0] in "\"'":
        return s[0] + re.sub(r"[^\n]", "_", s[1:-1]) + s[-1]
    return re.sub(r"[^\n]", " ", s)


def _mask(text: str) -> str:
    """Blank out comments, string/char literal contents and preprocessor lines.

    The result has the same length and newlines as ``text``, so positions
    carry over; a literal ``"C"`` is kept so that ``extern "C"`` stays visible.
    """
    return _MASKED.sub(_blank, text)


_OPEN_KIND = (
    (re.compile(r'extern\s*"C"\s*$'), "externC"),
    (re.compile(r"(?:^|[\s;{}])(?:inline\s+)?namespace(?:\s+[\w:]+)?\s*$"), "namespace"),
    (re.compile(r"(?:^|[\s;{}])(?:struct|class|union|enum)\b[^;{}()]*$"), "class"),
    (re.compile(r"=\s*$"), "init"),
)


class _Scopes:
    """Brace structure of a masked text: what kind of scope each position is in."""

    def __init__(self, masked: str):
        self.masked = masked
        self._opens: list[tuple[int, int, str]] = []  # (open, close, kind)
        stack: list[tuple[int, str]] = []
        for m in re.finditer(r"[{}]", masked):
            pos = m.start()
            if masked[pos] == "{":
                before = masked[max(0, pos - 200) : pos]
                kind = "code"
                for pattern, name in _OPEN_KIND:
                    if pattern.search(before):
                        kind = name
                        break
                stack.append((pos, kind))
            else:
                if not stack:
                    raise SourceError(f"unbalanced '}}' at offset {pos}")
                start, kind = stack.pop()
                self._opens.append((start, pos, kind))
        for start, kind in stack:
            self._opens.append((start, len(masked), kind))
        self._opens.sort()

    def enclosing(self, pos: int) -> list[str]:
        """Kinds of the braces enclosing ``pos``, outermost first."""
        return [kind for start, end, kind in self._opens if start < pos < end]


def _statement_start(masked: str, pos: int) -> int:
    i = pos - 1
    while i >= 0 and masked[i] not in ";{}":
        i -= 1
    i += 1
    while i < pos and masked[i].isspace():
        i += 1
    return i


def _matching(masked: str, open_pos: int, open_c: str = "(", close_c: str = ")") -> int:
    depth = 0
    for i in range(open_pos, len(masked)):
        c = masked[i]
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return i
    raise SourceError(f"unbalanced '{open_c}' at offset {open_pos}")


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def _line_at(text: str, pos: int) -> tuple[int, str]:
    """(line, file) of ``pos`` according to the last line marker before it."""
    line, fname, marker_end = 1, "<source>", 0
    for m in _LINE_MARKER.finditer(text, 0, pos):
        line, fname, marker_end = int(m.group(1)), m.group(2), m.end() + 1
    return line + text.count("\n", marker_end, pos), fname


def _where(text: str, pos: int) -> str:
    line, fname = _line_at(text, pos)
    return f"{fname}:{line}"


def split_user_section(text: str, name: str) -> tuple[str, str]:
    """Split preprocessed text into (emulator header part, user source part).

    The user part starts at the line marker ``# 1 "<name>"`` that the
    ``#line 1 "<name>"`` directive placed after ``#include "emulator.h"``.
    """
    marker = re.compile(r'^#\s*1\s+"' + re.escape(name.replace("\\", "\\\\")) + r'"', re.M)
    m = marker.search(text)
    if m is None:
        return "", text
    return text[: m.start()], text[m.start() :]


# ---------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------


def _param_name(decl: str, index: int) -> str:
    words = _IDENT.findall(decl)
    if len(words) >= 2 and words[-1] not in _TYPE_WORDS:
        return words[-1]
    return f"arg{index}"


def find_kernels(text: str) -> list[KernelDecl]:
    """The ``extern "C" __global__`` kernels of preprocessed CUDA source.

    Kernels without C linkage are skipped: they have mangled names that
    ``cupy.RawModule.get_function`` cannot look up either.

    Raises
    ------
    SourceError
        If a kernel does not return ``void`` or two kernels share a name.
    """
    masked = _mask(text)
    scopes = _Scopes(masked)
    found: dict[str, KernelDecl] = {}
    for m in re.finditer(r"\b__global__\b", masked):
        enclosing = scopes.enclosing(m.start())
        if any(kind not in ("namespace", "externC") for kind in enclosing):
            continue
        stmt_start = _statement_start(masked, m.start())
        prefix = masked[stmt_start : m.start()]
        c_linkage = "externC" in enclosing or re.search(r'extern\s*"C"', prefix) is not None
        # scan the declaration up to the parameter list
        i, words = m.end(), []
        while i < len(masked):
            c = masked[i]
            if c == "(":
                break
            if masked.startswith(("__attribute__", "__launch_bounds__", "__align__", "alignas"), i):
                i = _matching(masked, masked.index("(", i)) + 1
                continue
            if masked.startswith("[[", i):
                i = masked.index("]]", i) + 2
                continue
            word = _IDENT.match(masked, i)
            if word:
                words.append(word.group(0))
                i = word.end()
                continue
            if c in ";{}=":
                raise SourceError(f"cannot read the __global__ declaration at {_where(text, m.start())}")
            i += 1
        if not words:
            raise SourceError(f"cannot read the __global__ declaration at {_where(text, m.start())}")
        name = words[-1]
        if "void" not in words[:-1]:
            raise SourceError(f"kernel {name!r} at {_where(text, m.start())} must return void")
        if not c_linkage:
            continue
        close = _matching(masked, i)
        params_text = " ".join(masked[i + 1 : close].split())
        decls: list[str] = []
        if params_text not in ("", "void"):
            decls = [" ".join(p.split("=")[0].split()) for p in _split_top(params_text)]
        decl = KernelDecl(
            name=name,
            param_names=tuple(_param_name(d, k) for k, d in enumerate(decls)),
            param_decls=tuple(decls),
        )
        previous = found.get(name)
        if previous is not None and previous.param_decls != decl.param_decls:
            raise SourceError(f"kernel {name!r} is declared twice with different parameters")
        found[name] = decl
    return list(found.values())


def strip_global(text: str) -> str:
    """Remove the ``__global__`` keyword (kernels become plain C functions)."""
    masked = _mask(text)
    out = list(text)
    for m in re.finditer(r"\b__global__\b", masked):
        out[m.start() : m.end()] = " " * (m.end() - m.start())
    return "".join(out)


# ---------------------------------------------------------------------------
# __shared__
# ---------------------------------------------------------------------------

_ALIGN = re.compile(
    r"\balignas\s*\(\s*(\d+)\s*\)"
    r"|__attribute__\s*\(\(\s*(?:__)?aligned(?:__)?\s*\(\s*(\d+)\s*\)\s*\)\)"
)
_DIMS = re.compile(r"((?:\[[^\[\]]*\]\s*)*)$")
_NAME = re.compile(r"([A-Za-z_]\w*)\s*$")


@dataclass
class _Declarator:
    ptr: str
    name: str
    dims: str


def _parse_declarators(body: str, where: str) -> tuple[str, list[_Declarator]]:
    parts = _split_top(body)
    base_type = ""
    out: list[_Declarator] = []
    for k, part in enumerate(parts):
        part = part.strip()
        if "=" in re.sub(r"\[[^\[\]]*\]", "", part):
            raise SourceError(f"__shared__ variables cannot have an initializer ({where})")
        dims_m = _DIMS.search(part)
        dims = " ".join(dims_m.group(1).split()) if dims_m else ""
        rest = part[: dims_m.start()] if dims_m else part
        name_m = _NAME.search(rest)
        if not name_m:
            raise SourceError(f"cannot read the __shared__ declaration {body.strip()!r} ({where})")
        name = name_m.group(1)
        rest = rest[: name_m.start()]
        ptr_m = re.search(r"[\s*&]*$", rest)
        ptr = ptr_m.group(0).replace(" ", "").replace("\t", "").replace("\n", "")
        type_part = rest[: ptr_m.start()].strip()
        if k == 0:
            base_type = " ".join(type_part.split())
            if not base_type:
                raise SourceError(f"cannot read the type of __shared__ {name!r} ({where})")
        elif type_part:
            raise SourceError(f"cannot read the __shared__ declaration {body.strip()!r} ({where})")
        if "&" in ptr:
            raise SourceError(f"__shared__ references are not allowed ({where})")
        out.append(_Declarator(ptr=ptr, name=name, dims=dims))
    return base_type, out


def rewrite_shared(text: str) -> str:
    """Give every ``__shared__`` declaration per-block storage.

    Inside functions, ``__shared__ T a[N];`` becomes a reference into the
    running block's shared arena and ``extern __shared__ T b[];`` a pointer
    to the block's dynamic shared memory. At namespace scope the names become
    macros expanding to the same expressions (so such a name cannot be
    reused for another entity later in the file).

    Raises
    ------
    SourceError
        For ``__shared__`` inside a class, with an initializer, or in a form
        the rewriter cannot read.
    """
    masked = _mask(text)
    scopes = _Scopes(masked)
    edits: list[tuple[int, int, str]] = []
    done_until = -1
    counter = 0
    for m in re.finditer(r"\b__shared__\b", masked):
        if m.start() < done_until:
            continue
        where = _where(text, m.start())
        start = _statement_start(masked, m.start())
        end = masked.find(";", m.end())
        if end < 0:
            raise SourceError(f"__shared__ declaration without ';' ({where})")
        done_until = end
        enclosing = scopes.enclosing(m.start())
        if "class" in enclosing:
            raise SourceError(f"__shared__ members of a class are not supported ({where})")
        in_code = any(kind in ("code", "init") for kind in enclosing)
        stmt = text[start:end]
        newlines = stmt.count("\n")
        body = re.sub(r"\b__shared__\b", " ", stmt)
        is_extern = re.search(r"\bextern\b", body) is not None
        body = re.sub(r"\b(?:extern|static)\b", " ", body)
        align = 0
        for am in _ALIGN.finditer(body):
            align = max(align, int(am.group(1) or am.group(2)))
        body = _ALIGN.sub(" ", body)
        base_type, declarators = _parse_declarators(body, where)
        pieces: list[str] = []
        defines: list[str] = []
        for d in declarators:
            counter += 1
            if is_extern:
                if d.dims != "[]":
                    raise SourceError(
                        f"extern __shared__ {d.name!r} must be an unsized array 'T name[]' ({where})"
                    )
                expr = f"::gpurpo_emu::dynamic_shared<{base_type} {d.ptr}>()"
                decl = f"{base_type} {d.ptr}* const {d.name} = {expr};"
            else:
                if "[]" in d.dims.replace(" ", ""):
                    raise SourceError(f"__shared__ array {d.name!r} needs a size ({where})")
                full = f"{base_type} {d.ptr}{d.dims}"
                align_arg = f", {align}" if align else ""
                if in_code:
                    decl = (
                        f"{base_type} {d.ptr}(&{d.name}){d.dims} = "
                        f"::gpurpo_emu::shared_var<{full}{align_arg}>([]{{}});"
                    )
                else:
                    tag = f"gpurpo_emu_shared_tag_{counter}"
                    pieces.append(f"struct {tag} {{}};")
                    expr = f"(::gpurpo_emu::shared_var<{full}{align_arg}>({tag}{{}}))"
                    defines.append(f"#define {d.name} {expr}")
                    continue
            if in_code:
                pieces.append(decl)
            else:
                defines.append(f"#define {d.name} ({expr})")
        if in_code:
            replacement = " ".join(pieces) + "\n" * newlines
        else:
            line, fname = _line_at(text, end)
            replacement = (
                "\n" + " ".join(pieces) + "\n" + "\n".join(defines) + f'\n# {line} "{fname}"\n'
            )
        edits.append((start, end + 1, replacement))
    if not edits:
        return text
    out, pos = [], 0
    for start, end, replacement in edits:
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------
# Launch table
# ---------------------------------------------------------------------------


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def trampolines(kernels: list[KernelDecl]) -> str:
    """C++ appended to the kernels: the table and C entry points for ctypes."""
    rows = []
    for k in kernels:
        rows.append(
            f"    {{{_c_string(k.name)}, &::gpurpo_emu::invoke<&{k.name}>, "
            f"::gpurpo_emu::signature_of(&{k.name}), "
            f"{_c_string(';'.join(k.param_names))}, {_c_string(';'.join(k.param_decls))}}},"
        )
    table = "\n".join(rows) if rows else ""
    count = len(kernels)
    array = (
        f"static const ::gpurpo_emu::KernelEntry gpurpo_emu_kernels[] = {{\n{table}\n}};\n"
        if count
        else "static const ::gpurpo_emu::KernelEntry* const gpurpo_emu_kernels = nullptr;\n"
    )
    return f"""
// ---- generated by gpurpo.testing.cuda_emulator ----
{array}
#define GPURPO_EMU_EXPORT extern "C" __attribute__((visibility("default")))
GPURPO_EMU_EXPORT int gpurpo_emu_kernel_count(void) {{ return {count}; }}
GPURPO_EMU_EXPORT const char* gpurpo_emu_kernel_name(int i) {{ return gpurpo_emu_kernels[i].name; }}
GPURPO_EMU_EXPORT const char* gpurpo_emu_kernel_signature(int i) {{
    return gpurpo_emu_kernels[i].signature.c_str();
}}
GPURPO_EMU_EXPORT const char* gpurpo_emu_kernel_param_names(int i) {{
    return gpurpo_emu_kernels[i].param_names;
}}
GPURPO_EMU_EXPORT const char* gpurpo_emu_kernel_param_decls(int i) {{
    return gpurpo_emu_kernels[i].param_decls;
}}
GPURPO_EMU_EXPORT int gpurpo_emu_launch(int i, void** args, const unsigned* grid, const unsigned* block,
                                        unsigned long long shared_mem, unsigned long long shared_limit,
                                        int concurrent_blocks, double timeout_s, char* err,
                                        unsigned long long errlen) {{
    return ::gpurpo_emu::launch(gpurpo_emu_kernels[i], args, grid, block, shared_mem, shared_limit,
                                concurrent_blocks, timeout_s, err, errlen);
}}
"""
