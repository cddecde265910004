"""Which encoder backend ``auto`` runs: pure decisions from the model, the machine and, on a CPU,
a timing of both backends there."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

REMOTE = "remote"  # an OpenAI-compatible embeddings server, called by the embedder alone
BACKENDS = ("auto", "torch", "onnx-int8", REMOTE)
# The int8 export is used only when its vectors agree with torch's this well on the timing
# sample (mean cosine): below it, quantisation has cost the model too much.
MIN_AGREEMENT = 0.99


def auto_candidates(*, onnx_model: bool, device: Callable[[], str]) -> tuple[str, ...]:
    """The backends ``auto`` chooses between (a configured backend is used as it is): on a CPU,
    torch and the int8 export, when the model is one the export supports (``onnx_model``: a
    tokenizer.json, only transformer, pooling and normalisation modules, a pooling it
    implements); torch alone on an accelerator (cuda, mps), where it is the fast one, and for any
    other model.

    ``device`` gives the device torch would run on (cuda, mps or cpu); it is asked only for a
    model the export supports, since asking may import torch."""
    if onnx_model and device() == "cpu":
        return ("torch", "onnx-int8")
    return ("torch",)


@dataclass(frozen=True, slots=True)
class Timing:
    """Both backends on the same sample at the model's window: texts per second as the service
    runs each (torch one pass at a time over every core, int8 in its lanes), and the mean cosine
    of their vectors of the same texts."""

    torch_per_s: float
    int8_per_s: float
    cosine: float


@dataclass(frozen=True, slots=True)
class Choice:
    backend: str
    timing: Timing

    def record(self, fingerprint: Mapping[str, object]) -> dict[str, object]:
        """What the cache keeps of it: the choice, its timing, and what it was measured on."""
        return {"backend": self.backend, **asdict(self.timing), "fingerprint": dict(fingerprint)}

    @classmethod
    def from_record(cls, record: object) -> Choice | None:
        """A cached choice, or None for a record this code cannot read (then it is timed again)."""
        if not isinstance(record, dict) or record.get("backend") not in BACKENDS[1:]:
            return None
        try:
            timing = Timing(float(record["torch_per_s"]), float(record["int8_per_s"]), float(record["cosine"]))
        except (KeyError, TypeError, ValueError):
            return None
        return cls(str(record["backend"]), timing)


def faster(timing: Timing) -> Choice:
    """The faster backend, provided the two agree (mean cosine at least :data:`MIN_AGREEMENT`);
    torch when they do not, or on a tie."""
    if timing.cosine >= MIN_AGREEMENT and timing.int8_per_s > timing.torch_per_s:
        return Choice("onnx-int8", timing)
    return Choice("torch", timing)
