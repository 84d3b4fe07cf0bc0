"""check_mla (notebook 16's MLA drill): stub, solution, correct variants, each diagnosed mistake, junk."""

from __future__ import annotations

import pytest
import torch
from learner_answers import JUNK, one_red_line
from torch import nn

import attn_core as ac
from attn_core.deepseek.latent_attention import RMSNorm
from attn_core.exercises.handwrite import check_mla  # re-exported from handwrite_mla


def mla_class(
    *, rope="ok", rope_on=None, per_head_cache=False, cache_up=False, scale="ok", norm=True, split_a="ok",
    layout="interleaved", positions="ok", float32=False, einsum=False, nn_rmsnorm=False, split_b="ok", causal=True,
    eps=1e-6,
):  # fmt: skip
    """A naive MLA answer, correct unless one of the flags replays a mistake."""

    class MLA(nn.Module):
        def __init__(self, hidden_dim, num_heads, *, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                     rope_base=10000.0):  # fmt: skip
            super().__init__()
            self.h, self.rank, self.nope, self.rope, self.v = (
                num_heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
            )  # fmt: skip
            self.base = rope_base
            self.q_proj = nn.Linear(hidden_dim, num_heads * (qk_nope_head_dim + qk_rope_head_dim), bias=False)
            self.kv_a_proj_with_mqa = nn.Linear(hidden_dim, kv_lora_rank + qk_rope_head_dim, bias=False)
            self.kv_a_layernorm = nn.RMSNorm(kv_lora_rank, eps=eps) if nn_rmsnorm else RMSNorm(kv_lora_rank)
            self.kv_b_proj = nn.Linear(kv_lora_rank, num_heads * (qk_nope_head_dim + v_head_dim), bias=False)
            self.o_proj = nn.Linear(num_heads * v_head_dim, hidden_dim, bias=False)

        def rot(self, t, pos):
            return ac.apply_rope(t, pos, base=self.base, interleaved=layout == "interleaved")

        def forward(self, x, cache=None):
            if float32:
                x = x.float()
                self.float()
            b, length, _ = x.shape  # (B, L, hidden)
            q = self.q_proj(x).view(b, length, self.h, -1).transpose(1, 2)  # (B, H, L, nope + rope)
            q_nope, q_rope = q.split([self.nope, self.rope], dim=-1)  # (B, H, L, nope), (B, H, L, rope)
            kv_a = self.kv_a_proj_with_mqa(x)  # (B, L, rank + rope)
            if split_a == "rope_first":
                k_rope, c = kv_a.split([self.rope, self.rank], dim=-1)  # (B, L, rope), (B, L, rank)
            else:
                c, k_rope = kv_a.split([self.rank, self.rope], dim=-1)  # (B, L, rank), (B, L, rope)
            if norm:
                c = self.kv_a_layernorm(c)  # (B, L, rank)
            c, k_rope = c.unsqueeze(1), k_rope.unsqueeze(1)  # (B, 1, L, rank), (B, 1, L, rope)
            start = 0 if cache is None or positions == "restart" else len(cache)
            pos = torch.arange(start, start + length)  # (L,)
            q_rope, k_rope = self.rot(q_rope, pos), self.rot(k_rope, pos)  # (B, H, L, rope), (B, 1, L, rope)
            if rope_on == "latent":
                c = self.rot(c, pos)  # (B, 1, L, rank)
            if per_head_cache:
                k_rope = k_rope.expand(-1, self.h, -1, -1)  # (B, H, L, rope)
            if cache is not None and not cache_up:
                c, k_rope = cache.update(c, k_rope)  # (B, 1, T, rank), (B, 1, T, rope)
            t = c.shape[-2]
            kv = self.kv_b_proj(c.squeeze(1)).view(b, t, self.h, -1).transpose(1, 2)  # (B, H, T, nope + v)
            if split_b == "v_first":
                v, k_nope = kv.split([self.v, self.nope], dim=-1)  # (B, H, T, v), (B, H, T, nope)
            else:
                k_nope, v = kv.split([self.nope, self.v], dim=-1)  # (B, H, T, nope), (B, H, T, v)
            k = torch.cat([k_nope, k_rope.expand(-1, self.h, -1, -1)], dim=-1)  # (B, H, T, nope + rope)
            if cache is not None and cache_up:
                k, v = cache.update(k, v)  # (B, H, T, nope + rope), (B, H, T, v): MHA-sized
                t = k.shape[-2]
            if rope == "missing":
                q_full, k = q_nope, k[..., : self.nope]  # (B, H, L, nope), (B, H, T, nope)
            elif rope_on == "nope":
                q_full = torch.cat([self.rot(q_nope, pos), q_rope], dim=-1)  # (B, H, L, nope + rope)
                k = torch.cat([self.rot(k[..., : self.nope], torch.arange(t)), k[..., self.nope :]], dim=-1)
            else:
                q_full = torch.cat([q_nope, q_rope], dim=-1)  # (B, H, L, nope + rope)
            s = {"nope": self.nope**-0.5}.get(scale, (self.nope + self.rope) ** -0.5)
            if einsum:
                scores = torch.einsum("bhld,bhtd->bhlt", q_full, k) * s  # (B, H, L, T)
            else:
                scores = q_full @ k.transpose(-2, -1) * s  # (B, H, L, T)
            mask = torch.ones(length, t, dtype=torch.bool).tril(diagonal=t - length if causal else t)  # (L, T)
            weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)  # (B, H, L, T)
            out = (weights @ v).transpose(1, 2).reshape(b, length, -1)  # (B, L, H * v)
            return self.o_proj(out), weights  # (B, L, hidden), (B, H, L, T)

    return MLA


