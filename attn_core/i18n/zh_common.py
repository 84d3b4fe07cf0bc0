"""Chinese for the messages shared by every grader (``attn_core/exercises/__init__.py``).

Searched last (see ``attn_core.i18n``): these are the most general patterns, e.g. any
"your function raised X: ...". The error text that Python or torch wrote stays as it is.
"""

from __future__ import annotations

import re

from attn_core.exercises import NOT_DONE

CATALOG = [
    # NOT_DONE: a stub, or a function that raises NotImplementedError / returns None or `...`
    (
        re.escape(NOT_DONE),
        "还没有作答：把 `...` / `raise NotImplementedError` 换成你的答案，然后重新运行这个单元格。",
    ),
    # call_learner: the answer is not a function
    (
        r"pass the function itself \(its name, no parentheses\), got (?P<type>[\w.]+)\.",
        "请传入函数本身（只写函数名，不加括号），你传入的是 {type}。",
    ),
    # call_learner: k.T on a batch
    (
        r"your function raised RuntimeError: (?P<error>.*) Hint: k\.T reverses ALL axes of a batched tensor "
        r"\(\(B, L, d\) -> \(d, L, B\)\); use k\.transpose\(-2, -1\) \(or k\.mT\) to swap only the last two\.",
        "你的函数抛出了 RuntimeError：{error!o} 提示：对批量张量，k.T 会反转所有维度（(B, L, d) -> (d, L, B)）；"
        "请用 k.transpose(-2, -1)（或 k.mT）只交换最后两个维度。",
    ),
    # call_learner: a renamed parameter
    (
        r"keep the parameter names of the exercise: name the arguments? (?P<names>.+?), the check passes "
        r"(?:them|it) by name \(your function raised TypeError: (?P<error>.*)\)\.",
        "请保留练习给出的参数名：参数要叫 {names}，检查函数按参数名传参（你的函数抛出了 TypeError：{error}）。",
    ),
    # call_learner: any other exception of the learner's function
    (
        r"your function raised (?P<type>[\w.]+): (?P<error>.*)",
        "你的函数抛出了 {type}：{error!o}",
    ),
    # never_raises: the answer broke the grader itself
    (
        r"could not grade this answer \((?P<type>[\w.]+): (?P<error>.*)\)\. "
        r"Return what the exercise asks for \(tensors of the stated shapes, or a number\)\.",
        "无法评判这个答案（{type}：{error!o}）。请按练习的要求返回（指定形状的张量，或一个数）。",
    ),
]
