"""What a program's int8 inputs and outputs hold, as the ``.pte`` records it (torch-free:
``cortex-m-compile embed`` reads it for the firmware header).

A program compiled with ``--io int8`` records ``cortex_m_nn_io`` = ``int8`` and, per input and
output, ``cortex_m_nn_input_<i>``/``cortex_m_nn_output_<i>`` = :meth:`IoQuantization.text`
(or ``float``), records of its metadata method (``core.abi.encode_metadata``). A program
without them has float inputs and outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cortex_m_nn.core.abi import METADATA_PREFIX
from cortex_m_nn.core.options import IoType

__all__ = ["IoQuantization", "IoType", "io_metadata", "read_io"]


@dataclass(frozen=True)
class IoQuantization:
    """An int8 input or output: ``real = scale * (q - zero_point)``."""

    scale: float
    zero_point: int
    #: the model's tensor shape (logical order)
    model_shape: tuple[int, ...]
    #: from the model's order to the stored one (empty: the model's order)
    permutation: tuple[int, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """The program tensor's shape (stored order)."""
        if not self.permutation:
            return self.model_shape
        return tuple(self.model_shape[d] for d in self.permutation)

    @property
    def layout(self) -> str:
        """``nhwc`` (a 4-D tensor stored channels-last), ``model`` (the model's order) or the
        permutation."""
        if not self.permutation:
            return "model"
        rank = len(self.permutation)
        if list(self.permutation) == [0, *range(2, rank), 1]:  # channels-last
            return "nhwc"
        return "permuted " + ",".join(map(str, self.permutation))

    def text(self) -> str:
        """What the ``.pte`` records, e.g. ``scale=0.0273 zero_point=-22 shape=1x49x10x1
        model_shape=1x1x49x10 permutation=0,2,3,1``."""
        return (
            f"scale={self.scale!r} zero_point={self.zero_point} shape={_dims(self.shape)} "
            f"model_shape={_dims(self.model_shape)} "
            f"permutation={','.join(map(str, self.permutation)) or 'none'}"
        )

    @classmethod
    def parse(cls, text: str) -> IoQuantization:
        fields = dict(part.split("=", 1) for part in text.split())
        order = fields["permutation"]
        return cls(
            float(fields["scale"]),
            int(fields["zero_point"]),
            _parse_dims(fields["model_shape"]),
            () if order == "none" else tuple(int(d) for d in order.split(",")),
        )


def _dims(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


def _parse_dims(text: str) -> tuple[int, ...]:
    return () if text == "scalar" else tuple(int(d) for d in text.split("x"))


def io_metadata(
    io: IoType, inputs: Sequence[IoQuantization | None], outputs: Sequence[IoQuantization | None]
) -> dict[str, str]:
    """The records a program holds about its inputs and outputs (none for float I/O)."""
    if io is IoType.FLOAT:
        return {}
    found = {f"{METADATA_PREFIX}io": io.value}
    for kind, specs in (("input", inputs), ("output", outputs)):
        for index, spec in enumerate(specs):
            found[f"{METADATA_PREFIX}{kind}_{index}"] = "float" if spec is None else spec.text()
    return found


def read_io(
    metadata: Mapping[str, str], inputs: int, outputs: int
) -> tuple[IoType, list[IoQuantization | None], list[IoQuantization | None]]:
    """What :func:`io_metadata` recorded, for a program of ``inputs`` and ``outputs``; a
    ValueError or KeyError if the records are incomplete or malformed."""
    io = IoType(metadata.get(f"{METADATA_PREFIX}io", IoType.FLOAT.value))

    def specs(kind: str, count: int) -> list[IoQuantization | None]:
        if io is IoType.FLOAT:
            return [None] * count
        texts = [metadata[f"{METADATA_PREFIX}{kind}_{index}"] for index in range(count)]
        return [None if text == "float" else IoQuantization.parse(text) for text in texts]

    return io, specs("input", inputs), specs("output", outputs)
