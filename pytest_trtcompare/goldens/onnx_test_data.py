"""Reading ONNX test data (`input_N.pb` / `output_N.pb`, as the ONNX model zoo and backend
tests store them) without onnxruntime: loaders of inputs (inputs.py) and of saved outputs
(interop.load_reference) both read it here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputDataError


def load_onnx_test_data(
    directory: Path, names: Sequence[str] | None = None, prefix: str = "input"
) -> list[dict[str, np.ndarray]]:
    """ONNX test data: `input_N.pb` in a directory, or in each `test_data_set_*` below it.

    Tensors are named by their TensorProto name, else by `names` (the model's inputs) in order.
    """
    from onnx import TensorProto, numpy_helper  # onnx only when test data is read (pytest start-up)

    sets = sorted(p for p in directory.glob("test_data_set_*") if p.is_dir()) or [directory]
    feeds = []
    for data_set in sets:
        files = sorted(data_set.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[-1]))
        if not files:
            raise InputDataError(f"{data_set}: no {prefix}_N.pb files")
        feed: dict[str, np.ndarray] = {}
        for position, file in enumerate(files):
            tensor = TensorProto()
            try:
                tensor.ParseFromString(file.read_bytes())
            except Exception as exc:
                raise InputDataError(f"{file}: not a serialized ONNX TensorProto ({exc})") from None
            name = tensor.name or (names[position] if names and position < len(names) else None)
            if name is None:
                raise InputDataError(
                    f"{file}: the tensor has no name; pass the model's input names"
                )
            feed[name] = numpy_helper.to_array(tensor)
        feeds.append(feed)
    return feeds
