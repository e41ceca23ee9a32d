"""Write a tiny Llama target and an EAGLE3 draft whose draft always agrees with the target.

Run on the GPU machine with the image's torch and safetensors (no hub, no tokenizer):
    python make_model.py OUT_DIR         -> OUT_DIR/target, OUT_DIR/draft

Why crafted weights and not ``--load-format dummy``: random weights make the draft and the target
disagree on almost every token, so the accept length is ~1.0 whether speculation is on or off and
``dynspec prove`` could not tell the two apart. Here every linear layer of both models is zero, the
embeddings and norms are ones, and ``lm_head`` row 7 is one: the residual stream stays positive, so
the target predicts token 7 after any prompt and so does the draft. With speculation on, every
draft token is accepted (accept length = --speculative-num-draft-tokens); with it off (or the
drafts replaced), it is 1.0. Real sglang model classes, real loaders, real kernels.
"""
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

HIDDEN, INTER, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 256, 512, 8, 4, 2, 64, 1024
TOKEN = 7  # what both models always predict
DTYPE = torch.bfloat16

BASE = {
    "hidden_size": HIDDEN, "intermediate_size": INTER, "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "bos_token_id": 1, "eos_token_id": 2, "model_type": "llama",
}


def _layer(prefix: str, q_in: int) -> dict:
    z = lambda *shape: torch.zeros(*shape, dtype=DTYPE)  # noqa: E731
    return {
        f"{prefix}.self_attn.q_proj.weight": z(HEADS * HEAD_DIM, q_in),
        f"{prefix}.self_attn.k_proj.weight": z(KV_HEADS * HEAD_DIM, q_in),
        f"{prefix}.self_attn.v_proj.weight": z(KV_HEADS * HEAD_DIM, q_in),
        f"{prefix}.self_attn.o_proj.weight": z(HIDDEN, HEADS * HEAD_DIM),
        f"{prefix}.mlp.gate_proj.weight": z(INTER, HIDDEN),
        f"{prefix}.mlp.up_proj.weight": z(INTER, HIDDEN),
        f"{prefix}.mlp.down_proj.weight": z(HIDDEN, INTER),
        f"{prefix}.input_layernorm.weight": torch.ones(HIDDEN, dtype=DTYPE),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(HIDDEN, dtype=DTYPE),
    }


def _head() -> torch.Tensor:
    head = torch.zeros(VOCAB, HIDDEN, dtype=DTYPE)
    head[TOKEN] = 1
    return head


def write(out: Path) -> None:
    target, draft = out / "target", out / "draft"
    target.mkdir(parents=True, exist_ok=True)
    draft.mkdir(parents=True, exist_ok=True)

    t = {"model.embed_tokens.weight": torch.ones(VOCAB, HIDDEN, dtype=DTYPE),
         "model.norm.weight": torch.ones(HIDDEN, dtype=DTYPE), "lm_head.weight": _head()}
    for i in range(LAYERS):
        t.update(_layer(f"model.layers.{i}", HIDDEN))
    save_file(t, str(target / "model.safetensors"), metadata={"format": "pt"})
    (target / "config.json").write_text(json.dumps(
        {**BASE, "architectures": ["LlamaForCausalLM"], "num_hidden_layers": LAYERS}, indent=1))

    d = {"model.embed_tokens.weight": torch.ones(VOCAB, HIDDEN, dtype=DTYPE),
         "model.fc.weight": torch.full((HIDDEN, 3 * HIDDEN), 1.0 / (3 * HIDDEN), dtype=DTYPE),
         "model.norm.weight": torch.ones(HIDDEN, dtype=DTYPE), "lm_head.weight": _head(),
         "model.layers.0.hidden_norm.weight": torch.ones(HIDDEN, dtype=DTYPE)}
    d.update(_layer("model.layers.0", 2 * HIDDEN))  # EAGLE3's midlayer attends over [embeds, hidden]
    save_file(d, str(draft / "model.safetensors"), metadata={"format": "pt"})
    (draft / "config.json").write_text(json.dumps(
        {**BASE, "architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
         "draft_vocab_size": VOCAB}, indent=1))
    print(f"make_model: wrote {target} and {draft}", flush=True)


if __name__ == "__main__":
    write(Path(sys.argv[1]))
