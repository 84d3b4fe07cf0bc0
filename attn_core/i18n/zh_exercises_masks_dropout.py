"""Chinese for the graders of notebook 05 (``attn_core/exercises/masks_dropout.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A mask
verdict is ``"{where}: {problem}"``: the case (``seq_len=6, window=3``, ``lengths=[3, 5], seq_len=5`` or
``attn_mask (4, 4), key_padding_mask (2, 4)``) becomes the start of the Chinese sentence ("当 seq_len=6、
window=3 时，…"), with its numbers as printed; the fixed diagnoses of each exercise's near misses are
translated one by one.
"""

from __future__ import annotations

import re

from attn_core.exercises.masks_dropout import FLIPPED
from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 1, 5, 5)
_WHERE = (
    r"(?:seq_len=(?P<seq_len>\d+), window=(?P<window>\d+)"  # exercise 1
    r"|lengths=(?P<lengths>\[[\d, ]*\]), seq_len=(?P<batch_len>\d+)"  # exercise 2
    rf"|attn_mask (?P<attn_mask>{_SHAPE}), key_padding_mask (?P<key_padding_mask>{_SHAPE}))"  # exercise 3
)


def _case(match: re.Match) -> str:
    """The case a mask verdict is about, as the start of a Chinese sentence."""
    if match["window"] is not None:
        return f"当 seq_len={match['seq_len']}、window={match['window']} 时，"
    if match["lengths"] is not None:
        return f"当 lengths={match['lengths']}、seq_len={match['batch_len']} 时，"
    return f"对 attn_mask {match['attn_mask']}、key_padding_mask {match['key_padding_mask']}，"


def _at_case(template: str, translated: tuple[str, ...] = ()):
    """A template for ``"{where}: ..."``: the case in Chinese, then ``template`` filled from the named groups
    (the groups named in ``translated`` go through the catalogs first, like ``{name!t}``)."""

    def fill(match: re.Match, tr) -> str:
        values = dict(match.groupdict())
        for name in translated:
            values[name] = tr(values[name])
        return _case(match) + template.format(**values)

    return fill


