"""The processor a benchmark ran on, for its header and JSON rows.

Benchmarks run on different shared machines (an AMD EPYC, an Intel Xeon), whose
kernels and references speed up differently: figures compare only within one
processor, so every report names it.
"""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_description() -> str:
    """The CPU's model name and the target numba compiles for, e.g. ``"Intel(R) Xeon(R) Processor (emeraldrapids)"``."""
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        from llvmlite import binding

        return f"{model} ({binding.get_host_cpu_name()})"
    except Exception:  # llvmlite missing or too old: the model name alone
        return model
