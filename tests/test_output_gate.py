"""GroupedQueryAttention(output_gate=True): Qwen3-Next's gated attention, equal to Hugging Face's Qwen3NextAttention.

HF rounds twice to float32 in float64 runs: its RMSNorm (``x.float()``, weight 1 + w) and its eager softmax
(``dtype=torch.float32``). The exact comparison runs HF with both kept in the input's dtype (patched for the test:
the formulas are unchanged), so 1e-12 holds; one more test runs HF unpatched and allows float32 rounding.
"""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3NextConfig
from transformers.models.qwen3_next import modeling_qwen3_next

import attn_core as ac
from tests.reference import randn

F64 = torch.float64
TOL64 = {"rtol": 1e-12, "atol": 1e-12}
# float32 rounding in HF's norm and softmax: eps32 ≈ 6e-8 per op, a few ops deep, on O(1) numbers
TOL32 = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture
def hf_in_float64(monkeypatch):
    """Keep HF's RMSNorm and eager softmax in float64 (they cast to float32)."""

    def rms_norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight)

    real_softmax = torch.nn.functional.softmax

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        return real_softmax(x, dim=dim, dtype=None if x.dtype == F64 else dtype)

    monkeypatch.setattr(modeling_qwen3_next.Qwen3NextRMSNorm, "forward", rms_norm)
    monkeypatch.setattr(torch.nn.functional, "softmax", softmax)


def cos_sin(length: int, rotary_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen3NextRotaryEmbedding's cos/sin over the rotated features only, float64: (1, L, rotary_dim) each."""
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=F64) / rotary_dim))  # (rotary_dim/2,)
    angles = torch.arange(length, dtype=F64)[None, :, None] * inv_freq  # (1, L, rotary_dim/2)
    angles = torch.cat([angles, angles], dim=-1)  # (1, L, rotary_dim)
    return angles.cos(), angles.sin()


def additive(mask: torch.Tensor) -> torch.Tensor:
    return torch.zeros(mask.shape, dtype=F64).masked_fill(~mask, float("-inf"))


def qwen3_next_pair(*, partial=1.0, heads=4, kv_heads=2, head_dim=8, hidden=32, seed=0):
    """A Qwen3NextAttention (eager, float64, random weights) and our layer loaded from it: no renaming, only the
    q_norm / k_norm weights + 1 (HF's RMSNorm multiplies by 1 + weight)."""
    config = Qwen3NextConfig(
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        partial_rotary_factor=partial,
        rope_theta=10000.0,
        attention_bias=False,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    hf = modeling_qwen3_next.Qwen3NextAttention(config, layer_idx=3).to(F64).eval()
    for parameter in hf.parameters():
        torch.nn.init.normal_(parameter, std=0.3)
    ours = ac.GroupedQueryAttention(
        hidden,
        heads,
        kv_heads,
        head_dim=head_dim,
        rope_base=10000.0,
        partial_rotary_factor=partial,
        qk_norm=True,
        output_gate=True,
        bias=False,
    ).to(F64)
    state = hf.state_dict()
    state["q_norm.weight"] = state["q_norm.weight"] + 1
    state["k_norm.weight"] = state["k_norm.weight"] + 1
    ours.load_state_dict(state, strict=True)
    assert config.rms_norm_eps == ours.q_norm.eps == 1e-6
    return hf, ours.eval()


def run_hf(hf, x, mask):
    rotary_dim = int(hf.head_dim * hf.config.rope_parameters["partial_rotary_factor"])
    return hf(x, position_embeddings=cos_sin(x.shape[1], rotary_dim, 10000.0), attention_mask=additive(mask))


@pytest.mark.parametrize("partial", [1.0, 0.25], ids=["full_rope", "partial_rope_0.25"])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 2), (4, 4), (4, 1)])
def test_equals_qwen3_next_attention(hf_in_float64, partial, heads, kv_heads):
    hf, ours = qwen3_next_pair(partial=partial, heads=heads, kv_heads=kv_heads)
    x = randn(2, 7, 32, seed=1)  # (B, L, hidden)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()  # (L, L)
    hf_out, hf_weights = run_hf(hf, x, causal)
    out, weights = ours(x, is_causal=True)
    torch.testing.assert_close(out, hf_out, **TOL64)
    torch.testing.assert_close(weights, hf_weights, **TOL64)


def test_equals_qwen3_next_with_a_padding_mask(hf_in_float64):
    hf, ours = qwen3_next_pair(partial=0.25)
    x = randn(2, 6, 32, seed=2)
    mask = torch.ones(2, 1, 6, 6, dtype=torch.bool).tril()  # (B, 1, L, L)
    mask[1, :, :, :2] = False  # sequence 1 is left-padded by two tokens
    mask[1, :, :2, 0] = True  # (the padding queries see one key, so no row is empty in HF's -inf form)
    hf_out, hf_weights = run_hf(hf, x, mask)
    out, weights = ours(x, mask=mask)
    torch.testing.assert_close(out, hf_out, **TOL64)
    torch.testing.assert_close(weights, hf_weights, **TOL64)


