"""Chinese for the missing-glyph warning of ``attn_core.i18n.fonts`` (a label a learner drew shows empty boxes)."""

CATALOG = [
    (
        r"no font has a glyph for (?P<chars>'.*?') \(in the label (?P<label>'.*')\): drawn as an empty box\. "
        r"Install a Chinese font \(e\.g\. Noto Sans CJK SC\), delete matplotlib's font list "
        r"\(fontlist-\*\.json in matplotlib\.get_cachedir\(\)\) and restart the kernel\.",
        "没有任何字体含有 {chars} 的字形（所在标签 {label}）：它会画成空白方框。"
        "请安装一个中文字体（例如 Noto Sans CJK SC），"
        "删除 matplotlib 的字体列表（matplotlib.get_cachedir() 里的 fontlist-*.json），然后重启内核。",
    ),
]
