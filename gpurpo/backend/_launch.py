"""Launch geometry of the CUDA kernels: block and grid sizes from a device's attributes
(:meth:`Backend.device_attributes`), shared by every launcher of ``kernels/*.cu``."""

from __future__ import annotations

import math
from typing import Any

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


#: threads per block of the kernels with one thread per column and a grid of row blocks
COLUMN_TILE = 128


def launch_grid_stride(backend: Any, source: str, name: str, n_items: int, args: tuple,
                       preferred_block: int = ELEMENTWISE_BLOCK) -> None:
    """Launch kernel ``name`` of ``kernels/<source>`` over ``n_items`` work items with a
    grid-stride loop (:func:`launch_block`, :func:`launch_grid`); nothing for 0 items."""
    if n_items == 0:
        return
    attrs = backend.device_attributes()
    block = launch_block(attrs, preferred_block)
    kernel = backend.load_module(source).get_function(name)
    kernel((launch_grid(n_items, block, attrs),), (block,), args)


def launch_column_tiles(backend: Any, source: str, name: str, n_row_blocks: int,
                        n_columns: int, args: tuple) -> None:
    """Launch kernel ``name`` of ``kernels/<source>`` on a grid of ``n_row_blocks`` x
    (column tiles of :data:`COLUMN_TILE` threads): block ``(b, c)``, thread ``t`` takes
    column ``c * blockDim.x + t`` of row block ``b``."""
    attrs = backend.device_attributes()
    tile = launch_block(attrs, COLUMN_TILE)
    kernel = backend.load_module(source).get_function(name)
    kernel((n_row_blocks, -(-n_columns // tile)), (tile,), args)
