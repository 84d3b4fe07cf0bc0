"""Chinese for the graders of notebook 12f (``attn_core/exercises/ssd.py``) and the labels of its figures and
explorer (``attn_core/viz/ssd.py``): one new catalog for the notebook's new messages.

Every ❌ message those modules can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). A message built as
``"{where}: {problem}"`` translates its two parts separately (``{…!t}``).
"""

from __future__ import annotations

from attn_core.exercises.ssd import _CANCELLATION
from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"
_WHAT = {"the segment sums": "段和", "y": "y", "the new state": "新的状态"}
_WHAT_RE = "|".join(_WHAT)


def _what(match) -> str:
    return _WHAT[match["what"]]


_MESSAGES = [
    (
        _CANCELLATION,
        "你用累积和相减（cumsum_i − cumsum_j）。在精确算术里没错，但在 float32 里，一次强衰减（a = −100）让累"
        "积和约为 −100，它的舍入误差（7.6e-6）淹没了之后 1e-3 大小的段。请直接对每一段求和：把 j < t ≤ i 以外"
        "的 a_t 屏蔽掉，再做 cumsum（或 sum）。",
    ),
    (
        "your matrix has NaN above the diagonal: −inf − (−inf) is NaN. Fill −inf after summing "
        "(masked_fill), not before a subtraction.",
        "你的矩阵在对角线上方有 NaN：−inf − (−inf) 是 NaN。请在求和之后再填 −inf（masked_fill），不要在相减之前填。",
    ),
    (
        "above the diagonal (j > i, the future) you put 0: exp(0) = 1, so the future would leak in with full "
        "weight. Fill −inf there (exp(−inf) = 0).",
        "你在对角线上方（j > i，未来）填了 0：exp(0) = 1，未来会以满权重泄漏进来。请在那里填 −inf（exp(−inf) = 0）。",
    ),
    (
        "your matrix is transposed: row i is the reading token (the query), column j the writing one, and "
        "[i, j] = a_{j+1} + … + a_i is filled for j ≤ i (lower triangle).",
        "你的矩阵转置了：第 i 行是读取的词元（查询），第 j 列是写入的词元，[i, j] = a_{j+1} + … + a_i 填在 j "
        "≤ i（下三角）。",
    ),
    (
        "off by one token: the segment starts at j + 1. Token j's write enters the state after its own "
        "decay, so a_j is not in [i, j] (the diagonal is 0: a token reads its own write undecayed).",
        "差了一个词元：段从 j + 1 开始。词元 j 的写入在它自己的衰减之后才进入状态，所以 a_j 不在 [i, j] 里（"
        "对角线为 0：词元读取自己的写入时不衰减）。",
    ),
    (
        "off by one token: the segment ends at i and includes a_i (token i decays the state before it reads "
        "it); you summed a_j … a_{i−1}.",
        "差了一个词元：段在 i 结束并包含 a_i（词元 i 先衰减状态再读取）；你求的是 a_j … a_{i−1} 的和。",
    ),
    (
        "the diagonal must be 0, not −inf: a token reads its own write, undecayed (exp(0) = 1).",
        "对角线应为 0，而不是 −inf：词元读取自己的写入，不衰减（exp(0) = 1）。",
    ),
    (
        "the sign is flipped: the entries are sums of a = dt·A ≤ 0 (log decays), so they are ≤ 0.",
        "符号反了：各项是 a = dt·A ≤ 0（对数衰减）之和，所以都 ≤ 0。",
    ),
    (
        "you returned exp of the sums (the decay mask itself): this function stays in log space; the mask is "
        "exp(segment_sums(dt·A)).",
        "你返回的是段和的 exp（即衰减掩码本身）：这个函数停留在对数空间；掩码是 exp(segment_sums(dt·A))。",
    ),
    (
        "each entry must start at token j: you put the decay since the sequence start (cumsum up to i) in "
        "every column.",
        "每一项都应从词元 j 开始：你在每一列都放了从序列开头起的衰减（到 i 为止的 cumsum）。",
    ),
    (
        "your function changed its inputs in place: return a new state instead.",
        "你的函数原地修改了输入：请返回一个新的状态。",
    ),
    (
        "you returned (new_state, y): the order is (y, new_state).",
        "你返回的是 (new_state, y)：顺序应为 (y, new_state)。",
    ),
    (
        "the write is missing dt: Mamba-2 writes dt·x·Bᵀ (dt is the step size: a large dt forgets more and "
        "writes more).",
        "写入缺少 dt：Mamba-2 写入的是 dt·x·Bᵀ（dt 是步长：dt 大，忘得多，写得也多）。",
    ),
    (
        "the decay is missing dt: exp(dt·A), not exp(A). The step size dt sets how much this token forgets.",
        "衰减缺少 dt：应为 exp(dt·A)，而不是 exp(A)。步长 dt 决定这个词元遗忘多少。",
    ),
    (
        "the decay must be exp(dt·A): you multiplied the state by dt·A itself (a log decay, ≤ 0).",
        "衰减应为 exp(dt·A)：你直接把状态乘以 dt·A（一个对数衰减，≤ 0）。",
    ),
    (
        "the decay is exp(dt·A) with A already negative (A = −exp(A_log)): exp(−dt·A) > 1 makes the state grow.",
        "衰减是 exp(dt·A)，而 A 本身已是负数（A = −exp(A_log)）：exp(−dt·A) > 1 会让状态越来越大。",
    ),
    (
        "y was read from the state before this token's write: update h first, then y = h C (a token sees "
        "itself, as causal attention's diagonal).",
        "y 是从这个词元写入之前的状态读出的：先更新 h，再算 y = h C（词元能看到自己，就像因果注意力的对角线）。",
    ),
    (
        "B and C are swapped: B is the key (what the token writes under), C the query (what it reads with).",
        "B 和 C 弄反了：B 是键（词元写入时用的），C 是查询（读取时用的）。",
    ),
    (
        "you decayed after the write: exp(dt·A) shrinks the new token's own write too. Decay the old state, "
        "then add dt·x·Bᵀ.",
        "你在写入之后才衰减：exp(dt·A) 把新词元自己的写入也缩小了。请先衰减旧状态，再加上 dt·x·Bᵀ。",
    ),
    (
        "dt multiplies the write, not the read: y = h C, where h already holds dt·x·Bᵀ.",
        "dt 乘在写入上，而不是读取上：y = h C，其中 h 已经包含 dt·x·Bᵀ。",
    ),
    (
        "dt is already positive (softplus and bias were applied before this step): applying softplus again "
        "changes every step size.",
        "dt 已经是正数（softplus 和偏置在这一步之前就用过了）：再用一次 softplus 会改变每一个步长。",
    ),
    (
        "y ignores the carried state: y_t = h_t C_t reads everything written so far (decayed), not only this "
        "token's write.",
        "y 忽略了携带的状态：y_t = h_t C_t 读取迄今写入的一切（已衰减），而不只是这个词元的写入。",
    ),
    (
        "the new state is right but y is not: y = h C, read from the updated state.",
        "新的状态正确，但 y 不对：y = h C，从更新后的状态读取。",
    ),
    (
        "expected h ← exp(dt·A)·h + dt·x·Bᵀ, then y = h C.",
        "应为 h ← exp(dt·A)·h + dt·x·Bᵀ，然后 y = h C。",
    ),
    (
        "y misses the entering state: each token also reads the state carried in from earlier chunks, C_r · "
        "h_entry, decayed from the chunk's start through token r.",
        "y 缺少进入块时的状态：每个词元还要读取从前面各块带进来的状态 C_r · h_entry，它从块的开头衰减到词元 r。",
    ),
    (
        "the entering state is read without its decay: token r sees it through exp(a_0 + … + a_r), the decay "
        "from the chunk's entry to r.",
        "读取进入块时的状态时没有衰减：词元 r 透过 exp(a_0 + … + a_r) 看到它，即从进入块到 r 的衰减。",
    ),
    (
        "off by one token in the entering state's decay: exp(a_0 + … + a_r) includes token r's own step (the "
        "state decays before token r reads it).",
        "进入状态的衰减差了一个词元：exp(a_0 + … + a_r) 包含词元 r 自己的一步（状态先衰减，词元 r 再读取）。",
    ),
    (
        "the new state adds each token's write without its decay to the chunk's end: token j's write is "
        "multiplied by exp(a_{j+1} + … + a_{c−1}).",
        "新的状态加入每个词元的写入时没有乘上到块末尾的衰减：词元 j 的写入要乘以 exp(a_{j+1} + … + a_{c−1})。",
    ),
    (
        "the carried state is not decayed across the chunk: multiply it by exp(a_0 + … + a_{c−1}) before "
        "adding the chunk's writes.",
        "携带的状态在整个块上没有衰减：加上本块的写入之前，先把它乘以 exp(a_0 + … + a_{c−1})。",
    ),
    (
        "the values are missing dt: the attention form's value is dt_j · x_j (the step size scales the write).",
        "值缺少 dt：注意力形式里的值是 dt_j · x_j（步长缩放写入）。",
    ),
    (
        "the quadratic part is missing the decay mask: that is plain causal linear attention. Multiply C Bᵀ "
        "by L = exp(segment sums of dt·A).",
        "二次部分缺少衰减掩码：那是普通的因果线性注意力。请把 C Bᵀ 乘以 L = exp(dt·A 的段和)。",
    ),
    (
        "the scores are B Cᵀ: C is the query and B the key, so score [i, j] = C_i · B_j = (C Bᵀ)[i, j].",
        "分数成了 B Cᵀ：C 是查询，B 是键，所以分数 [i, j] = C_i · B_j = (C Bᵀ)[i, j]。",
    ),
    (
        "the new state is written with C: the state stores under the key B, h += dt·x·Bᵀ.",
        "新的状态是用 C 写入的：状态按键 B 存储，h += dt·x·Bᵀ。",
    ),
    (
        "you returned the entering state unchanged: return the state after the chunk, the input to the next chunk.",
        "你原样返回了进入块时的状态：请返回这个块之后的状态，它是下一个块的输入。",
    ),
    (
        "off by one token in the decay mask: [i, j] = exp(a_{j+1} + … + a_i), without token j's own step.",
        "衰减掩码差了一个词元：[i, j] = exp(a_{j+1} + … + a_i)，不含词元 j 自己的一步。",
    ),
    (
        "y and the new state differ from the recurrence: y = (L ∘ C Bᵀ)(dt·x) + decayed C·h_entry.",
        "y 和新的状态都与递推结果不同：y = (L ∘ C Bᵀ)(dt·x) + 衰减后的 C·h_entry。",
    ),
]

