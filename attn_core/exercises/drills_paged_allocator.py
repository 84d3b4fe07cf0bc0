"""``check_paged_allocator`` (the interview gym's drills, issue #38): a paged-KV block allocator with prefix sharing.

The learner writes a class ``PagedAllocator(num_blocks, block_size)`` with
``append(seq_id, num_tokens) -> copies`` (a new ``seq_id`` starts empty; ``copies`` is the list of ``(src, dst)``
blocks to copy before writing), ``fork(parent_id, child_id)``, ``free(seq_id)``, ``block_table(seq_id) -> list`` and
``ref_count(block) -> int``. The rules (vLLM's, and :class:`attn_core.PagedKVCache` on
:class:`~attn_core.caches.block_allocator.BlockAllocator`):

- an append fills the last block's free slots first and takes ``ceil`` more blocks for the rest;
- ``fork`` shares every block of the parent (reference count + 1 each), copying nothing;
- **copy-on-write**: an append into a *shared* (count > 1), *partly filled* last block first takes a fresh block,
  reports ``(shared, fresh)`` in ``copies`` and releases its reference on the shared one (a full block is never
  written again, so it stays shared);
- blocks come from the **front** of a FIFO free queue, initially ``0, 1, ..., num_blocks - 1``;
- ``free`` releases the sequence's blocks **tail first** (last block first); a block whose count reaches 0 joins the
  back of the queue, so tail blocks are reused before the shared prefix blocks (vLLM v1's ``KVCacheManager.free``:
  prefix blocks stay cached longest);
- an append that needs more blocks than are free raises an exception and changes nothing.

``attn_core``'s ``BlockAllocator`` hands out the lowest free block first (a min-heap), so its ids differ from this
queue's after a free; the tables' lengths, the reference counts and the copy-on-writes are the same
(``tests/test_exercises_drills_mla_paged.py`` replays the same script on both).
The check replays one script of appends, forks and frees, compares every step, and names the mistake.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from attn_core.exercises import NOT_DONE, as_int, as_int_list, call_learner, feedback, never_raises

__all__ = ["check_paged_allocator", "ReferenceAllocator", "SCRIPT"]

NUM_BLOCKS, BLOCK_SIZE = 8, 4
# (operation, arguments): every rule is exercised, and a mistake shows in the tables, counts or copies
SCRIPT = (
    ("append", ("a", 10)),  # 3 blocks, the last one half full
    ("fork", ("a", "b")),  # shares all 3
    ("append", ("b", 1)),  # b writes into the shared half-full block: copy-on-write
    ("append", ("a", 2)),  # a's last block is its own again: fills it, no copy
    ("fork", ("a", "c")),  # a is 12 tokens: every shared block is full
    ("append", ("c", 1)),  # a full shared block is not copied: a fresh block
    ("append", ("a", 3)),  # a fresh block for a
    ("append", ("b", 17)),  # needs 4 blocks, 2 free: refused, nothing changes
    ("free", ("a",)),  # tail first: a's last block joins the queue before its prefix blocks
    ("free", ("c",)),  # tail first: c's block 4 joins the queue before the prefix block 2 it shared with a
    ("append", ("b", 17)),  # the same append now fits: 4 blocks from the front of the queue
    ("free", ("b",)),
)


class ReferenceAllocator:
    """The grader's allocator; each keyword switches on one mistake (to recognise the learner's)."""

    def __init__(self, num_blocks: int, block_size: int, **mistake) -> None:
        self.block_size, self.mistake = block_size, mistake
        self.queue = deque(range(num_blocks))
        self.counts = [0] * num_blocks
        self.tables: dict[object, list[int]] = {}
        self.lengths: dict[object, int] = {}

    def _take(self) -> int:
        block = self.queue.pop() if self.mistake.get("take") == "back" else self.queue.popleft()
        self.counts[block] = 1
        return block

    def _release(self, block: int) -> None:
        self.counts[block] -= 1
        if self.counts[block] == 0 and self.mistake.get("free") != "leak":
            self.queue.append(block)

    def append(self, seq_id, num_tokens: int) -> list[tuple[int, int]]:
        table = self.tables.setdefault(seq_id, [])
        length = self.lengths.setdefault(seq_id, 0)
        size = self.block_size
        fresh = max(-(-(length + num_tokens) // size) - len(table), 0)
        if self.mistake.get("fill") == "floor":
            fresh = (length + num_tokens) // size - len(table)
        if self.mistake.get("fill") == "never":  # a fresh block per append, the last block's free slots unused
            fresh = -(-num_tokens // size)
        partial = length % size != 0 or self.mistake.get("cow") == "full_too"
        cow = bool(table) and partial and (self.counts[table[-1]] > 1 or self.mistake.get("cow") == "always")
        cow = cow and self.mistake.get("cow") != "never"
        if fresh + cow > len(self.queue):
            if self.mistake.get("refuse") == "partial":  # takes what it can, then refuses
                while self.queue and fresh:
                    table.append(self._take())
                    fresh -= 1
            if self.mistake.get("refuse") == "silent":
                return []
            raise RuntimeError("out of blocks")
        copies = []
        if cow:
            shared, own = table[-1], self._take()
            copies.append((own, shared) if self.mistake.get("cow") == "swapped" else (shared, own))
            if self.mistake.get("cow") != "no_release":
                self._release(shared)
            table[-1] = own
        table.extend(self._take() for _ in range(fresh))
        self.lengths[seq_id] = length + num_tokens
        return copies

    def fork(self, parent_id, child_id) -> None:
        if self.mistake.get("fork") == "copy":
            self.tables[child_id] = [self._take() for _ in self.tables[parent_id]]
        else:
            self.tables[child_id] = list(self.tables[parent_id])
            if self.mistake.get("fork") != "no_retain":
                for block in self.tables[child_id]:
                    self.counts[block] += 1
        self.lengths[child_id] = self.lengths[parent_id]

    def free(self, seq_id) -> None:
        table = self.tables.pop(seq_id)
        self.lengths.pop(seq_id)
        for block in table if self.mistake.get("free") == "head_first" else reversed(table):
            if self.mistake.get("free") == "zero":  # as if no other sequence held it
                self.counts[block] = 0
                self.queue.append(block)
            else:
                self._release(block)

    def block_table(self, seq_id) -> list[int]:
        return list(self.tables[seq_id])

    def ref_count(self, block: int) -> int:
        return self.counts[block]


_SUSPECTS = [
    (dict(fork="copy"), "fork copied the parent's blocks: it must share them (each block's ref_count + 1), copy none."),
    (
        dict(fork="no_retain"),
        "fork shares the blocks but did not add a reference to them: each shared block's ref_count must go up by 1, "
        "or freeing one sequence frees blocks the other still reads.",
    ),
    (
        dict(cow="never"),
        "no copy-on-write: an append into a shared, partly filled last block writes into the other sequence's tokens. "
        "Take a fresh block, report (shared, fresh) in copies, and release the shared one.",
    ),
    (
        dict(cow="always"),
        "copy-on-write of a block nobody shares: copy only when the last block's ref_count > 1.",
    ),
    (
        dict(cow="full_too"),
        "copy-on-write of a full block: a full block is never written again, so it stays shared; "
        "copy only a partly filled last block.",
    ),
    (dict(cow="swapped"), "the copies are reversed: report (src, dst) = (shared block, fresh block)."),
    (
        dict(cow="no_release"),
        "after copy-on-write the shared block kept this sequence's reference: release it (ref_count - 1).",
    ),
    (
        dict(free="head_first"),
        "free released the blocks head first: release them tail first (last block first), so the tail joins the "
        "free queue first and the shared prefix blocks are reused last.",
    ),
    (
        dict(free="zero"),
        "free set ref_count to 0 directly: a block another sequence still shares must only lose one reference.",
    ),
    (
        dict(free="leak"),
        "a block whose ref_count reached 0 never went back to the free queue: append it to the back of the queue.",
    ),
    (
        dict(fill="floor"),
        "too few blocks: the blocks a sequence needs are ceil(tokens / block_size), not tokens // block_size.",
    ),
    (
        dict(fill="never"),
        "every append took a fresh block: fill the last block's free slots first, then take ceil(rest / block_size).",
    ),
    (dict(take="back"), "blocks came from the back of the free queue: take them from the front (FIFO)."),
    (
        dict(refuse="partial"),
        "an append that cannot get all its blocks took some before refusing: count the blocks it needs "
        "(and the copy) first, and change nothing when too few are free.",
    ),
    (
        dict(refuse="silent"),
        "an append with too few free blocks must raise (out of blocks) and change nothing, not carry on.",
    ),
]


def _ints(value) -> tuple:
    ints = as_int_list(value)
    return ("?",) if ints is None else tuple(ints)


def _snapshot(allocator, seq_ids: list, num_blocks: int) -> tuple:
    tables, counts = [], []
    for seq in seq_ids:
        try:
            tables.append(_ints(allocator.block_table(seq)))
        except Exception:  # a sequence the allocator lost: the step that lost it is what the trace shows
            tables.append(("raised",))
    for block in range(num_blocks):
        try:
            counts.append(as_int(allocator.ref_count(block)))
        except Exception:
            counts.append("raised")
    return tuple(tables), tuple(counts)


def _trace(allocator, num_blocks: int = NUM_BLOCKS) -> list[tuple]:
    """Run the script; one entry per step: (what the call returned or raised, tables of live sequences, counts)."""
    live: list = []
    steps = []
    for operation, args in SCRIPT:
        try:
            returned = getattr(allocator, operation)(*args)
        except Exception:  # the refusal the rules ask for (or the learner's own bug, seen in the next steps)
            returned = "raised"
        else:
            if operation == "append":
                returned = tuple(_ints(list(pair)) for pair in (returned or []))
            else:
                returned = None
        if operation in ("append", "fork") and args[-1 if operation == "fork" else 0] not in live:
            live.append(args[-1] if operation == "fork" else args[0])
        if operation == "free" and args[0] in live:
            live.remove(args[0])
        steps.append((returned, *_snapshot(allocator, live, num_blocks)))
    return steps


def _describe(step: int, got: tuple, expected: tuple) -> str:
    operation, args = SCRIPT[step]
    call = f"{operation}({', '.join(repr(a) for a in args)})"
    if got[0] != expected[0]:
        return f"after {call} (step {step + 1}) it returned {got[0]!r}; expected {expected[0]!r}."
    if got[1] != expected[1]:
        return f"after {call} (step {step + 1}) the block tables are {list(got[1])}; expected {list(expected[1])}."
    return f"after {call} (step {step + 1}) the ref_counts are {list(got[2])}; expected {list(expected[2])}."


@never_raises("check_paged_allocator")
def check_paged_allocator(cls: Callable) -> bool:
    """``cls(num_blocks, block_size)`` with append / fork / free / block_table / ref_count (see the module)."""
    name = "check_paged_allocator"
    allocator, problem = call_learner(cls, NUM_BLOCKS, BLOCK_SIZE)
    if problem:
        return feedback(name, problem)
    missing = [
        m for m in ("append", "fork", "free", "block_table", "ref_count") if not callable(getattr(allocator, m, None))
    ]
    if len(missing) == 5:  # the blank stub: an empty class
        return feedback(name, NOT_DONE)
    if missing:
        return feedback(name, f"the class needs the methods {', '.join(missing)} (see the exercise).")
    got = _trace(allocator)
    expected = _trace(ReferenceAllocator(NUM_BLOCKS, BLOCK_SIZE))
    if got == expected:
        return feedback(name, None)
    for mistake, diagnosis in _SUSPECTS:
        if got == _trace(ReferenceAllocator(NUM_BLOCKS, BLOCK_SIZE, **mistake)):
            return feedback(name, diagnosis)
    step = next(i for i, (g, e) in enumerate(zip(got, expected, strict=True)) if g != e)
    return feedback(name, _describe(step, got[step], expected[step]))