def verdict(capsys, answer):
    ok = check_mla(answer)
    out = capsys.readouterr().out
    return ok, out


def test_stub_is_not_attempted(capsys):
    for stub in (None, ...):
        ok, out = verdict(capsys, stub)
        assert ok is False and "not attempted" in out and one_red_line(out)

    class Stub(nn.Module):
        def __init__(self, *a, **k):
            super().__init__()

        def forward(self, x, cache=None):
            raise NotImplementedError

    ok, out = verdict(capsys, Stub)
    assert ok is False and one_red_line(out)


@pytest.mark.parametrize(
    "flags",
    [{}, {"float32": True}, {"einsum": True}, {"nn_rmsnorm": True}],
    ids=["solution", "float32", "einsum", "nn.RMSNorm"],
)
def test_correct_answers_pass(capsys, flags):
    ok, out = verdict(capsys, mla_class(**flags))
    assert ok is True, out
    assert out.startswith("✅")


@pytest.mark.parametrize(
    "flags, phrase",
    [
        ({"rope": "missing"}, "rope part is missing"),
        ({"rope_on": "latent"}, "RoPE applied to the latent"),
        ({"rope_on": "nope"}, "RoPE applied to the nope part"),
        ({"per_head_cache": True}, "SHARED by all heads"),
        ({"cache_up": True}, "up-projected per-head keys"),
        ({"scale": "nope"}, "1/√qk_nope_head_dim"),
        ({"norm": False}, "kv_a_layernorm is skipped"),
        ({"split_a": "rope_first"}, "latent first"),
        ({"layout": "half"}, "wrong RoPE layout"),
        ({"positions": "restart"}, "positions restart at 0"),
        ({"split_b": "v_first"}, "kv_b_proj's output split in the wrong order"),
        ({"causal": False}, "no causal mask"),
        ({"nn_rmsnorm": True, "eps": None}, "kv_a_layernorm has eps=None"),  # nn.RMSNorm(dim), the natural slip
        ({"nn_rmsnorm": True, "eps": 1e-5}, "kv_a_layernorm uses eps=1e-05"),
    ],
)
def test_each_mistake_is_named(capsys, flags, phrase):
    ok, out = verdict(capsys, mla_class(**flags))
    assert ok is False
    assert phrase in out, out
    assert one_red_line(out), out


def test_the_diagnoses_are_not_vacuous():
    """Every simulated mistake really changes the output (else its diagnosis could never be told apart)."""
    from attn_core.exercises.handwrite_mla import _SUSPECTS, _simulate

    torch.manual_seed(0)
    ref = ac.MultiHeadLatentAttention(
        24, 3, kv_lora_rank=8, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5, rope_base=100.0
    ).double()
    with torch.no_grad():
        ref.kv_a_layernorm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 6, 24, dtype=torch.float64)  # (B, T, hidden)
    steps = [x[:, :3], x[:, 3:4], x[:, 4:5]]
    right = _simulate(ref, steps)
    with torch.no_grad():
        cache = ac.KVCache()
        expected = [ref(s, is_causal=True, cache=cache) for s in steps]
    for (out, w), (e_out, e_w) in zip(right, expected, strict=True):
        torch.testing.assert_close(out, e_out, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(w, e_w, rtol=1e-12, atol=1e-12)
    for mistake, _ in _SUSPECTS:
        wrong = _simulate(ref, steps, **mistake)
        assert any(not torch.allclose(a[0], b[0], atol=1e-6) for a, b in zip(wrong, right, strict=True)), mistake


def test_wrong_names_and_shapes(capsys):
    class Renamed(mla_class()):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.w_dkv = self.kv_a_proj_with_mqa
            del self.kv_a_proj_with_mqa

    ok, out = verdict(capsys, Renamed)
    assert ok is False and "kv_a_proj_with_mqa" in out and one_red_line(out)

    class Biased(mla_class()):
        def __init__(self, hidden_dim, *a, **k):
            super().__init__(hidden_dim, *a, **k)
            self.o_proj = nn.Linear(self.o_proj.in_features, hidden_dim)

    ok, out = verdict(capsys, Biased)
    assert ok is False and "bias=False" in out and one_red_line(out)


def test_cache_not_updated(capsys):
    class NoUpdate(mla_class()):
        def forward(self, x, cache=None):
            return super().forward(x, None)

    ok, out = verdict(capsys, NoUpdate)
    assert ok is False and "did not add" in out and one_red_line(out)


@pytest.mark.parametrize("junk", JUNK, ids=lambda j: type(j).__name__)
def test_junk_gets_one_red_line(junk, capsys):
    class Returns(mla_class()):
        def forward(self, x, cache=None):
            return junk

    for answer in (Returns, junk, lambda *a, **k: junk):
        assert check_mla(answer) is False
        out = capsys.readouterr().out
        assert one_red_line(out), out