CATALOG = [
    # the names of the four checks (the start of every verdict line)
    *exact(
        {
            "sliding-window mask": "滑动窗口掩码",
            "causal + padding mask": "因果 + 填充掩码",
            "nn.MultiheadAttention masks -> attn_core": "nn.MultiheadAttention 掩码 -> attn_core",
            "expected row sums under dropout": "dropout 下行和的期望",
        }
    ),
    # ---- exercises 1-3: what is wrong with a mask
    (
        rf"{_WHERE}: expected a torch\.Tensor, got (?P<type>[\w.]+)\.",
        _at_case("应为 torch.Tensor，你返回的是 {type}。"),
    ),
    (
        rf"{_WHERE}: your mask has dtype (?P<dtype>[\w.]+); attn_core masks are boolean \(True = may attend\)\. "
        r"Comparisons such as `key <= query` already give booleans; convert a 0/1 mask with ac\.mask_from_float\(m\)\.",
        _at_case(
            "你的掩码的 dtype 是 {dtype}；attn_core 的掩码是布尔型（True = 允许关注）。"
            "`key <= query` 这样的比较本身就得到布尔值；0/1 掩码请用 ac.mask_from_float(m) 转换。"
        ),
    ),
    (
        rf"{_WHERE}: wrong shape (?P<shape>{_SHAPE}), expected (?P<expected>{_SHAPE})\. (?P<diagnosis>.+)",
        _at_case("形状 {shape} 不对，应为 {expected}。{diagnosis}", ("diagnosis",)),
    ),
    (
        rf"{_WHERE}: wrong shape (?P<shape>{_SHAPE}), expected (?P<expected>{_SHAPE})\.",
        _at_case("形状 {shape} 不对，应为 {expected}。"),
    ),
    (
        rf"{_WHERE}: wrong values: (?P<count>\d+) of (?P<total>\d+) entries differ, first at index "
        rf"(?P<first>{_SHAPE}): yours (?P<yours>True|False), expected (?P<expected>True|False)\.",
        _at_case("数值不对：{total} 项中有 {count} 项不同，第一处在下标 {first}：你的是 {yours}，应为 {expected}。"),
    ),
    (
        rf"{_WHERE}: your mask lets a query see keys after the query \(the future\), first at index "
        r"(?P<first>\([\d, ]*\)): query (?P<query>\d+) sees key (?P<key>\d+)\. "
        r"A sliding window is causal: key <= query\.",
        _at_case(
            "你的掩码让查询看到了它之后的键（未来），第一处在下标 {first}：查询 {query} 看到了键 {key}。"
            "滑动窗口是因果的：key <= query。"
        ),
    ),
    (
        rf"{_WHERE}: (?P<problem>.+)",
        _at_case("{problem}", ("problem",)),
    ),
    *exact(
        {
            FLIPPED: "约定反了：你的掩码在注意力被屏蔽的地方为 True。attn_core 和 F.scaled_dot_product_attention "
            "用的是 True = 允许关注；请用 ~mask（或 ac.mask_from_blocked）取反。",
            # exercise 1: a sliding-window mask
            "the window is one too wide: count the query itself, so keep keys with query - key < window.": (
                "窗口宽了一个：查询自己也要算进去，所以保留满足 query - key < window 的键。"
            ),
            "the window is one too narrow: the query itself counts as one of the `window` keys.": (
                "窗口窄了一个：查询自己也算作 `window` 个键中的一个。"
            ),
            "you forgot the causal half: a query must not see keys after it (add key <= query).": (
                "你漏了因果的那一半：查询不能看到它之后的键（加上 key <= query）。"
            ),
            "you forgot the window: this is the plain causal mask (add query - key < window).": (
                "你漏了窗口：这只是普通的因果掩码（加上 query - key < window）。"
            ),
            "your window looks at keys after the query (key > query), the future: transpose it. Query i keeps "
            "keys i - window + 1 .. i, i.e. key <= query and query - key < window.": (
                "你的窗口看的是查询之后的键（key > query），也就是未来：请把它转置。查询 i 保留键 "
                "i - window + 1 .. i，即 key <= query 且 query - key < window。"
            ),
            "this lets every query see the keys after the query (the future) and blocks the past: it is the "
            "causal mask transposed. Keep key <= query, and query - key < window.": (
                "这让每个查询都能看到它之后的键（未来），却屏蔽了过去：这是转置了的因果掩码。"
                "请保留 key <= query 且 query - key < window 的键。"
            ),
            # exercise 2: causal + padding for a batch
            "a (B, L, L) mask lines up B with the HEAD axis of the (B, H, L, L) weights (broadcasting aligns "
            "from the right). Keep a singleton head axis: (B, 1, L, L), e.g. mask.unsqueeze(1).": (
                "(B, L, L) 掩码会把 B 对到 (B, H, L, L) 权重的头轴上（广播从右边对齐）。"
                "请保留一个大小为 1 的头轴：(B, 1, L, L)，例如 mask.unsqueeze(1)。"
            ),
            "this is only the padding part (B, 1, 1, L): AND it with the causal (L, L) mask.": (
                "这只是填充部分 (B, 1, 1, L)：还要与因果掩码 (L, L) 做 AND。"
            ),
            "this is only the causal part: AND it with the padding mask (B, 1, 1, L).": (
                "这只是因果部分：还要与填充掩码 (B, 1, 1, L) 做 AND。"
            ),
            "you forgot the padding: padded keys (j >= length) must be blocked too.": (
                "你漏了填充：填充的键（j >= length）也必须屏蔽。"
            ),
            "you forgot the causal part: key j must also satisfy j <= i.": "你漏了因果部分：键 j 还必须满足 j <= i。",
            "you combined with |: a key must pass BOTH masks, so combine with &.": (
                "你用的是 |：一个键必须同时通过两个掩码，所以要用 & 组合。"
            ),
            "you also blocked the padded QUERIES' rows. This exercise asks for key padding only, "
            "(B, 1, 1, L) & causal: padded query rows stay as they are and the loss ignores them.": (
                "你把填充查询所在的行也屏蔽了。这道练习只要求屏蔽填充的键，即 (B, 1, 1, L) & 因果掩码："
                "填充查询的行保持原样，损失函数会忽略它们。"
            ),
            # exercise 3: nn.MultiheadAttention's masks
            "a (B, Lq, Lk) mask lines up B with the HEAD axis of the (B, H, Lq, Lk) weights. "
            "Keep a singleton head axis: (B, 1, Lq, Lk).": (
                "(B, Lq, Lk) 掩码会把 B 对到 (B, H, Lq, Lk) 权重的头轴上。请保留一个大小为 1 的头轴：(B, 1, Lq, Lk)。"
            ),
            "you kept nn.MultiheadAttention's convention (True = blocked) for BOTH masks: invert each with ~.": (
                "两个掩码你都沿用了 nn.MultiheadAttention 的约定（True = 屏蔽）：请用 ~ 把它们各自取反。"
            ),
            "you inverted attn_mask but not key_padding_mask: it is True = blocked too (True marks padding).": (
                "你对 attn_mask 取了反，却没有对 key_padding_mask 取反：它也是 True = 屏蔽（True 标记填充）。"
            ),
            "you inverted key_padding_mask but not attn_mask: it is True = blocked too.": (
                "你对 key_padding_mask 取了反，却没有对 attn_mask 取反：它也是 True = 屏蔽。"
            ),
            "you combined with |: a key must be allowed by BOTH masks, so combine with &.": (
                "你用的是 |：一个键必须同时被两个掩码允许，所以要用 & 组合。"
            ),
            "you forgot key_padding_mask: padded keys must be blocked too.": (
                "你漏了 key_padding_mask：填充的键也必须屏蔽。"
            ),
            "you forgot attn_mask: only the padding is applied.": "你漏了 attn_mask：只应用了填充掩码。",
            "you put key_padding_mask on the QUERY axis: it marks padded KEYS, so it indexes the last axis, "
            "(~key_padding_mask)[:, None, None, :] of shape (B, 1, 1, Lk).": (
                "你把 key_padding_mask 放在了查询轴上：它标记的是填充的键，所以对应最后一个轴，"
                "即形状为 (B, 1, 1, Lk) 的 (~key_padding_mask)[:, None, None, :]。"
            ),
            # exercise 4: expected row sums under dropout
            "that is (1 - p) per real row: dropout without the 1/(1 - p) rescale. attn_core (like "
            "nn.Dropout) uses inverted dropout, so the expected weights, and their sum, are unchanged.": (
                "这是每个真实行 (1 - p)：做了 dropout，却没有乘以 1/(1 - p)。attn_core（和 nn.Dropout 一样）"
                "用的是 inverted dropout，所以权重的期望及其和都不变。"
            ),
            "that is 1/(1 - p) per real row: the rescale only compensates the zeros. Each weight survives "
            "with probability 1 - p and is then multiplied by 1/(1 - p): the expectation is the weight itself.": (
                "这是每个真实行 1/(1 - p)：缩放只是补偿了被置零的部分。每个权重以概率 1 - p 保留下来，"
                "再乘以 1/(1 - p)：期望就是权重本身。"
            ),
            "padded queries see no key at all (the mask row is all False). attn_core gives them zero weights "
            "(not a uniform row), and dropout keeps zeros at zero: their expected sum is 0.": (
                "填充查询根本看不到任何键（掩码的这一行全为 False）。attn_core 给它们全零的权重"
                "（而不是均匀的一行），dropout 之后零仍是零：它们的期望和为 0。"
            ),
            "two mistakes: padded query rows are all zero (no visible key), and inverted dropout keeps the "
            "expected sum of a real row at 1.": (
                "两处错误：填充查询的行全为零（没有可见的键），而 inverted dropout 让真实行的期望和保持为 1。"
            ),
        }
    ),
    # ---- exercise 4: the other messages
    (
        r"expected a \(B, L\) tensor of real numbers, got dtype (?P<dtype>[\w.]+)\.",
        "应为由实数组成的 (B, L) 张量，你给的 dtype 是 {dtype}。",
    ),
    (
        r"expected a \(B, L\) tensor of numbers, got (?P<type>[\w.]+)\.",
        "应为由数组成的 (B, L) 张量，你给的是 {type}。",
    ),
    (
        rf"wrong shape (?P<shape>{_SHAPE}): one expected sum per \(sequence, query\) = (?P<expected>{_SHAPE})\.",
        "形状 {shape} 不对：每个 (序列, 查询) 一个期望和，应为 {expected}。",
    ),
    (
        r"wrong values: entry \((?P<row>\d+), (?P<col>\d+)\) is (?P<yours>\S+), expected (?P<right>\S+)\.",
        "数值不对：第 ({row}, {col}) 项为 {yours}，应为 {right}。",
    ),
]
