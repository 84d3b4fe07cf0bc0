"""Chinese for the streaming-mask explorer of notebook 13 (``StreamingMaskExplorer``, defined in the notebook
on ``attn_core.viz.widgets.Explorer``): its "sinks" control and the explanation line under the mask.

Its other controls ("tokens", "window") and the display row are labels of ``zh_viz``. The text inside the
figures (including ``attn_core.viz.paged.plot_block_tables``, which has no explanation line or control of its
own) is in ``zh_viz_figures``.
"""

from __future__ import annotations

from attn_core.i18n import exact
from attn_core.i18n.zh_viz import NUM

CATALOG = [
    *exact({"sinks": "汇聚点数"}),
    # the explanation line: the last query's keys, and the cache's bound
    (
        rf"query (?P<query>{NUM}) sees (?P<keys>{NUM}) keys: the first (?P<sinks>{NUM}) \(sinks\) and its last "
        rf"(?P<window>{NUM}); the cache holds at most (?P<total>{NUM}) tokens, however long the text\.",
        "查询 {query} 能看到 {keys} 个键：最前面的 {sinks} 个（汇聚点）和最近的 {window} 个（含它自己）；"
        "无论文本多长，缓存最多只存 {total} 个词元。",
    ),
]
