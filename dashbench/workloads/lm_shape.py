"""A Llama-style decoder LM's shape and its FLOPs by formula, with no Keras: the catalog checks a
spec with it before TensorFlow starts, the memory estimate counts its parameters, and the engine
builds the model from it.

Every dimension follows from the width, so a quick try is a scaled-down Llama, not another model:
heads of 128 from width 1024 (8 heads of width/8 below), a quarter as many KV heads as query heads
(Llama 3.1 8B: 32 and 8), an MLP of 3.5 × the width (14336 at 4096), and a vocabulary of 32 tokens
per unit of width up to Llama 3's 128,256 — so the full width has the full vocabulary, and a quick
width's logits do not dwarf the rest of the model.
"""

from __future__ import annotations

from dataclasses import dataclass

# Llama 3.1 8B (MaxText configs/models/llama3.1-8b.yml); the sequence length is MLPerf Training's.
FULL = {"layers": 32, "width": 4096, "seq_len": 8192}
MAX_VOCAB = 128256
ROPE_THETA = 500000.0
NORM_EPSILON = 1e-5
HEAD_DIM = 128
# MLPerf Training v5.1's target for Llama 3.1 8B: validation log-perplexity on C4.
TARGET_LOG_PERPLEXITY = 3.3


@dataclass(frozen=True)
class LMDims:
    layers: int
    width: int
    seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int

    @property
    def parameters(self) -> int:
        """Every weight: input embedding, the blocks (attention, SwiGLU MLP, two norms), the final norm
        and the untied output head."""
        attention = self.width * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        block = attention + 3 * self.width * self.mlp + 2 * self.width
        return 2 * self.vocab * self.width + self.layers * block + self.width

    def palm_flops(self) -> dict:
        """PaLM's count (Chowdhery et al. 2022, appendix B; nanoGPT's estimate_mfu), per token:
        training 6N + 12·L·H·Q·T, forward a third of it. N counts every parameter, the input
        embedding too, and attention is counted whole, its causal half included."""
        attention = 12.0 * self.layers * self.heads * self.head_dim * self.seq_len
        training = 6.0 * self.parameters + attention
        return {"forward": training / 3, "training": training}


def width_rule(width: int) -> str | None:
    """Why `width` cannot be a Llama width (None when it can)."""
    if width >= 1024 and width % HEAD_DIM:
        return f"from 1024 it is a multiple of {HEAD_DIM} (heads of {HEAD_DIM}), got {width}"
    if width < 1024 and width % 16:
        return f"below 1024 it is a multiple of 16 (8 heads of an even size, for the rotary embedding), got {width}"
    return None


def dims(width: int, layers: int, seq_len: int) -> LMDims:
    head_dim = HEAD_DIM if width >= 1024 else width // 8
    heads = width // head_dim
    return LMDims(
        layers=layers,
        width=width,
        seq_len=seq_len,
        heads=heads,
        kv_heads=max(1, heads // 4),
        head_dim=head_dim,
        mlp=7 * width // 2,
        vocab=min(MAX_VOCAB, 32 * width),
    )


def memory_counts(d: LMDims) -> tuple[float, float, float]:
    """(parameters, activation values per sequence, input values per sequence), for dashbench.workloads.memory:
    per block the residual, norm, q/k/v/attention outputs and the MLP's three products, plus the
    attention scores and their softmax (XLA's attention keeps T × T per head); the logits with their
    float32 copy and softmax."""
    t = d.seq_len
    per_block = t * (8 * d.width + 4 * d.mlp) + 2 * d.heads * t * t
    return float(d.parameters), d.layers * per_block + 3 * t * d.vocab, 2.0 * t


def resolve(values: dict) -> dict:
    """The catalog's check of a llama spec's resolved shapes (SpecError naming the field), with the
    vocabulary that follows from the width."""
    from dashbench.core.spec import SpecError

    problem = width_rule(values["width"])
    if problem:
        raise SpecError("width", f"a llama width: {problem}")
    # The store lists a run's shape by its width and sequence length: a layer count of its own would
    # list a 2-layer model as the full-size 8B.
    if values["layers"] != FULL["layers"] and (values["width"], values["seq_len"]) == (FULL["width"], FULL["seq_len"]):
        raise SpecError(
            "layers",
            f"{values['layers']} layers need --width or --seq-len off full size too "
            f"({FULL['width']}, {FULL['seq_len']}), so that the run is never listed as full size",
        )
    return {**values, "vocab": dims(values["width"], values["layers"], values["seq_len"]).vocab}
