"""Which numerical kernels this process runs: OpenBLAS's core type (numpy's and scipy's copies) and numpy's SIMD
extensions. Printed in the pytest header, and used by ``tools/rerun_with_other_kernels.sh`` to confirm that an
``OPENBLAS_CORETYPE`` / ``NPY_DISABLE_CPU_FEATURES`` setting took effect on this machine."""

from __future__ import annotations

import ctypes
import glob
import os

import numpy
import scipy
import scipy.linalg  # noqa: F401 - loads scipy's OpenBLAS


def openblas_cores() -> dict[str, str]:
    """{'numpy': core, 'scipy': core} as OpenBLAS chose them (after ``OPENBLAS_CORETYPE``), or '?' if unknown."""
    found = {}
    for package, pattern, symbol in ((numpy, "numpy.libs/libscipy_openblas64_*.so", "scipy_openblas_get_corename64_"),
                                     (scipy, "scipy.libs/libscipy_openblas-*.so", "scipy_openblas_get_corename")):
        site = os.path.dirname(os.path.dirname(package.__file__))
        name = "?"
        for path in glob.glob(os.path.join(site, pattern)):
            function = getattr(ctypes.CDLL(path), symbol, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                name = function().decode()
        found[package.__name__] = name
    return found


def numpy_simd() -> list[str]:
    """numpy's SIMD extensions in use (dispatch targets found, minus those disabled)."""
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    return [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]


def summary() -> str:
    cores = openblas_cores()
    return f"OpenBLAS core: numpy {cores['numpy']}, scipy {cores['scipy']}; numpy SIMD: {' '.join(numpy_simd()) or 'baseline'}"


if __name__ == "__main__":
    print(summary())
