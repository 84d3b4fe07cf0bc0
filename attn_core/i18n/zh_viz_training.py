"""Chinese for the training explorer of notebook 12 (``attn_core/viz/training.py``): the explanation line
of ``explain_training`` and the messages of a step or head that does not exist.

Its controls ("training step", "head") and the display row are labels of ``zh_viz``; the text in the
figure is in ``zh_viz_figures``. Head names (``L1 H0``) and numbers stay as the explorer printed them.
"""

from __future__ import annotations

from attn_core.i18n import exact
from attn_core.i18n.zh_viz import NUM

_HEAD = r"L\d+ H\d+"  # a head as training.head_names writes it


def _heads_found(match, tr) -> str:
    """``L0 H1 (0.85), L1 H0 (0.70)``: the heads above the threshold, listed the Chinese way."""
    return match["heads"].replace(", ", "、")


CATALOG = [
    # explain_training: the step and its loss, then one head or every head
    (
        rf"step (?P<step>{NUM}) \(checkpoint at step (?P<checkpoint>{NUM})\): loss (?P<loss>{NUM})\. (?P<rest>.+)",
        "第 {step} 步（取第 {checkpoint} 步的检查点）：损失 {loss}。{rest!t}",
    ),
    (
        rf"(?P<head>{_HEAD}): previous-token score (?P<prev>{NUM}), induction score (?P<ind>{NUM}) "
        rf"\(threshold (?P<threshold>{NUM})\): (?P<verdict>.+)\.",
        "{head}：前一词元分数 {prev}，归纳分数 {ind}（阈值 {threshold}）：{verdict!t}。",
    ),
    *exact(
        {
            "a previous-token head": "是前一词元头",
            "an induction head": "是归纳头",
            "a previous-token head and an induction head": "既是前一词元头，也是归纳头",
            "neither pattern yet": "两种模式都还没有形成",
        }
    ),
    (
        rf"Previous-token heads \(score > (?P<t1>{NUM})\): (?P<prev>.+?)\. "
        rf"Induction heads \(score > (?P<t2>{NUM})\): (?P<ind>.+)\.",
        "前一词元头（分数 > {t1}）：{prev!t}。归纳头（分数 > {t2}）：{ind!t}。",
    ),
    (rf"(?P<heads>{_HEAD} \({NUM}\)(?:, {_HEAD} \({NUM}\))*)", _heads_found),
    (
        rf"none yet \(best (?P<head>{_HEAD}) at (?P<score>{NUM})\)",
        "还没有（最好的是 {head}，分数 {score}）",
    ),
    # ValueErrors the explorer would show as "Not possible: ..." (a step or head passed in by hand)
    (
        rf"step (?P<step>.+?) is outside training: checkpoints run from (?P<first>{NUM}) to (?P<last>{NUM})\.",
        "第 {step} 步不在训练范围内：检查点从第 {first} 步到第 {last} 步。",
    ),
    (
        r"head (?P<head>.+?) does not exist; choose 'all' or one of (?P<names>\[.*\])\.",
        "头 {head} 不存在；请选择 'all' 或 {names} 中的一个。",
    ),
]
