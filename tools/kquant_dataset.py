"""The deterministic data the K-quant RMSE comparison runs on, shared by the golden maker
(tools/kquant_reference.py) and the test (tests/e2e/test_kquant_rmse.py) so both see the same
floats. Regenerated from seeds on every run, never stored; RECIPE goes into the golden so a
change here is caught as a mismatch instead of comparing RMSEs over different data.
"""
from __future__ import annotations

import numpy as np

ROWS = 64
COLS = 4096
K_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")

# Each row gets its own magnitude, log-uniform over the range LLM weights and activations live
# in, so the fp16 super-block scales are exercised from subnormal-adjacent to large.
_ROW_SCALE_RANGE = (0.005, 2.0)

RECIPE = (
    f"numpy.random.default_rng(seed) per dataset, {ROWS} rows x {COLS} float32; each row times "
    f"a log-uniform scale in {list(_ROW_SCALE_RANGE)}. gaussian: seed 0, N(0,1). laplace: seed 1, "
    "Laplace(0,1). student_t3: seed 2, Student-t with 3 dof. outliers: seed 3, N(0,1) with 0.2% "
    "of entries replaced by +-U(8,30). shifted: seed 4, N(0.5,1) with mean shifted per row by "
    "U(-1,1) (non-zero-mean sub-blocks)."
)


def _row_scales(rng: np.random.Generator) -> np.ndarray:
    lo, hi = np.log(_ROW_SCALE_RANGE[0]), np.log(_ROW_SCALE_RANGE[1])
    return np.exp(rng.uniform(lo, hi, size=(ROWS, 1)))


def _gaussian(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal((ROWS, COLS))


def _laplace(rng: np.random.Generator) -> np.ndarray:
    return rng.laplace(0.0, 1.0, (ROWS, COLS))


def _student_t3(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_t(3, (ROWS, COLS))


def _outliers(rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((ROWS, COLS))
    mask = rng.random((ROWS, COLS)) < 0.002
    magnitude = rng.uniform(8.0, 30.0, (ROWS, COLS)) * rng.choice([-1.0, 1.0], (ROWS, COLS))
    return np.where(mask, magnitude, x)


def _shifted(rng: np.random.Generator) -> np.ndarray:
    return rng.normal(0.5, 1.0, (ROWS, COLS)) + rng.uniform(-1.0, 1.0, (ROWS, 1))


_MAKERS = {
    "gaussian": (0, _gaussian),
    "laplace": (1, _laplace),
    "student_t3": (2, _student_t3),
    "outliers": (3, _outliers),
    "shifted": (4, _shifted),
}
DATASETS = tuple(_MAKERS)


def dataset(name: str) -> np.ndarray:
    """[ROWS, COLS] float32, C-contiguous; identical on every machine (numpy's PCG64)."""
    seed, make = _MAKERS[name]
    rng = np.random.default_rng(seed)
    values = make(rng) * _row_scales(rng)
    return np.ascontiguousarray(values, dtype=np.float32)


def rmse(reference: np.ndarray, approx: np.ndarray) -> float:
    diff = reference.astype(np.float64).ravel() - approx.astype(np.float64).ravel()
    return float(np.sqrt(np.mean(diff * diff)))
