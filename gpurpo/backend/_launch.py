"""Launch geometry of the CUDA kernels: block and grid sizes from a device's attributes
(:meth:`Backend.device_attributes`), shared by every launcher of ``kernels/*.cu``."""

from __future__ import annotations

import math

#: threads per block of the elementwise and grid-stride kernels
ELEMENTWISE_BLOCK = 256
#: blocks per multiprocessor at most for a grid-stride launch
GRID_WAVES = 32


def launch_block(attrs: dict[str, int], preferred: int) -> int:
    """Threads per block: ``preferred`` within the device's limit, rounded down to
    whole warps (at least one warp)."""
    warp = int(attrs["warp_size"])
    size = min(preferred, int(attrs["max_threads_per_block"]))
    return max(warp, size // warp * warp)


def launch_grid(items: int, block: int, attrs: dict[str, int], waves: int = GRID_WAVES) -> int:
    """Blocks of a grid-stride launch over ``items`` work items: one item per thread,
    at most ``waves`` blocks per multiprocessor, at least one block."""
    return int(max(1, min(math.ceil(items / block), int(attrs["multiprocessor_count"]) * waves)))
