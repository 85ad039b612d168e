"""Activation observers that choose an int8 range from a histogram of the calibration values,
and int4 weight observers that choose each channel's clipping by the weights' own error.

Each observer accumulates a fixed number of equal-width bins over every calibration batch;
when a batch falls outside, the bins widen by an integer factor, so every old bin lands whole
in one new bin (exact, deterministic re-binning). Exact zeros (ReLU outputs) are counted apart:
an integral zero point represents them without error. The chosen ``[low, high]`` always
includes 0 and becomes scale and zero point exactly as min/max would
(``UniformQuantizationObserverBase._calculate_qparams``), so ``convert_pt2e`` is unchanged.
"""

from __future__ import annotations

import math

import torch
from torchao.quantization.pt2e.observer import (
    MinMaxObserver,
    PerChannelMinMaxObserver,
    UniformQuantizationObserverBase,
)

#: Histogram resolution.
BINS = 2048
#: Candidate bounds per side in the coarse pass of the range search.
COARSE = 128
#: Candidate ranges are evaluated in chunks of this many lower bounds (memory).
CHUNK = 64


class _HistogramRangeObserver(UniformQuantizationObserverBase):
    """Per-tensor affine observer over a histogram; subclasses choose the range."""

    histogram: torch.Tensor
    lower: torch.Tensor
    width: torch.Tensor
    zeros: torch.Tensor
    min_val: torch.Tensor
    max_val: torch.Tensor

    def __init__(self, qscheme: torch.qscheme = torch.per_tensor_affine, **kwargs) -> None:
        if qscheme != torch.per_tensor_affine:
            raise NotImplementedError(f"{type(self).__name__} is per-tensor affine only")
        super().__init__(qscheme=qscheme, **kwargs)
        self.register_buffer("histogram", torch.zeros(BINS, dtype=torch.float64))
        self.register_buffer("lower", torch.tensor(0.0, dtype=torch.float64))
        self.register_buffer("width", torch.tensor(0.0, dtype=torch.float64))  # 0: no bins yet
        self.register_buffer("zeros", torch.tensor(0.0, dtype=torch.float64))
        self.register_buffer("min_val", torch.tensor(float("inf")))
        self.register_buffer("max_val", torch.tensor(float("-inf")))
        self._chosen: tuple[float, float] | None = None

    def forward(self, x_orig: torch.Tensor) -> torch.Tensor:
        """Adds ``x_orig``'s values to the histogram."""
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().reshape(-1).to(torch.float64)
        x = x[torch.isfinite(x)]  # ±inf saturates whatever the range (an infinite pad value
        if x.numel() == 0:  # is the lowering's to refuse, with its reason); NaN has no code
            return x_orig
        low, high = (float(v) for v in torch.aminmax(x))
        self.min_val.fill_(min(low, float(self.min_val)))
        self.max_val.fill_(max(high, float(self.max_val)))
        self._cover(min(low, 0.0), max(high, 0.0))
        nonzero = x[x != 0]
        self.zeros += x.numel() - nonzero.numel()
        index = ((nonzero - self.lower) / self.width).floor().clamp_(0, BINS - 1).long()
        self.histogram += torch.bincount(index, minlength=BINS).to(torch.float64)
        self._chosen = None
        return x_orig

    def _cover(self, low: float, high: float) -> None:
        """Widen the bins (by an integer factor, edges kept) until they span [low, high].

        Only the observed values need to stay covered (``max_val`` is already this batch's),
        not the old bins above them: keeping those would double the width at every small
        step down of the minimum, and a range growing over many batches would end with a
        few bins across its values."""
        eps = float(self.eps)
        if float(self.width) == 0.0:
            self.lower.fill_(low)
            self.width.fill_(max((high - low) / BINS, eps / 16))
            return
        lower, width = float(self.lower), float(self.width)
        if low >= lower and high <= lower + BINS * width:
            return
        below = math.ceil((lower - low) / width) if low < lower else 0  # old bins added below
        top = max(high, float(self.max_val))
        span = max(below + math.ceil((top - lower) / width), 1)
        factor = math.ceil(span / BINS)
        target = torch.div(torch.arange(BINS) + below, factor, rounding_mode="floor")
        target = target.clamp_(max=BINS - 1)  # only empty bins, above every value, go past
        rebinned = torch.zeros_like(self.histogram).index_add_(0, target, self.histogram)
        self.histogram.copy_(rebinned)
        self.lower.fill_(lower - below * width)
        self.width.fill_(width * factor)

    def centers(self) -> torch.Tensor:
        """Each bin's centre (float64)."""
        return self.lower + self.width * (torch.arange(BINS, dtype=torch.float64) + 0.5)

    def _choose(self) -> tuple[float, float]:
        """The clipping range ``(low, high)``, ``low <= 0 <= high``."""
        raise NotImplementedError

    def calculate_qparams(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Scale and zero point of the chosen range."""
        if float(self.width) == 0.0:  # never observed: the base's warning and defaults
            return self._calculate_qparams(self.min_val, self.max_val)
        if self._chosen is None:
            self._chosen = self._choose()
        low, high = self._chosen
        return self._calculate_qparams(torch.tensor(low), torch.tensor(high))

    def reset_min_max_vals(self) -> None:
        """Forget everything observed."""
        for buffer in (self.histogram, self.lower, self.width, self.zeros):
            buffer.zero_()
        self.min_val.fill_(float("inf"))
        self.max_val.fill_(float("-inf"))
        self._chosen = None

    def extra_repr(self) -> str:
        return f"min_val={float(self.min_val)}, max_val={float(self.max_val)}"


def _bounds(extreme: float, edges: torch.Tensor) -> torch.Tensor:
    """Candidate bounds between 0 and an observed extreme: 0, the extreme and every bin edge
    strictly between them."""
    if extreme == 0.0:
        return torch.zeros(1, dtype=torch.float64)
    inside = edges[(edges.abs() < abs(extreme)) & (edges * extreme > 0)]
    ends = torch.tensor([0.0, extreme], dtype=torch.float64)
    return torch.cat([ends, inside]).unique()


def _every(bounds: torch.Tensor, stride: int) -> torch.Tensor:
    """Every ``stride``-th bound and the last one."""
    return torch.cat([bounds[::stride], bounds[-1:]]).unique()


class MseObserver(_HistogramRangeObserver):
    """The range whose quantization has the least expected squared error: rounding noise
    ``scale² / 12`` for each value inside, the squared distance to the nearest bound for
    each value outside (clipped). Candidate bounds are the bin edges, 0 and the observed
    extremes; each range is evaluated with its zero point's rounding applied.

    ``through`` (an aten overload's name, ``"hardswish.default"``, with its constant
    ``arguments`` after the input and ``keywords``) measures the error after that
    element-wise function instead: when every consumer of the tensor applies it, that is the
    error the network sees. Rounding noise is then weighted by the function's squared slope,
    and clipping costs the distance between the function's values (nothing below hardswish's
    -3)."""

    def __init__(
        self,
        through: str | None = None,
        arguments: tuple[object, ...] = (),
        keywords: tuple[tuple[str, object], ...] = (),
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.through, self.arguments, self.keywords = through, arguments, keywords

    def function(self, x: torch.Tensor) -> torch.Tensor:
        """The function the error is measured after (the identity without ``through``)."""
        if self.through is None:
            return x
        namespace, packet, overload = self.through.split(".")
        op = getattr(getattr(getattr(torch.ops, namespace), packet), overload)
        return op(x.clone(), *self.arguments, **dict(self.keywords))

    def _choose(self) -> tuple[float, float]:
        """Every ``stride``-th candidate bound first, then every candidate within a stride
        of the best pair (the error varies smoothly with the bounds)."""
        lowest, highest = float(self.min_val), float(self.max_val)
        edges = self.lower + self.width * torch.arange(BINS + 1, dtype=torch.float64)
        lows = _bounds(min(lowest, 0.0), edges)
        highs = _bounds(max(highest, 0.0), edges)
        stride = max(1, math.ceil(max(lows.numel(), highs.numel()) / COARSE))
        low, high = self._search(_every(lows, stride), _every(highs, stride))
        i = int(torch.searchsorted(lows, low))
        j = int(torch.searchsorted(highs, high))
        return self._search(
            lows[max(i - stride, 0) : i + stride + 1], highs[max(j - stride, 0) : j + stride + 1]
        )

    def _search(self, lows: torch.Tensor, highs: torch.Tensor) -> tuple[float, float]:
        """The pair of ``lows`` × ``highs`` with the least expected error (the first one)."""
        best, choice = math.inf, (0.0, 0.0)
        for start in range(0, lows.numel(), CHUNK):
            chunk = lows[start : start + CHUNK]
            errors = self.expected_errors(chunk[:, None], highs[None, :])
            value, flat = errors.reshape(-1).min(0)  # first minimum: deterministic
            if float(value) < best:
                best = float(value)
                i, j = divmod(int(flat), highs.numel())
                choice = (float(chunk[i]), float(highs[j]))
        return choice

    def expected_errors(self, lows: torch.Tensor, highs: torch.Tensor) -> torch.Tensor:
        """Expected squared error, summed over the observed values, of quantizing them with
        the scale and zero point of each candidate range (broadcast ``lows`` × ``highs``),
        measured after :meth:`function`."""
        span = self.quant_max - self.quant_min
        scale = ((highs - lows) / span).clamp(min=float(self.eps))
        zero_point = (self.quant_min - torch.round(lows / scale)).clamp(
            self.quant_min, self.quant_max
        )
        low = (self.quant_min - zero_point) * scale  # the bounds the rounded zero point gives
        high = low + span * scale
        centers, counts, f = self.centers(), self.histogram, self.function
        slopes = torch.ones_like(centers)
        if self.through is not None:  # the function's mean slope over each bin
            half = self.width / 2
            slopes = (f(centers + half) - f(centers - half)) / (2 * half)
        values = f(centers)
        zero = torch.zeros(1, dtype=torch.float64)
        sums = [torch.cat([zero, torch.cumsum(counts * values**p, 0)]) for p in range(3)]
        weighted = torch.cat([zero, torch.cumsum(counts * slopes**2, 0)])
        below = torch.searchsorted(centers, low.contiguous())  # bins clipped up to ``low``
        above = torch.searchsorted(centers, high.contiguous(), right=True)
        f_low, f_high = f(low), f(high)
        clip_low = sums[2][below] - 2 * f_low * sums[1][below] + f_low**2 * sums[0][below]
        rest = [s[-1] - s[above] for s in sums]
        clip_high = rest[2] - 2 * f_high * rest[1] + f_high**2 * rest[0]
        inside = weighted[above] - weighted[below]
        return clip_low + clip_high + inside * scale**2 / 12


class PercentileObserver(_HistogramRangeObserver):
    """The range from the ``percentile``-th lowest to the ``percentile``-th highest value
    (linear within a bin), widened to include 0."""

    def __init__(self, percentile: float = 99.99, **kwargs) -> None:
        if not 50.0 < percentile <= 100.0:
            raise ValueError(f"percentile {percentile} is not in (50, 100]")
        super().__init__(**kwargs)
        self.percentile = percentile

    def _choose(self) -> tuple[float, float]:
        counts = self.histogram.clone()
        zero_bin = min(max(math.floor(-float(self.lower) / float(self.width)), 0), BINS - 1)
        counts[zero_bin] += self.zeros  # the exact zeros, counted apart, are in 0's bin
        cumulative = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(counts, 0)])
        total = float(cumulative[-1])
        tail = total * (1.0 - self.percentile / 100.0)
        edges = self.lower + self.width * torch.arange(BINS + 1, dtype=torch.float64)
        low = float(_interpolate(cumulative, edges, tail))
        high = float(_interpolate(cumulative, edges, total - tail))
        low = min(max(low, float(self.min_val)), 0.0)
        high = max(min(high, float(self.max_val)), 0.0)
        return low, high


def _interpolate(cumulative: torch.Tensor, edges: torch.Tensor, rank: float) -> torch.Tensor:
    """The value below which ``rank`` of the counts lie (uniform within a bin)."""
    index = int(torch.searchsorted(cumulative, torch.tensor(rank, dtype=torch.float64)))
    index = min(max(index, 1), BINS)
    before, after = cumulative[index - 1], cumulative[index]
    fraction = (rank - before) / (after - before) if after > before else torch.tensor(0.0)
    return edges[index - 1] + fraction.clamp(0, 1) * (edges[index] - edges[index - 1])


#: Clipping ratios of max |w| the int4 weight observers try: 0.05 to 1 in steps of 0.005.
CLIP_RATIOS = torch.arange(10, 201, dtype=torch.float64) / 200


def clipping_errors(rows: torch.Tensor, largest: int) -> torch.Tensor:
    """``[rows, len(CLIP_RATIOS)]``: each row's squared error (rounding inside, clipping
    outside) quantized symmetrically in [-largest, largest] with scale ratio · max |w| /
    largest, for every ratio of :data:`CLIP_RATIOS`."""
    w = rows.to(torch.float64)
    peak = w.abs().amax(dim=1, keepdim=True)
    errors = []
    for ratio in CLIP_RATIOS.tolist():
        scale = torch.where(peak > 0, ratio * peak / largest, torch.ones_like(peak))
        q = torch.round(w / scale).clamp(-largest, largest)
        errors.append(((w - q * scale) ** 2).sum(dim=1))
    return torch.stack(errors, dim=1)


def best_ratios(rows: torch.Tensor, largest: int) -> torch.Tensor:
    """Each row's clipping ratio of least squared error (of equal errors, the largest ratio:
    the least clipping)."""
    errors = clipping_errors(rows, largest).flip(1)  # largest ratio first: min takes the first
    return CLIP_RATIOS.flip(0)[errors.argmin(dim=1)]


class _ClippedWeights:
    """Keeps the weights it observes; qparams from the clipped range ``± ratio · max |w|``,
    the ratio of least squared error per row (:func:`best_ratios`), through the base class's
    ``_calculate_qparams`` (so ``convert_pt2e`` is unchanged)."""

    _weights: torch.Tensor | None = None

    def _rows(self, weights: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x_orig: torch.Tensor) -> torch.Tensor:
        if x_orig.numel():
            self._weights = x_orig.detach().clone()  # a constant: the last observation is it
        return super().forward(x_orig)  # type: ignore[misc]

    def calculate_qparams(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._weights is None:  # never observed: the base's warning and defaults
            return super().calculate_qparams()  # type: ignore[misc]
        rows = self._rows(self._weights)
        largest = (self.quant_max - self.quant_min) // 2  # type: ignore[attr-defined]
        peak = rows.abs().amax(dim=1).to(torch.float64) * best_ratios(rows, largest)
        shape = self.min_val.shape  # type: ignore[attr-defined]
        high = peak.to(torch.float32).reshape(shape)
        return self._calculate_qparams(-high, high)  # type: ignore[attr-defined]


class Int4MsePerChannelObserver(_ClippedWeights, PerChannelMinMaxObserver):
    """Symmetric per-channel weights (int4): each channel clipped where its error is least."""

    def _rows(self, weights: torch.Tensor) -> torch.Tensor:
        return weights.movedim(self.ch_axis, 0).reshape(weights.shape[self.ch_axis], -1)


class Int4MsePerTensorObserver(_ClippedWeights, MinMaxObserver):
    """Symmetric per-tensor weights (int4), clipped where the tensor's error is least."""

    def _rows(self, weights: torch.Tensor) -> torch.Tensor:
        return weights.reshape(1, -1)