CATALOG = [
    *exact({name: name for name in ("check_segment_sums", "check_ssd_step", "check_ssd_chunk")}),
    *exact(dict(_MESSAGES)),
    # ---- where a case is named, then the problem
    (r"with a small float64 case: (?P<rest>.+)", "在一个小的 float64 例子上：{rest!t}"),
    (
        r"with float32, one strong decay then slow ones: (?P<rest>.+)",
        "在 float32、先一次强衰减再一串慢衰减的例子上：{rest!t}",
    ),
    (
        r"entry \[i, j\] must be a_\{j\+1\} \+ … \+ a_i for j ≤ i \(0 on the diagonal\), −inf above\.",
        "第 [i, j] 项应为 a_{{j+1}} + … + a_i（j ≤ i，对角线为 0），对角线上方为 −inf。",
    ),
    # ---- shapes and types
    (
        rf"return (?P<what>{_WHAT_RE}) as a floating-point tensor of shape (?P<shape>{_SHAPE}), got (?P<type>[\w.]+)\.",
        lambda m, tr: f"请把{_what(m)}作为形状为 {m['shape']} 的浮点张量返回，你返回的是 {m['type']}。",
    ),
    (
        rf"(?P<what>{_WHAT_RE}) must have shape (?P<shape>{_SHAPE}), got (?P<got>{_SHAPE})\.",
        lambda m, tr: f"{_what(m)}的形状应为 {m['shape']}，你的是 {m['got']}。",
    ),
    (r"return a pair \(y, new_state\), got (?P<type>\w+)\.", "请返回一对 (y, new_state)，你返回的是 {type}。"),
    (
        rf"the state is \(b, H, P, N\) = (?P<shape>{_SHAPE}): the value dimension P indexes its rows, the state "
        r"dimension N its columns; you returned it transposed\.",
        "状态是 (b, H, P, N) = {shape}：值维度 P 对应它的行，状态维度 N 对应它的列；你返回的是它的转置。",
    ),
    (
        r"(?P<which>y is right but the new state is not|the new state is right but y is not): compare with the "
        r"recurrence one token at a time\.",
        lambda m, tr: (
            ("y 正确但新的状态不对" if m["which"].startswith("y") else "新的状态正确但 y 不对")
            + "：请和逐词元的递推比较。"
        ),
    ),
]

