"""Chinese for the grader of notebook 07 (``check_append_token``, defined in the notebook's own exercise cell).

Notebook 07 writes its checker in the open, next to the exercise, and prints its verdicts through
``attn_core.exercises.feedback``: these are the ❌ messages it can print, as ``(regex, template)`` pairs
(see ``attn_core.i18n``). The variable parts (token counts, capacities, shapes) stay as the checker printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 3, 4, 4)

CATALOG = [
    # the name of the check is the learner's function name: it stays as it is
    *exact({"append_token": "append_token"}),
    (
        r"at token (?P<step>\d+): (?P<problem>.*)",
        "在第 {step} 个词元处：{problem!t}",
    ),
    (
        r"return a pair \(buffer, length\), got (?P<type>[\w.]+)\.",
        "请返回一对 (buffer, length)，你返回的是 {type}。",
    ),
    (
        r"at token (?P<step>\d+) the buffer had room \((?P<length>\d+) of (?P<capacity>\d+) slots filled\), but you "
        r"returned a new buffer, as torch\.cat does on every append: write the token into the spare slot in place, "
        r"and allocate only when the buffer is full\.",
        "在第 {step} 个词元处，缓冲区还有空位（{capacity} 个槽位中填了 {length} 个），你却返回了一个新缓冲区，"
        "就像 torch.cat 每次追加都会做的那样：应把词元原地写进空余的槽位，只在缓冲区满了时才分配新的。",
    ),
    (
        r"when the buffer was full at (?P<capacity>\d+) tokens you grew it to (?P<grown>\d+): growing by a fixed "
        r"number of slots copies all cached tokens again every few appends, O\(T\) per append like a torch\.cat "
        r"cache\. Grow by a factor \(double it\): all the copies together then stay below 2 per appended token\.",
        "缓冲区在 {capacity} 个词元时满了，你把它扩到了 {grown}：按固定的槽位数增长，每追加几次就要把所有缓存的词元"
        "再复制一遍，每次追加 O(T)，和 torch.cat 缓存一样。应按倍数增长（翻倍）：这样全部复制加起来，"
        "平均每个追加的词元不到 2 次。",
    ),
    (
        r"after (?P<appends>\d+) appends the length should be (?P<expected>\d+), got (?P<length>.+?)\.",
        "追加 {appends} 次之后，长度应为 {expected}，你返回的是 {length}。",
    ),
    (
        rf"buffer must be \(B, H, capacity >= length, d\) = \(2, 3, >= (?P<length>\d+), 4\), "
        rf"got (?P<shape>{_SHAPE})\.",
        "buffer 的形状必须是 (B, H, capacity >= length, d) = (2, 3, >= {length}, 4)，你返回的是 {shape}。",
    ),
    (
        r"the first `length` slots do not hold the appended tokens in order\.",
        "前 `length` 个槽位里装的不是按顺序追加的那些词元。",
    ),
    (
        r"capacity (?P<capacity>\d+) for (?P<length>\d+) tokens: more than twice what is used; grow by doubling\.",
        "{length} 个词元用了 {capacity} 的容量：超过了实际用量的两倍；请按翻倍的方式增长。",
    ),
]
