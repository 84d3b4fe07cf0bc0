"""Chinese for the graders of notebook 08 (``check_merge_states``, ``check_skipped_tiles``, defined in the notebook).

Notebook 08 writes its checkers in the open, next to the exercises, and prints their verdicts through
``attn_core.exercises.feedback``: these are the ❌ messages they can print, as ``(regex, template)`` pairs
(see ``attn_core.i18n``). The variable parts (shapes, counts) stay as the checkers printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (4, 1)

CATALOG = [
    # the names of the two checks are the learner's function names: they stay as they are
    *exact({name: name for name in ("merge_states", "skipped_tiles")}),
    # ---- exercise 1: merge two partial states (split-K)
    (
        r"return a tuple \(m, l, acc\)\.",
        "请返回元组 (m, l, acc)。",
    ),
    (
        rf"shapes: l should be \(rows, 1\) and acc \(rows, Dv\) = \(4, 5\), got (?P<l>{_SHAPE}) and "
        rf"(?P<acc>{_SHAPE})\.",
        "形状不对：l 应为 (rows, 1)，acc 应为 (rows, Dv) = (4, 5)，你返回的是 {l} 和 {acc}。",
    ),
    (
        r"m should be the larger of the two maxima, row by row\.",
        "m 应当逐行取两个最大值中较大的那个。",
    ),
    (
        r"row 3 sees no key in either chunk \(m1 = m2 = -inf\) and your l or acc is NaN there: "
        r"exp\(m1 - m\) = exp\(-inf \+ inf\) = NaN\. Where m is -inf, rescale against 0 instead \(the safe max "
        r"of my_tiled_attention\)\.",
        "第 3 行在两段中都看不到任何键（m1 = m2 = -inf），而你的 l 或 acc 在那里是 NaN："
        "exp(m1 - m) = exp(-inf + inf) = NaN。在 m 为 -inf 的地方，改为相对 0 做重缩放"
        "（即 my_tiled_attention 中的安全最大值）。",
    ),
    (
        r"acc / l is not softmax @ values: rescale each chunk's l and acc by exp\(m_chunk - m\) before adding\.",
        "acc / l 不等于 softmax @ values：相加之前，要先把每段的 l 和 acc 乘以 exp(m_chunk - m) 做重缩放。",
    ),
    (
        r"row 3 sees no key: its merged l and acc must stay 0, so that a later chunk can still be merged\.",
        "第 3 行看不到任何键：合并后它的 l 和 acc 必须保持为 0，这样之后还能再合并别的段。",
    ),
    # ---- exercise 2: how many tiles causal skipping saves
    (
        r"L = (?P<L>\d+), T = (?P<T>\d+): (?P<truth>\d+) of (?P<total>\d+) tiles are skipped, "
        r"you said (?P<answer>.+?)\.",
        "L = {L}，T = {T}：{total} 个块中有 {truth} 个被跳过，你的答案是 {answer}。",
    ),
]
