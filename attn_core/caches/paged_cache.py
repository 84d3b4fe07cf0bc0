"""Paged KV cache (vLLM's PagedAttention, Kwon et al. 2023): many sequences share one pool of fixed-size blocks.

A contiguous :class:`~attn_core.caches.kv_cache.KVCache` per sequence reserves room for its longest possible length;
a server with many sequences of unknown length wastes most of that. Here keys/values live in a pool of
``num_blocks`` blocks of ``block_size`` tokens; each sequence has a *block table* (its blocks, in position
order), so token ``p`` sits in block ``table[p // block_size]`` at slot ``p % block_size``. A sequence takes a
new block only when its last one is full (at most ``block_size - 1`` slots wasted per sequence) and gives its
blocks back on ``free``. Sequences that share a prompt share its blocks (``fork``): every block has a reference
count, and an append into a shared, partly filled last block first copies it (copy-on-write), so a sequence
never sees another's tokens.

One cache belongs to one attention layer; the layer calls ``cache.sequence(seq_id)`` and uses the returned
:class:`PagedSequence` like a ``KVCache`` (``bind``, ``len``, ``update``, ``key_positions``).

A model has one cache per layer, and a server wants ONE block table per sequence for all of them (block ``b`` holds
the same tokens in every layer): ``PagedKVCache.for_layers(num_layers, block_size, num_blocks)`` builds caches on
one :class:`BlockAllocator` (free list, reference counts, block tables); the first layer's append allocates, the
others find the blocks in the table. ``attach(seq_id, blocks, length)`` starts a sequence on blocks that already
hold its first tokens (a prefix-cache hit). ``attn_core.serving`` builds a serving engine on these.

One piece: ``PagedKVCache`` and the ``PagedSequence`` handle it gives out share one block table and pool; splitting
them would split one invariant.
"""

from __future__ import annotations

import weakref

import torch

from attn_core.caches.block_allocator import BlockAllocator, OutOfBlocksError
from attn_core.caches.kv_cache import BoundToOneLayer

__all__ = ["BlockAllocator", "OutOfBlocksError", "PagedKVCache", "PagedSequence"]


