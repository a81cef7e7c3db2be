# kernelgen verify: calls a family's numpy reference (its [verify] reference,
# "file.py:function") on one kernel's inputs and saves what it returns.
# Run as: python3 call_reference.py CALL_DIR, where CALL_DIR/call.json says
# what to call with what, and each input is a file of its raw little-endian
# bytes in CALL_DIR.
import importlib.util
import json
import os
import sys

import numpy as np


def fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(3)


def main():
    call_dir = sys.argv[1]
    with open(os.path.join(call_dir, "call.json")) as f:
        call = json.load(f)
    spec = importlib.util.spec_from_file_location("kernelgen_reference_module", call["module"])
    if spec is None or spec.loader is None:
        fail(f"cannot import {call['module']}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(call["module"])))
    spec.loader.exec_module(module)
    function = getattr(module, call["function"], None)
    if not callable(function):
        fail(f"{call['module']} has no function `{call['function']}`")
    kwargs = {}
    for name, file, dtype, shape, is_bf16 in call["arrays"]:
        raw = np.fromfile(os.path.join(call_dir, file), dtype=np.dtype(dtype).newbyteorder("<"))
        array = raw.astype(raw.dtype.newbyteorder("=")).reshape(shape)
        if is_bf16:
            # numpy has no bfloat16: the values as float32, exactly.
            array = (array.astype(np.uint32) << 16).view(np.float32)
        kwargs[name] = array
    for name, values in call["host"]:
        kwargs[name] = np.asarray(values, dtype=np.int32)
    kwargs.update(call["sizes"])
    kwargs["params"] = call["params"]
    result = function(**kwargs)
    outputs = call["outputs"]
    if isinstance(result, dict):
        missing = [name for name in outputs if name not in result]
        if missing:
            fail(f"the reference returned no {', '.join(missing)} (it returned {', '.join(map(str, result)) or 'nothing'})")
        values = [result[name] for name in outputs]
    elif isinstance(result, (tuple, list)) and len(outputs) != 1:
        values = list(result)
    else:
        values = [result]
    if len(values) != len(outputs):
        fail(f"the reference returned {len(values)} outputs for the kernel's {len(outputs)} ({', '.join(outputs)})")
    shapes = []
    for i, value in enumerate(values):
        array = np.ascontiguousarray(np.asarray(value, dtype=np.float64))
        array.astype("<f8").tofile(os.path.join(call_dir, f"out{i}.f64"))
        shapes.append(list(array.shape))
    with open(os.path.join(call_dir, "outputs.json"), "w") as f:
        json.dump(shapes, f)


main()
