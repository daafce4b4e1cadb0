"""Array namespace, device selection, random numbers and kernel dispatch.

gpurpo's algorithm code is written once against a NumPy-compatible module ``xp``
(``numpy`` on the CPU, ``cupy`` on CUDA). This module is the single place that
knows which one is in use:

* :func:`resolve_backend` picks the backend for a call from the inputs ("compute
  follows data"), the estimator's ``device`` argument and the global setting
  (:func:`set_backend`, :func:`use_backend`, environment variable
  ``GPURPO_BACKEND``);
* :class:`Backend` bundles the array module, its sparse module, host/device
  transfers, device attributes and the kernel dispatch point
  (:meth:`Backend.kernel`);
* :func:`register_kernel` is how the hot loops (histograms, leaf accumulation,
  tree traversal) plug in their three implementations: a numba CPU kernel used
  by the ``"numpy"`` backend and a CUDA kernel (``kernels/*.cu`` through
  :meth:`Backend.load_module`) used by both ``"cupy"`` and the CPU emulation of
  CUDA (backend ``"emulated"``);
* :func:`launch_block` and :func:`launch_grid` size the CUDA launches from a
  device's attributes (:func:`launch_grid_stride`, :func:`launch_column_tiles`
  launch the two common shapes);
* cuDF frames are GPU inputs (:func:`is_device_frame`), taken as their CuPy
  values (:func:`device_frame_values`);
* :func:`count_device_activity` counts the kernel launches, copies and
  synchronisations of the device backends inside a block, and inside
  :func:`refuse_host_operands` the emulated device refuses NumPy operands as
  CuPy does;
* random numbers are drawn on the host from one seeded
  :class:`numpy.random.Generator` and moved to the device, so a seed gives the
  same projections on every backend.
"""

from gpurpo.backend._activity import DeviceActivity, count_device_activity, record_device_activity
from gpurpo.backend._arrays import bincount, segment_ids, segment_positions, to_host
from gpurpo.backend._backend import BACKEND_NAMES, CUPY, EMULATED, NUMPY, Backend
from gpurpo.backend._cupy import (
    BackendUnavailableError,
    cupy_available,
    is_gpu_array,
)
from gpurpo.backend._device_arrays import refuse_host_operands
from gpurpo.backend._frames import device_frame_values, is_device_frame
from gpurpo.backend._launch import (
    COLUMN_TILE,
    ELEMENTWISE_BLOCK,
    GRID_WAVES,
    launch_block,
    launch_column_tiles,
    launch_grid,
    launch_grid_stride,
)
from gpurpo.backend._random import check_random_state, spawn_seeds
from gpurpo.backend._registry import (
    SERIAL_ELEMENTS,
    cpu_helper,
    register_kernel,
    registered_kernels,
    serial_cpu_kernels,
)
from gpurpo.backend._settings import (
    DEVICE_NAMES,
    SETTING_NAMES,
    get_backend,
    namespace_of,
    resolve_backend,
    set_backend,
    show_backend,
    use_backend,
)
from gpurpo.backend._sources import (
    CUDA_COMPILE_OPTIONS,
    kernel_dir,
    kernel_source,
)

__all__ = [
    "BACKEND_NAMES",
    "CUDA_COMPILE_OPTIONS",
    "CUPY",
    "DEVICE_NAMES",
    "EMULATED",
    "NUMPY",
    "SETTING_NAMES",
    "Backend",
    "BackendUnavailableError",
    "DeviceActivity",
    "count_device_activity",
    "record_device_activity",
    "refuse_host_operands",
    "cupy_available",
    "get_backend",
    "set_backend",
    "use_backend",
    "show_backend",
    "resolve_backend",
    "namespace_of",
    "is_gpu_array",
    "is_device_frame",
    "device_frame_values",
    "to_host",
    "bincount",
    "segment_ids",
    "segment_positions",
    "check_random_state",
    "spawn_seeds",
    "register_kernel",
    "registered_kernels",
    "serial_cpu_kernels",
    "cpu_helper",
    "SERIAL_ELEMENTS",
    "kernel_dir",
    "kernel_source",
    "ELEMENTWISE_BLOCK",
    "GRID_WAVES",
    "launch_block",
    "launch_grid",
    "launch_grid_stride",
    "launch_column_tiles",
    "COLUMN_TILE",
]