class PagedKVCache(BoundToOneLayer):
    """A pool of ``num_blocks`` blocks, each holding ``block_size`` tokens of keys ``(Hkv, block_size, D)``
    and values ``(Hkv, block_size, Dv)``, shared by sequences named by ``seq_id`` (an int or a str).

    The pool tensors ``(num_blocks, Hkv, block_size, D)`` are allocated on the first append (dtype, device,
    Hkv, D and Dv come from it). ``nbytes`` counts the blocks in use, a shared block once, whole blocks
    (the unused slots of a last block are allocated memory too). An append that needs more blocks than are
    free raises :class:`OutOfBlocksError` before changing anything.

    Gradients flow through: appends write the pool in place, but every read is a fresh gathered copy, so no
    tensor autograd saved is ever modified. The pool then keeps the graph of every append alive; serve under
    ``torch.no_grad()``.
    """

    def __init__(self, block_size: int, num_blocks: int, *, allocator: BlockAllocator | None = None) -> None:
        for name, value in (("block_size", block_size), ("num_blocks", num_blocks)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}.")
        if allocator is None:
            allocator = BlockAllocator(num_blocks)
        if not isinstance(allocator, BlockAllocator) or allocator.num_blocks != num_blocks:
            raise ValueError(
                f"allocator must be a BlockAllocator of num_blocks={num_blocks} blocks (one shared by every layer's "
                f"cache), got {allocator!r:.80}."
            )
        self.block_size, self.num_blocks, self.allocator = block_size, num_blocks, allocator
        allocator.caches.append(weakref.ref(self))  # a copy-on-write copies the block in every layer's pool
        self._key_pool: torch.Tensor | None = None  # (num_blocks, Hkv, block_size, D)
        self._value_pool: torch.Tensor | None = None  # (num_blocks, Hkv, block_size, Dv)
        self._lengths: dict[int | str, int] = {}  # seq_id -> tokens appended to THIS layer's pool
        self._owner: weakref.ref | int | None = None  # a weakref to the owning layer (its id() if it has none)
        self._owner_type = ""

    @classmethod
    def for_layers(cls, num_layers: int, block_size: int, num_blocks: int, allocator: BlockAllocator | None = None):
        """``num_layers`` caches on ONE allocator: a block id names the same tokens in every layer, and
        ``free`` / ``truncate`` / ``fork`` / ``attach`` on any of them act on all (vLLM's one KV cache manager)."""
        allocator = BlockAllocator(num_blocks) if allocator is None else allocator
        return [cls(block_size, num_blocks, allocator=allocator) for _ in range(num_layers)]

    @property
    def _tables(self) -> dict[int | str, list[int]]:
        return self.allocator.tables  # seq_id -> its blocks in position order, shared by the allocator's caches

    @property
    def _ref_counts(self) -> list[int]:
        return self.allocator.ref_counts

    @property
    def _free(self) -> list[int]:
        return self.allocator.free

    def _layers(self) -> list[PagedKVCache]:
        """Every live cache on this allocator (this one included): the per-layer token counts move together."""
        return [cache for ref in self.allocator.caches if (cache := ref()) is not None]

    # ------------------------------------------------------------------ bookkeeping
    @property
    def num_free_blocks(self) -> int:
        return self.allocator.num_free_blocks

    @property
    def seq_ids(self) -> list[int | str]:
        """The live sequences, in the order they were created."""
        return list(self._tables)

    @property
    def nbytes(self) -> int:
        if self._key_pool is None:
            return 0
        used = self.num_blocks - self.num_free_blocks  # a shared block is one block of memory
        per_block = self._key_pool[0].numel() + self._value_pool[0].numel()  # Hkv·block_size·(D + Dv)
        return used * per_block * self._key_pool.element_size()

    def __repr__(self) -> str:
        lengths = ", ".join(f"{seq_id!r}: {length}" for seq_id, length in self._lengths.items())
        dtype = "" if self._key_pool is None else f", dtype={self._key_pool.dtype}"
        return (
            f"PagedKVCache(block_size={self.block_size}, blocks_used={self.num_blocks - self.num_free_blocks}"
            f"/{self.num_blocks}, tokens={{{lengths}}}, nbytes={self.nbytes}{dtype})"
        )

    def sequence(self, seq_id: int | str) -> PagedSequence:
        """The handle a layer appends to and attends over; the sequence is created empty on first use."""
        if isinstance(seq_id, bool) or not isinstance(seq_id, int | str):
            raise TypeError(f"seq_id must be an int or a str, got {seq_id!r} of type {type(seq_id).__name__}.")
        if seq_id not in self._tables:
            self._tables[seq_id] = []
            for cache in self._layers():
                cache._lengths[seq_id] = 0
        return PagedSequence(self, seq_id)

    def _require(self, seq_id: int | str) -> None:
        if seq_id not in self._tables:
            raise ValueError(
                f"no sequence {seq_id!r} in this PagedKVCache (live: {self.seq_ids}); it was never created or "
                "was freed. paged.sequence(seq_id) starts a new one."
            )

    def block_table(self, seq_id: int | str) -> list[int]:
        """The blocks holding ``seq_id``'s tokens, in position order (a copy)."""
        self._require(seq_id)
        return list(self._tables[seq_id])

    def _release(self, blocks: list[int]) -> None:
        for block in blocks:
            self.allocator.release(block)

    def free(self, seq_id: int | str) -> None:
        """Forget ``seq_id``; blocks no other sequence shares go back to the pool."""
        self._require(seq_id)
        self._release(self._tables.pop(seq_id))
        for cache in self._layers():
            cache._lengths.pop(seq_id, None)

    def truncate(self, seq_id: int | str, length: int) -> None:
        """Keep ``seq_id``'s first ``length`` tokens (speculative-decoding rollback, beam search); blocks
        past them are released. Stale slots left in the last block are overwritten by later appends."""
        self._require(seq_id)
        current = self._lengths[seq_id]
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= current:
            raise ValueError(
                f"length must be an int in [0, {current}] (tokens of sequence {seq_id!r}), got {length!r}."
            )
        keep = -(-length // self.block_size)  # ceil: blocks that still hold tokens
        table = self._tables[seq_id]
        self._release(table[keep:])
        del table[keep:]
        for cache in self._layers():
            cache._lengths[seq_id] = min(cache._lengths.get(seq_id, 0), length)

    def fork(self, parent_id: int | str, child_id: int | str) -> PagedSequence:
        """Start ``child_id`` as a copy of ``parent_id`` that shares all its blocks (no copy now: prefix
        sharing). The first append by either into a shared, partly filled block copies that block first."""
        self._require(parent_id)
        if child_id in self._tables:
            raise ValueError(f"sequence {child_id!r} already exists; free it first or fork into a new seq_id.")
        child = self.sequence(child_id)
        self._tables[child_id] = list(self._tables[parent_id])
        for cache in self._layers():
            cache._lengths[child_id] = cache._lengths.get(parent_id, 0)
        for block in self._tables[child_id]:
            self.allocator.retain(block)
        return child

    def attach(self, seq_id: int | str, blocks: list[int], length: int) -> PagedSequence:
        """Start ``seq_id`` on ``blocks`` that already hold its first ``length`` tokens (a prefix cache hit: no
        compute, no copy); each block gains a reference, in every layer's cache on this allocator."""
        if seq_id in self._tables:
            raise ValueError(f"sequence {seq_id!r} already exists; free it first or attach a new seq_id.")
        bad = [b for b in blocks if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b < self.num_blocks]
        if bad or len(set(blocks)) != len(blocks):
            raise ValueError(f"blocks must be distinct block ids in [0, {self.num_blocks}), got {blocks!r}.")
        if isinstance(length, bool) or not isinstance(length, int) or -(-length // self.block_size) != len(blocks):
            raise ValueError(
                f"length must be an int whose ceil(length / block_size={self.block_size}) == {len(blocks)} blocks "
                f"given, got {length!r}."
            )
        for done, block in enumerate(blocks):
            try:
                self.allocator.retain(block)  # raises on a free block: it holds no tokens
            except ValueError:
                for held in blocks[:done]:
                    self.allocator.release(held)
                raise
        self._tables[seq_id] = list(blocks)
        for cache in self._layers():
            cache._lengths[seq_id] = length
        return PagedSequence(self, seq_id)

    # ------------------------------------------------------------------ append and gather
    def _check(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        for name, t in (("keys", keys), ("values", values)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"PagedKVCache update takes tensors, got {name} of type {type(t).__name__}.")
        if keys.ndim != 4 or values.ndim != 4 or keys.shape[:3] != values.shape[:3]:
            raise ValueError(
                f"PagedKVCache update takes keys (1, kv_heads, n, head_dim) and values (1, kv_heads, n, v_dim) "
                f"with matching first three dims, got keys {tuple(keys.shape)} and values {tuple(values.shape)}."
            )
        if keys.shape[0] != 1:
            raise ValueError(
                f"a paged sequence takes one sequence per call (batch size 1), got keys {tuple(keys.shape)}. "
                "Call the layer once per sequence: layer(x[i : i + 1], cache=paged, seq_id=i)."
            )
        if self._key_pool is None:
            if keys.dtype != values.dtype or keys.device != values.device:
                raise ValueError(
                    f"keys and values must share one dtype and device, got keys of {keys.dtype} on {keys.device} "
                    f"and values of {values.dtype} on {values.device}. Convert one with .to(other.dtype, other.device)."
                )
            return
        for name, new, pool in (("keys", keys, self._key_pool), ("values", values, self._value_pool)):
            expected = (1, pool.shape[1], "n", pool.shape[-1])
            if new.shape[1] != pool.shape[1] or new.shape[-1] != pool.shape[-1]:
                raise ValueError(
                    f"this PagedKVCache holds {name} {expected}; got {name} {tuple(new.shape)}. "
                    "Use one PagedKVCache per layer."
                )
            if new.dtype != pool.dtype or new.device != pool.device:
                raise ValueError(
                    f"this PagedKVCache holds {name} of {pool.dtype} on {pool.device}; got {name} of "
                    f"{new.dtype} on {new.device}. Convert with .to(...)."
                )

    def _append(self, seq_id: int | str, keys: torch.Tensor, values: torch.Tensor) -> None:
        self._require(seq_id)
        self._check(keys, values)
        table, length, new = self._tables[seq_id], self._lengths[seq_id], keys.shape[-2]
        # Count every block this append needs before touching anything: a failed append changes nothing. On a
        # shared allocator an earlier layer may have grown the table already: then nothing is allocated.
        fresh = max(-(-(length + new) // self.block_size) - len(table), 0)  # blocks for tokens past the table
        first = length // self.block_size  # the block the first new token goes into
        copy_on_write = new > 0 and length % self.block_size != 0 and self._ref_counts[table[first]] > 1
        needed = fresh + copy_on_write
        if needed > self.num_free_blocks:
            raise OutOfBlocksError(
                f"PagedKVCache is out of blocks: appending {new} tokens to sequence {seq_id!r} (now {length} tokens) "
                f"needs {needed} free block(s){' (1 to copy a shared block)' if copy_on_write else ''}, "
                f"{self.num_free_blocks} of {self.num_blocks} are free. Free finished sequences "
                "(paged.free(seq_id)), truncate, or build the cache with more num_blocks."
            )
        if self._key_pool is None:
            heads, head_dim, value_dim = keys.shape[1], keys.shape[-1], values.shape[-1]
            self._key_pool = keys.new_zeros(self.num_blocks, heads, self.block_size, head_dim)  # (N, Hkv, bs, D)
            self._value_pool = values.new_zeros(self.num_blocks, heads, self.block_size, value_dim)  # (N, Hkv, bs, Dv)
        if copy_on_write:  # the block is shared and will be written: this sequence gets its own copy
            shared, own = table[first], self.allocator.allocate()
            for cache in self._layers():  # in every layer's pool, so a later layer finds its own copy too
                if cache._key_pool is not None:
                    cache._key_pool[own] = cache._key_pool[shared]  # (Hkv, bs, D)
                    cache._value_pool[own] = cache._value_pool[shared]  # (Hkv, bs, Dv)
            self._release([shared])
            table[first] = own
        for _ in range(fresh):
            table.append(self.allocator.allocate())
        positions = torch.arange(length, length + new, device=self._key_pool.device)  # (n,)
        table_index = torch.tensor(table, dtype=torch.long, device=positions.device)  # (nb,)
        blocks = table_index[positions // self.block_size]  # (n,): the block holding each new token
        slots = positions % self.block_size  # (n,)
        # Indexing (block, :, slot) puts the n tokens first: (n, Hkv, D), so move the token dim of k to the front.
        self._key_pool[blocks, :, slots] = keys[0].transpose(0, 1)  # (n, Hkv, D)
        self._value_pool[blocks, :, slots] = values[0].transpose(0, 1)  # (n, Hkv, Dv)
        self._lengths[seq_id] = length + new

    def _gather(self, seq_id: int | str) -> tuple[torch.Tensor, torch.Tensor]:
        self._require(seq_id)
        if self._key_pool is None:
            raise ValueError("the cache is empty: run the layer with cache=..., seq_id=... once (the prefill) first.")
        length = self._lengths[seq_id]
        used = self._tables[seq_id][: -(-length // self.block_size)]  # a shared table may run ahead of this layer
        table = torch.tensor(used, dtype=torch.long, device=self._key_pool.device)  # (nb,)
        out = []
        for pool in (self._key_pool, self._value_pool):
            # Teaching version: copy the sequence's blocks into one contiguous (1, Hkv, T, D) tensor and reuse
            # ordinary attention. Real paged-attention kernels read the blocks in place through the table.
            blocks = pool.index_select(0, table)  # (nb, Hkv, bs, D)
            heads, dim = pool.shape[1], pool.shape[-1]
            flat = blocks.transpose(0, 1).reshape(heads, -1, dim)  # (Hkv, nb·bs, D), position order
            out.append(flat[:, :length].unsqueeze(0))  # (1, Hkv, T, D)
        return out[0], out[1]


class PagedSequence:
    """One sequence of a :class:`PagedKVCache`, used by a layer like a ``KVCache`` (batch size 1).

    A handle names its sequence by ``seq_id``: after ``paged.free(seq_id)`` it raises ValueError."""

    key_positions = None  # keys sit at positions 0 .. T-1 in order (a window cache would return a LongTensor)

    def __init__(self, cache: PagedKVCache, seq_id: int | str) -> None:
        self.cache, self.seq_id = cache, seq_id

    def __len__(self) -> int:
        self.cache._require(self.seq_id)
        return self.cache._lengths[self.seq_id]

    def __repr__(self) -> str:
        return f"PagedSequence(seq_id={self.seq_id!r}, tokens={len(self)}, blocks={self.block_table})"

    def bind(self, owner: object) -> None:
        self.cache.bind(owner)  # one pool, one layer

    @property
    def block_table(self) -> list[int]:
        return self.cache.block_table(self.seq_id)

    @property
    def keys(self) -> torch.Tensor:
        """This sequence's keys ``(1, Hkv, T, D)``, gathered from its blocks (a copy)."""
        return self.cache._gather(self.seq_id)[0]

    @property
    def values(self) -> torch.Tensor:
        """This sequence's values ``(1, Hkv, T, Dv)``, gathered from its blocks (a copy)."""
        return self.cache._gather(self.seq_id)[1]

    def truncate(self, length: int) -> None:
        self.cache.truncate(self.seq_id, length)  # as KVCache.truncate: keep the first `length` tokens

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``keys (1, Hkv, n, D)`` and ``values (1, Hkv, n, Dv)``; return all of this sequence's so far."""
        self.cache._append(self.seq_id, keys, values)
        return self.cache._gather(self.seq_id)
