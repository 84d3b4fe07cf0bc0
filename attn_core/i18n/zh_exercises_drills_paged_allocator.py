"""Chinese for the interview gym's paged block-allocator drill (``attn_core/exercises/drills_paged_allocator.py``)."""

from __future__ import annotations

from attn_core.i18n import exact

CATALOG = [
    *exact({"check_paged_allocator": "check_paged_allocator"}),
    (
        r"fork copied the parent's blocks: it must share them \(each block's ref_count \+ 1\), copy none\.",
        "fork 复制了父序列的块：应该共享它们（每个块的 ref_count + 1），一个也不复制。",
    ),
    (
        r"fork shares the blocks but did not add a reference to them: each shared block's ref_count must go up by 1, "
        r"or freeing one sequence frees blocks the other still reads\.",
        "fork 共享了块却没有增加引用：每个共享块的 ref_count 都要加 1，否则释放一个序列会释放另一个序列还在读的块。",
    ),
    (
        r"no copy-on-write: an append into a shared, partly filled last block writes into the other sequence's "
        r"tokens\. Take a fresh block, report \(shared, fresh\) in copies, and release the shared one\.",
        "没有写时复制：向共享且未填满的最后一个块追加，会写进另一个序列的 token。"
        "取一个新块，在 copies 中报告 (shared, fresh)，并释放共享块。",
    ),
    (
        r"copy-on-write of a block nobody shares: copy only when the last block's ref_count > 1\.",
        "对没有被共享的块做了写时复制：只有最后一个块的 ref_count > 1 时才复制。",
    ),
    (
        r"copy-on-write of a full block: a full block is never written again, so it stays shared; "
        r"copy only a partly filled last block\.",
        "对已满的块做了写时复制：满块不会再被写入，所以保持共享；只复制未填满的最后一个块。",
    ),
    (
        r"the copies are reversed: report \(src, dst\) = \(shared block, fresh block\)\.",
        "copies 写反了：应报告 (src, dst) = (共享块, 新块)。",
    ),
    (
        r"after copy-on-write the shared block kept this sequence's reference: release it \(ref_count - 1\)\.",
        "写时复制之后，共享块仍保留着这个序列的引用：要释放它（ref_count - 1）。",
    ),
    (
        r"free released the blocks head first: release them tail first \(last block first\), so the tail joins the "
        r"free queue first and the shared prefix blocks are reused last\.",
        "free 从头部开始释放块：应从尾部开始释放（最后一个块先释放），"
        "这样尾部块先进入空闲队列，共享的前缀块最后才被复用。",
    ),
    (
        r"free set ref_count to 0 directly: a block another sequence still shares must only lose one reference\.",
        "free 直接把 ref_count 置为 0：另一个序列仍在共享的块只能减少一个引用。",
    ),
    (
        r"a block whose ref_count reached 0 never went back to the free queue: append it to the back of the queue\.",
        "ref_count 降到 0 的块没有回到空闲队列：要把它加到队列末尾。",
    ),
    (
        r"too few blocks: the blocks a sequence needs are ceil\(tokens / block_size\), not tokens // block_size\.",
        "块太少：一个序列需要 ceil(tokens / block_size) 个块，而不是 tokens // block_size。",
    ),
    (
        r"every append took a fresh block: fill the last block's free slots first, then take "
        r"ceil\(rest / block_size\)\.",
        "每次追加都取了新块：先填满最后一个块的空位，再取 ceil(剩余 / block_size) 个块。",
    ),
    (
        r"blocks came from the back of the free queue: take them from the front \(FIFO\)\.",
        "块是从空闲队列的末尾取的：应从队首取（先进先出）。",
    ),
    (
        r"an append that cannot get all its blocks took some before refusing: count the blocks it needs "
        r"\(and the copy\) first, and change nothing when too few are free\.",
        "拿不到全部所需块的追加在拒绝之前先取走了一些块：先算出需要的块数（包括复制用的块），空闲块不够时什么都不改。",
    ),
    (
        r"an append with too few free blocks must raise \(out of blocks\) and change nothing, not carry on\.",
        "空闲块不够的追加必须抛出异常（块用完了）并且什么都不改，而不是继续执行。",
    ),
    (
        r"the class needs the methods (?P<methods>.+) \(see the exercise\)\.",
        "这个类需要这些方法：{methods}（见练习说明）。",
    ),
    (
        r"after (?P<call>.+) \(step (?P<step>\d+)\) it returned (?P<got>.+); expected (?P<want>.+)\.",
        "执行 {call}（第 {step} 步）后它返回了 {got}；应为 {want}。",
    ),
    (
        r"after (?P<call>.+) \(step (?P<step>\d+)\) the block tables are (?P<got>.+); expected (?P<want>.+)\.",
        "执行 {call}（第 {step} 步）后块表为 {got}；应为 {want}。",
    ),
    (
        r"after (?P<call>.+) \(step (?P<step>\d+)\) the ref_counts are (?P<got>.+); expected (?P<want>.+)\.",
        "执行 {call}（第 {step} 步）后 ref_count 为 {got}；应为 {want}。",
    ),
]