def test_equals_unpatched_qwen3_next_to_float32_rounding():
    hf, ours = qwen3_next_pair(partial=0.25)
    x = randn(1, 7, 32, seed=3)
    hf_out, hf_weights = run_hf(hf, x, torch.ones(7, 7, dtype=torch.bool).tril())
    out, weights = ours(x, is_causal=True)
    torch.testing.assert_close(out, hf_out, **TOL32)
    torch.testing.assert_close(weights, hf_weights, **TOL32)


def plain_twin(gated: ac.GroupedQueryAttention) -> ac.GroupedQueryAttention:
    """The same layer without a gate: q_proj keeps each head's first head_dim rows (the query half)."""
    plain = ac.GroupedQueryAttention(
        gated.hidden_dim, gated.num_heads, gated.num_kv_heads, head_dim=gated.head_dim, rope_base=gated.rope_base
    ).to(F64)
    state = dict(gated.state_dict())
    for name in ("weight", "bias"):
        rows = state[f"q_proj.{name}"].view(gated.num_heads, 2, gated.head_dim, -1)  # (H, 2, D, hidden or 1)
        state[f"q_proj.{name}"] = rows[:, 0].reshape(
            gated.num_heads * gated.head_dim, *state[f"q_proj.{name}"].shape[1:]
        )
    plain.load_state_dict(state)
    return plain


def test_gate_layout_query_then_gate_per_head_and_weights_unchanged():
    torch.manual_seed(0)
    gated = ac.GroupedQueryAttention(16, 4, 2, rope_base=10000.0, output_gate=True).to(F64)
    assert gated.q_proj.weight.shape == (4 * 2 * 4, 16)
    plain = plain_twin(gated)
    x = randn(2, 5, 16, seed=4)
    _, gated_weights = gated(x, is_causal=True)
    _, plain_weights = plain(x, is_causal=True)
    torch.testing.assert_close(gated_weights, plain_weights, **TOL64)  # the gate never touches the weights
    with torch.no_grad():  # gate rows (second half of each head) -> logit +800: sigmoid == 1 exactly
        gated.q_proj.weight.view(4, 2, 4, 16)[:, 1] = 0.0
        gated.q_proj.bias.view(4, 2, 4)[:, 1] = 800.0
    torch.testing.assert_close(gated(x, is_causal=True)[0], plain(x, is_causal=True)[0], **TOL64)
    with torch.no_grad():  # gate logit -800: sigmoid underflows to 0, every head outputs 0, only o_proj's bias
        gated.q_proj.bias.view(4, 2, 4)[:, 1] = -800.0
    torch.testing.assert_close(gated(x, is_causal=True)[0], gated.o_proj.bias.expand(2, 5, 16), **TOL64)


@pytest.mark.parametrize("chunks", [(1,) * 7, (2, 4, 1), (6, 1)])
@pytest.mark.parametrize("sinks", [False, True])
def test_cached_decoding_equals_full_pass(chunks, sinks):
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(
        16, 4, 2, rope_base=10000.0, qk_norm=True, output_gate=True, sinks=sinks, sliding_window=4
    ).to(F64)
    layer.eval()
    x = randn(2, 7, 16, seed=5)
    full_out, _ = layer(x, is_causal=True)
    cache, outs, start = ac.KVCache(), [], 0
    for size in chunks:
        outs.append(layer(x[:, start : start + size], is_causal=True, cache=cache)[0])
        start += size
    torch.testing.assert_close(torch.cat(outs, dim=1), full_out, **TOL64)


def test_paged_cache_decoding_equals_full_pass():
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(16, 2, 1, rope_base=10000.0, output_gate=True, sinks=True).to(F64).eval()
    x = randn(1, 6, 16, seed=6)
    full_out, _ = layer(x, is_causal=True)
    cache = ac.PagedKVCache(block_size=2, num_blocks=4)
    steps = [layer(x[:, i : i + 1], cache=cache, seq_id=0)[0] for i in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full_out, **TOL64)


def test_future_tokens_do_not_change_past_outputs():
    torch.manual_seed(0)
    layer = ac.GroupedQueryAttention(16, 2, 2, rope_base=10000.0, output_gate=True, sinks=True).to(F64)
    x = randn(1, 6, 16, seed=7)
    changed = x.clone()
    changed[:, 4:] += 1.0
    torch.testing.assert_close(layer(x, is_causal=True)[0][:, :4], layer(changed, is_causal=True)[0][:, :4], **TOL64)


def test_state_dict_keys_and_repr():
    layer = ac.GroupedQueryAttention(16, 2, 1, qk_norm=True, output_gate=True, sinks=True, bias=False)
    assert sorted(layer.state_dict()) == [
        "k_norm.weight",
        "k_proj.weight",
        "o_proj.weight",
        "q_norm.weight",
        "q_proj.weight",
        "sinks",
        "v_proj.weight",
    ]
    assert "output_gate=True" in repr(layer)


@pytest.mark.parametrize("value", [1, 0, "no", None])
def test_output_gate_flag_must_be_a_bool(value):
    with pytest.raises(TypeError, match="output_gate must be True or False"):
        ac.GroupedQueryAttention(16, 2, 1, output_gate=value)
