"""Chinese for the graders of notebook 04 (``attn_core/exercises/grouped_query.py``).

Every ❌ message that module can print, as ``(regex, template)`` pairs (see ``attn_core.i18n``). The
variable parts (head counts, shapes, lists, byte counts, type names) are named groups and stay as the
grader printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact

_SHAPE = r"\([\d, ]*\)"  # a shape as Python prints a tuple: (2, 8, 3, 4)
_LIST = r"\[[\d, ]*\]"  # a list of head indices: [0, 0, 1, 1]
_MAP_WHERE = r"for num_heads=(?P<heads>\d+), num_kv_heads=(?P<kv_heads>\d+)"
_MAP_WHERE_ZH = "当 num_heads={heads}、num_kv_heads={kv_heads} 时，"
_KV_WHERE = rf"for kv of shape (?P<shape>{_SHAPE}) and num_heads=(?P<heads>\d+)"
_KV_WHERE_ZH = "当 kv 的形状为 {shape}、num_heads={heads} 时，"
_CONFIG = r"(?P<config>[\w.-]+)"  # a name of EXAMPLE_CONFIGS: Llama-2-70B, tiny-MHA-no-kv-field
_ROLE = r"(?P<role>[kv]_proj\.weight)"

CATALOG = [
    # the names of the four checks are the learner-facing function names: they stay as they are
    *exact(
        {name: name for name in ("check_kv_head_map", "check_expand_kv", "check_kv_cache_bytes", "check_gqa_to_mha")}
    ),
    # ---- exercise 1: which kv head does query head h read?
    (
        rf"{_MAP_WHERE} return a list of ints \(one per query head\), got a (?P<dtype>torch\.\w+) tensor\.",
        _MAP_WHERE_ZH + "请返回一个整数列表（每个查询头一项），你返回的是 {dtype} 张量。",
    ),
    (
        rf"{_MAP_WHERE} return a list of ints \(one per query head\), got (?P<got>.+?)\.",
        _MAP_WHERE_ZH + "请返回一个整数列表（每个查询头一项），你返回的是 {got}。",
    ),
    (
        rf"{_MAP_WHERE} expected (?P<expected>\d+) entries \(one per query head\), got (?P<count>\d+): "
        rf"(?P<values>{_LIST})\.",
        _MAP_WHERE_ZH + "应有 {expected} 项（每个查询头一项），你给了 {count} 项：{values}。",
    ),
    (
        rf"{_MAP_WHERE} you returned (?P<values>{_LIST}): that is the tiling order of `repeat` \(h % num_kv_heads\)\. "
        r"Query heads that share a kv head are consecutive: h // \(num_heads // num_kv_heads\) "
        rf"gives (?P<expected>{_LIST})\.",
        _MAP_WHERE_ZH + "你返回了 {values}：这是 `repeat` 的平铺顺序（h % num_kv_heads）。"
        "共享同一个 KV 头的查询头是相邻的：h // (num_heads // num_kv_heads) 得到 {expected}。",
    ),
    (
        rf"{_MAP_WHERE} you returned (?P<values>{_LIST}): you divided by num_kv_heads\. Divide by the group size "
        rf"num_heads // num_kv_heads = (?P<group>\d+) to get (?P<expected>{_LIST})\.",
        _MAP_WHERE_ZH + "你返回了 {values}：你除以的是 num_kv_heads。"
        "应该除以组大小 num_heads // num_kv_heads = {group}，得到 {expected}。",
    ),
    (
        rf"{_MAP_WHERE} expected (?P<expected>{_LIST}), got (?P<values>{_LIST})\.",
        _MAP_WHERE_ZH + "应为 {expected}，你返回的是 {values}。",
    ),
    # ---- exercise 2: expand the kv heads
    (
        rf"{_KV_WHERE} return a tensor, got (?P<type>[\w.]+)\.",
        _KV_WHERE_ZH + "请返回一个张量，你返回的是 {type}。",
    ),
    (
        rf"{_KV_WHERE} expected shape (?P<expected>{_SHAPE}), got (?P<got>{_SHAPE}): you repeated each of the "
        r"(?P<kv_heads>\d+) kv heads num_heads = (?P<heads2>\d+) times\. Repeat each by the group size "
        r"num_heads // num_kv_heads = (?P<group>\d+), so that (?P<kv_heads2>\d+) x (?P<group2>\d+) = "
        r"(?P<heads3>\d+) heads\.",
        _KV_WHERE_ZH + "形状应为 {expected}，你得到的是 {got}：你把 {kv_heads} 个 KV 头各重复了 "
        "num_heads = {heads2} 次。应该各重复组大小 num_heads // num_kv_heads = {group} 次，"
        "这样 {kv_heads2} x {group2} = {heads3} 个头。",
    ),
    (
        rf"{_KV_WHERE} expected shape (?P<expected>{_SHAPE}) \(B, num_heads, L, D\), got (?P<got>{_SHAPE})\. "
        r"Repeat along dim 1, the head axis\.",
        _KV_WHERE_ZH + "形状应为 {expected}，即 (B, num_heads, L, D)，你得到的是 {got}。请沿 dim 1（头轴）重复。",
    ),
    (
        rf"{_KV_WHERE} your function changed its input kv in place; return a new tensor\.",
        _KV_WHERE_ZH + "你的函数原地修改了输入 kv；请返回一个新张量。",
    ),
    (
        rf"{_KV_WHERE} your heads come in the tiling order of `repeat` \(kv heads (?P<order>{_LIST})\)\. "
        r"Same shape, no error, wrong numbers: query head h must read kv head h // (?P<group>\d+), "
        rf"i\.e\. kv heads (?P<right>{_LIST})\. Use repeat_interleave\(group, dim=1\)\.",
        _KV_WHERE_ZH + "你的各头是按 `repeat` 的平铺顺序排列的（KV 头 {order}）。"
        "形状相同，没有报错，数值却是错的：查询头 h 必须读取 KV 头 h // {group}，"
        "即 KV 头 {right}。请用 repeat_interleave(group, dim=1)。",
    ),
    (
        rf"{_KV_WHERE} the shape is right but the numbers are not: output head h must be an exact copy "
        r"of kv head h // (?P<group>\d+)\.",
        _KV_WHERE_ZH + "形状对了，数值却不对：输出的头 h 必须是 KV 头 h // {group} 的精确拷贝。",
    ),
    # ---- exercise 3: KV-cache bytes from a config
    (
        rf"on {_CONFIG}: (?P<error>.*) Older configs omit num_key_value_heads: then every query head has its own "
        r"K/V, so use config\.get\('num_key_value_heads', config\['num_attention_heads'\]\)\.",
        "在 {config} 上：{error!t} 较老的配置没有 num_key_value_heads：这时每个查询头都有自己的 K/V，"
        "所以请用 config.get('num_key_value_heads', config['num_attention_heads'])。",
    ),
    (
        rf"on {_CONFIG}: (?P<error>.*)",
        "在 {config} 上：{error!t}",
    ),
    (
        r"return a number of bytes \(an int\), got (?P<type>[\w.]+)\.",
        "请返回字节数（一个整数），你返回的是 {type}。",
    ),
    (
        rf"on {_CONFIG} \((?P<tokens>\d+) tokens, batch (?P<batch>\d+)\): (?P<problem>.*)",
        "在 {config} 上（{tokens} 个词元，批次 {batch}）：{problem!t}",
    ),
    (
        r"you used num_attention_heads: that is the MHA cache\. Only the num_key_value_heads kv heads are cached\.",
        "你用了 num_attention_heads：那是 MHA 的缓存。缓存的只有 num_key_value_heads 个 KV 头。",
    ),
    (
        r"too small by 2: the cache holds keys AND values, two tensors per layer\.",
        "小了一半：缓存存的是键*和*值，每层两个张量。",
    ),
    (
        r"you counted one layer: every one of the num_hidden_layers layers has its own cache\.",
        "你只算了一层：num_hidden_layers 层中的每一层都有自己的缓存。",
    ),
    (
        r"you counted elements, not bytes: multiply by the size of torch_dtype "
        r"\(float16/bfloat16 = 2, float32 = 4\)\.",
        "你算的是元素个数，不是字节数：请乘以 torch_dtype 的大小（float16/bfloat16 = 2，float32 = 4）。",
    ),
    (
        r"you forgot batch_size: every sequence in the batch has its own cache\.",
        "你漏了 batch_size：批次中的每个序列都有自己的缓存。",
    ),
    (
        r"you computed head_dim as hidden_size // num_attention_heads, but this config states its own head_dim "
        r"\(Gemma-7B: 16 heads x 256 = 4096, not 3072\)\. "
        r"Use config\.get\('head_dim', hidden_size // num_attention_heads\)\.",
        "你用 hidden_size // num_attention_heads 算出了 head_dim，但这个配置给出了自己的 head_dim"
        "（Gemma-7B：16 个头 x 256 = 4096，而不是 3072）。"
        "请用 config.get('head_dim', hidden_size // num_attention_heads)。",
    ),
    (
        rf"on {_CONFIG} with seq_len=(?P<seq_len>\d+), batch_size=(?P<batch>\d+) expected (?P<expected>.+?) bytes, "
        r"got (?P<got>.+?)\. Bytes = 2 \(K and V\) x layers x kv heads x head_dim x tokens x batch "
        r"x bytes per element, with head_dim = config\.get\('head_dim', hidden_size // num_attention_heads\)\.",
        "在 {config} 上，seq_len={seq_len}、batch_size={batch} 时应为 {expected} 字节，你得到的是 {got}。"
        "字节数 = 2（K 和 V）x 层数 x KV 头数 x head_dim x 词元数 x 批次 x 每个元素的字节数，"
        "其中 head_dim = config.get('head_dim', hidden_size // num_attention_heads)。",
    ),
    # ---- exercise 4: from GQA back to MHA
    (
        r"for GroupedQueryAttention\((?P<sizes>[\d, ]+)\): (?P<problem>.*)",
        "对 GroupedQueryAttention({sizes})：{problem!t}",
    ),
    (
        r"return an ac\.MultiHeadAttention \(num_kv_heads == num_heads\), got (?P<type>[\w.]+)\.",
        "请返回一个 ac.MultiHeadAttention（num_kv_heads == num_heads），你返回的是 {type}。",
    ),
    (
        r"expected MultiHeadAttention\((?P<expected>[\d, ]+)\), got MultiHeadAttention\((?P<got>[\d, ]+)\)\.",
        "应为 MultiHeadAttention({expected})，你给的是 MultiHeadAttention({got})。",
    ),
    (
        r"the GQA layer has biases: build the MultiHeadAttention with bias=True \(the default\) and copy them\.",
        "GQA 层带有偏置：请用 bias=True（默认值）构建 MultiHeadAttention，并把偏置复制过去。",
    ),
    (
        r"(?P<role>[qo]_proj) must be copied unchanged from the GQA layer \(weight and bias\)\.",
        "{role} 必须从 GQA 层原样复制（权重和偏置）。",
    ),
    (
        rf"{_ROLE}: your head blocks come in the tiling order of `repeat` \(kv heads 0,1,\.\.,0,1,\.\.\)\. "
        r"MHA head h must copy kv head h // (?P<group>\d+): repeat each head's block of rows, consecutively\.",
        "{role}：你的各个头块是按 `repeat` 的平铺顺序排列的（KV 头 0,1,..,0,1,..）。"
        "MHA 的头 h 必须复制 KV 头 h // {group}：把每个头的行块连续地重复。",
    ),
    (
        rf"{_ROLE}: you repeated each single row (?P<group>\d+) times\. A head is a block of (?P<head_dim>\d+) rows: "
        r"view the rows as \(num_kv_heads, head_dim, \.\.\.\), repeat_interleave the head axis, flatten back\.",
        "{role}：你把每一行单独重复了 {group} 次。一个头是由 {head_dim} 行组成的块："
        "把各行看成 (num_kv_heads, head_dim, ...)，在头轴上 repeat_interleave，再展平回去。",
    ),
    (
        rf"{_ROLE}: the numbers are wrong; MHA head h must be an exact copy of kv head h // (?P<group>\d+)\.",
        "{role}：数值不对；MHA 的头 h 必须是 KV 头 h // {group} 的精确拷贝。",
    ),
    (
        r"(?P<role>[kv]_proj)\.weight is right but (?P<role2>[kv]_proj)\.bias is not\. The bias has one entry per "
        r"weight row: expand it exactly like the rows \(view it as \(num_kv_heads, head_dim\)\)\.",
        "{role}.weight 对了，{role2}.bias 却不对。偏置与权重的行一一对应："
        "请像扩展行那样扩展它（把它看成 (num_kv_heads, head_dim)）。",
    ),
    (
        r"the weights look right but the outputs differ\.",
        "权重看起来对了，输出却不一致。",
    ),
    (
        r"could not run your layer \((?P<type>[\w.]+): (?P<error>.*)\)\.",
        "无法运行你的层（{type}：{error!o}）。",
    ),
]
