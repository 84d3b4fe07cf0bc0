"""scaled_dot_product_attention traces as one graph: no branch on tensor data, even with masks and is_causal.

A data-dependent ``if`` (such as ``if not attends_somewhere.all():``) splits the graph under
torch.compile, makes ``fullgraph=True`` fail and makes torch.export fail. The eager backend is
enough to see it: this file takes about 2-4 s on 2 cores, most of it importing dynamo (inductor
would take 30 s or more). Before the fix, dynamo.explain counted 4 graphs and 3 breaks.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import attn_core as ac

F64 = torch.float64


def qkv_and_padding() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """GQA problem (4 query heads, 2 kv heads) with a padding mask whose second row sees no key."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 5, 8, generator=generator, dtype=F64)  # (B, Hq, Lq, D)
    k = torch.randn(2, 2, 7, 8, generator=generator, dtype=F64)  # (B, Hkv, Lk, D)
    v = torch.randn(2, 2, 7, 8, generator=generator, dtype=F64)  # (B, Hkv, Lk, Dv)
    mask = ac.padding_mask([7, 0])  # (B, 1, 1, Lk): batch row 1 is all padding, so its queries are blind
    return q, k, v, mask


def test_fullgraph_compile_matches_eager_and_zeroes_blind_rows():
    """fullgraph=True (which raises on any graph break) compiles a call with both a mask and is_causal,
    gives the eager result, and blind rows stay 0."""
    q, k, v, mask = qkv_and_padding()
    compiled = torch.compile(ac.scaled_dot_product_attention, backend="eager", fullgraph=True)
    out, weights = compiled(q, k, v, mask, is_causal=True)
    eager_out, eager_weights = ac.scaled_dot_product_attention(q, k, v, mask, is_causal=True)
    torch.testing.assert_close(out, eager_out, rtol=0, atol=0)  # the same ops on the same data
    torch.testing.assert_close(weights, eager_weights, rtol=0, atol=0)
    assert torch.equal(out[1], torch.zeros_like(out[1]))


def test_torch_export_with_a_mask():
    """torch.export traces the masked, causal call (it failed on a data-dependent guard)."""

    class Attend(torch.nn.Module):
        def forward(self, q, k, v, mask):
            return ac.scaled_dot_product_attention(q, k, v, mask, is_causal=True)

    q, k, v, mask = qkv_and_padding()
    exported = torch.export.export(Attend(), (q, k, v, mask))
    out, _ = exported.module()(q, k, v, mask)
    torch.testing.assert_close(out, ac.scaled_dot_product_attention(q, k, v, mask, is_causal=True)[0], rtol=0, atol=0)


def test_merge_attention_compiles_fullgraph_with_its_lse_check_skipped():
    """merge_attention's NaN/+inf lse check reads data, so it runs in eager only; compiled, one graph."""
    q, k, v, _ = qkv_and_padding()
    (out_a, lse_a), (out_b, lse_b) = (ac.tiled_attention(q, k[..., s, :], v[..., s, :], return_lse=True)
                                      for s in (slice(0, 3), slice(3, 7)))  # fmt: skip
    compiled = torch.compile(ac.merge_attention, backend="eager", fullgraph=True)
    got, want = compiled(out_a, lse_a, out_b, lse_b), ac.merge_attention(out_a, lse_a, out_b, lse_b)
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # (out, lse) pairs


def test_tiled_attention_under_compile_warns_and_runs_eagerly():
    """Dynamo cannot trace the tile loop (in-place writes into strided views): a graph break, said by a
    TiledAttentionCompileWarning, and the eager numbers; fullgraph=True refuses it."""
    from attn_core.flash.tiled import TiledAttentionCompileWarning

    q, k, v, _ = qkv_and_padding()

    def attend(q, k, v):
        return ac.tiled_attention(q * 2.0, k, v, is_causal=True, block_size=2) + 1.0  # (B, Hq, Lq, Dv)

    torch._dynamo.reset()
    with pytest.warns(TiledAttentionCompileWarning, match="runs eagerly under torch.compile"):
        out = torch.compile(attend, backend="eager")(q, k, v)
    torch.testing.assert_close(out, attend(q, k, v), rtol=0, atol=0)
    with pytest.warns(TiledAttentionCompileWarning):
        explanation = torch._dynamo.explain(attend)(q, k, v)
    assert explanation.graph_break_count >= 1
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.Unsupported):
        torch.compile(attend, backend="eager", fullgraph=True)(q, k, v)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # eager: no warning
        attend(q, k, v)