# ---- notebook 12f's figures and explorer (attn_core/viz/ssd.py) and the titles its cells pass to ac.plot_attention
_VIZ = {
    "decay mask L (0–1)": "衰减掩码 L（0–1）",
    "M = L ∘ C Bᵀ · dt (relative scale)": "M = L ∘ C Bᵀ · dt（相对刻度）",
    "Recall: a fixed SSD state vs attention": "回忆：固定大小的 SSD 状态 vs 注意力",
    "softmax attention": "softmax 注意力",
    "linear attention (elu+1, normalised)": "线性注意力（elu+1，归一化）",
    "SSD decay mask L": "SSD 衰减掩码 L",
    "step dt": "步长 dt",
    "rate A": "速率 A",
    "SSD state, no decay (A = 0)": "SSD 状态，无衰减（A = 0）",
    "SSD state, A = -0.02": "SSD 状态，A = -0.02",
}

CATALOG += [
    *exact(_VIZ),
    (r"row (?P<row>\d+) of L: what query (?P<query>\d+) keeps", "L 的第 {row} 行：查询 {query} 保留了什么"),
    (
        r"Each token keeps exp\(dt·A\) = (?P<keep>[\d.]+) of the state: weights halve every (?P<half>[\d.]+) tokens\. "
        r"Query (?P<query>\d+) reads token 0 with decay (?P<oldest>[\d.e+-]+)\. "
        r"max \|M x − recurrence\| = (?P<diff>[\d.e+-]+)\.",
        "每个词元保留状态的 exp(dt·A) = {keep}：权重每 {half} 个词元减半。查询 {query} 以衰减 {oldest} 读取词元 0。"
        "max |M x − 递推| = {diff}。",
    ),
    (
        r"position must be an int in \[0, (?P<last>\d+)\], got (?P<got>.+)\.",
        "position 必须是 [0, {last}] 中的整数，得到的是 {got}。",
    ),
    (r"length must be an int >= 1, got (?P<got>.+)\.", "length 必须是 >= 1 的整数，得到的是 {got}。"),
    (
        r"dt must be > 0 \(the step size after softplus\), got (?P<got>.+)\.",
        "dt 必须 > 0（softplus 之后的步长），得到的是 {got}。",
    ),
    (r"A must be < 0 \(A = −exp\(A_log\)\), got (?P<got>.+)\.", "A 必须 < 0（A = −exp(A_log)），得到的是 {got}。"),
]
