"""scaled_dot_product_attention traces as one graph: no branch on tensor data, even with masks and is_causal.

A data-dependent ``if`` (such as ``if not attends_somewhere.all():``) splits the graph under
torch.compile, makes ``fullgraph=True`` fail and makes torch.export fail. The eager backend is
enough to see it: this file takes about 2-4 s on 2 cores, most of it importing dynamo (inductor
would take 30 s or more). Before the fix, dynamo.explain counted 4 graphs and 3 breaks.
"""

from __future__ import annotations

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
