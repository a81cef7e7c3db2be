"""numpy reference of the planted family: neighbour sums of every row."""
import numpy as np


def reference(x, R, params):
    assert x.shape == (R, params["N"])
    return {"out": (x + np.roll(x, -1, axis=1)).astype(np.float32)}


def off_by_one_ulp(x, R, params):
    """A wrong reference (for the test that a disagreement fails)."""
    out = reference(x, R, params)["out"]
    out[1, 3] = np.nextafter(out[1, 3], np.float32(np.inf))
    return {"out": out}
