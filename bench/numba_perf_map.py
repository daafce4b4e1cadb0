"""Function- and instruction-level profiles of gpurpo's numba kernels with Linux ``perf``.

``perf`` cannot name JIT-compiled code: samples in numba kernels show up as
bare addresses. This script grows delicious-shaped trees (one thread) after
writing ``/tmp/perf-<pid>.map``, the symbol map ``perf`` reads for JIT code,
with the address of every function numba compiled for gpurpo, and dumps the
machine code of one function so that ``objdump`` can annotate its hot
instructions (``--data text``: the text-like sparse X of
``bench/sparse_forest.py`` instead). The addresses are only known for functions compiled in this
process, so run it with an empty numba cache (about 1.5 minutes of
compilation first)::

    rm -rf /tmp/nbcache
    NUMBA_CACHE_DIR=/tmp/nbcache perf record -e cpu-clock -F 8000 -D 100000 \\
        -o /tmp/perf.data -- python bench/numba_perf_map.py --trees 500 \\
        --dump _eval_node --out /tmp/eval_node.bin
    perf report -i /tmp/perf.data --no-children --sort sym        # per function
    perf script -i /tmp/perf.data -F ip,sym | grep _eval_node | awk '{print $1}' \\
        | sort | uniq -c | sort -rn > /tmp/ips.txt                  # per instruction
    objdump -D -b binary -m i386:x86-64 --adjust-vma=<address printed> /tmp/eval_node.bin

``-D`` (milliseconds) must exceed the time to "READY" (printed) so that the
compilation is not sampled; ``--trees`` must keep the growth running past it.
Hardware counters are not needed (``cpu-clock`` is a software event).

An example profile (Intel Xeon, Emerald Rapids; delicious-shaped single
trees, growth only): ``_eval_node`` 64 % of the samples, ``_fill_block`` 9 %, the
histogram kernel 6 %, ``_grow_in_block`` 4 %, the feature draws 3 %; inside
``_eval_node`` the sorted-sample scan about 42 % (two thirds of it the gain of
each split point: two scalar divisions) and the per-bin table fill 17 %.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def compiled_functions(prefix: str = "gpurpo") -> list[tuple[int, str]]:
    """(address, symbol) of every function numba compiled in this process for ``prefix``.

    Functions loaded from numba's on-disk cache have no LLVM module here and
    are left out.
    """
    from numba.core.registry import CPUDispatcher

    found = []
    libraries = set()
    for name, module in list(sys.modules.items()):
        if not name.startswith(prefix):
            continue
        for obj in list(vars(module).values()):
            if not isinstance(obj, CPUDispatcher):
                continue
            for compiled in obj.overloads.values():
                library = compiled.library
                if id(library) in libraries:
                    continue
                libraries.add(id(library))
                module_ir = getattr(library, "_final_module", None)
                if module_ir is None:
                    continue
                for fn in module_ir.functions:
                    if fn.is_declaration:
                        continue
                    address = library.get_pointer_to_function(fn.name)
                    if address:
                        found.append((int(address), fn.name))
    return sorted(found)


def write_perf_map(functions: list[tuple[int, str]]) -> dict[str, tuple[int, int]]:
    """Write ``/tmp/perf-<pid>.map``; return each symbol's (address, size).

    A function's size is the distance to the next higher address (several
    symbols can share an address).
    """
    spans = {}
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as fh:
        for i, (address, name) in enumerate(functions):
            following = next((a for a, _ in functions[i + 1 :] if a > address), address + 4096)
            size = min(following - address, 1 << 20)
            spans[name] = (address, size)
            fh.write(f"{address:x} {size:x} {name}\n")
    return spans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", type=int, default=300, help="trees grown after READY")
    parser.add_argument("--dump", default="_eval_node", help="function whose code to dump")
    parser.add_argument("--out", default="/tmp/numba_function.bin")
    parser.add_argument("--data", choices=["delicious", "text", "zipf"], default="delicious",
                        help="delicious-shaped dense X, bench/sparse_forest.py's text-like "
                             "CSR X (--rows, --features, --density), or subtree_kernel_ab's "
                             "Zipf-like one (--rows, --features; 40 draws per row)")
    parser.add_argument("--rows", type=int, default=20000, help="rows of the text-like X")
    parser.add_argument("--features", type=int, default=20000, help="its columns")
    parser.add_argument("--density", type=float, default=0.005, help="its share of nonzeros")
    args = parser.parse_args(argv)

    import numba

    numba.set_num_threads(1)
    from gpurpo.backend import NUMPY
    from gpurpo.datasets import make_delicious_like
    from gpurpo.projections import make_projection
    from gpurpo.tree import BinMapper, GrowthParams, grow_trees, n_candidate_features

    started = time.time()
    if args.data == "text":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from sparse_forest import make_text_like

        X, Y = make_text_like(args.rows, args.features, args.density)
    elif args.data == "zipf":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from subtree_kernel_ab import text_like

        X, Y = text_like(args.rows, args.features)
    else:
        X, Y = make_delicious_like(random_state=0)
        Y = sp.csr_matrix(Y)
    d = Y.shape[1]
    m = round(math.log(d))
    binned = BinMapper().fit(X).transform(X, NUMPY)
    k = n_candidate_features("sqrt", X.shape[1])
    P = make_projection("gaussian", m, d, random_state=0)
    targets = np.ascontiguousarray(np.asarray(Y @ P.T, dtype=np.float32)[:, None, :])
    params = GrowthParams(n_candidates=k)
    grow_trees(binned, targets, None, params, np.random.default_rng(0), NUMPY)

    spans = write_perf_map(compiled_functions())
    if not spans:
        print("no function compiled in this process: run with an empty NUMBA_CACHE_DIR")
        return 1
    match = [(name, span) for name, span in spans.items() if args.dump in name]
    if match:
        name, (address, size) = match[0]
        Path(args.out).write_bytes(ctypes.string_at(address, size))
        print(f"{args.dump}: {size} bytes at {address:#x} written to {args.out}")
    print(f"READY after {time.time() - started:.1f} s ({len(spans)} symbols mapped)", flush=True)
    t0 = time.process_time()
    for seed in range(args.trees):
        grow_trees(binned, targets, None, params, np.random.default_rng(seed), NUMPY)
    print(f"{(time.process_time() - t0) / max(args.trees, 1) * 1e3:.1f} ms per tree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
