"""Old module paths of attn_core, kept for one release after the modules moved into family subpackages.

``import attn_core.rope`` (or ``from attn_core.rope import apply_rope``) still works: a meta-path finder answers
for each old name with a small module that forwards every attribute to the new module, and warns once with a
``DeprecationWarning`` naming the new path. No files stand at the old paths, so ``git log --follow`` sees plain
renames. Public names are unaffected: ``ac.apply_rope`` never moved.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings

# old dotted path -> new module(s); an attribute is looked up in each new module in turn
MOVED: dict[str, tuple[str, ...]] = {
    "attn_core.rope": ("attn_core.positions.rope",),
    "attn_core.rope_scaling": ("attn_core.positions.rope_scaling",),
    "attn_core.kv_cache": ("attn_core.caches.kv_cache",),
    "attn_core.paged_cache": ("attn_core.caches.paged_cache",),
    "attn_core.block_allocator": ("attn_core.caches.block_allocator",),
    "attn_core.tiled": ("attn_core.flash.tiled",),
    "attn_core.tiled_backward": ("attn_core.flash.tiled_backward",),
    "attn_core.merge": ("attn_core.flash.merge",),
    "attn_core.fa4_tricks": ("attn_core.flash.fa4_tricks",),
    "attn_core.kernels": ("attn_core.flash.kernels",),
    "attn_core.kernels.triton_attention": ("attn_core.flash.kernels.triton_attention",),
    "attn_core.kernels.flash_forward": ("attn_core.flash.kernels.flash_forward",),
    "attn_core.kernels.flash_backward": ("attn_core.flash.kernels.flash_backward",),
    "attn_core.kernels.schedule": ("attn_core.viz.kernel_schedule",),
    "attn_core.latent_attention": ("attn_core.deepseek.latent_attention",),
    "attn_core.lightning_indexer": ("attn_core.deepseek.lightning_indexer",),
    "attn_core.sparse_attention": ("attn_core.deepseek.sparse_attention",),
    "attn_core.compressor": ("attn_core.deepseek.compressor",),
    "attn_core.compressed_cache": ("attn_core.deepseek.compressed_cache",),
    "attn_core.compressed_attention": ("attn_core.deepseek.compressed_attention",),
    # GatedDeltaNet and LinearAttentionCache were importable from here too
    "attn_core.linear_attention": ("attn_core.linear.linear_attention", "attn_core.linear.gated_deltanet"),
    "attn_core.gated_deltanet": ("attn_core.linear.gated_deltanet",),
    "attn_core.differential_attention": ("attn_core.variants.differential_attention",),
    "attn_core.flex_variants": ("attn_core.variants.flex_variants",),
}


class _Forwarding(types.ModuleType):
    """The module an old path imports: every attribute read is served by the module(s) it moved to."""

    def __init__(self, name: str, targets: tuple[str, ...]):
        super().__init__(name, f"Moved to {' and '.join(targets)}.")
        self._targets = targets

    def __getattr__(self, attr: str):
        for target in self._targets:
            module = importlib.import_module(target)
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(f"module {self.__name__!r} (moved to {' and '.join(self._targets)}) has no {attr!r}")

    def __dir__(self):
        return sorted({n for t in self._targets for n in dir(importlib.import_module(t))})


class Package(types.ModuleType):
    """The class of the ``attn_core`` package itself: importing an old path must not clobber a public name.

    Python binds an imported submodule as an attribute of its package. Two old paths share their name with the
    function they held (``attn_core.linear_attention``, ``attn_core.sparse_attention``), so ``import
    attn_core.sparse_attention`` would replace ``ac.sparse_attention`` (the function) with the forwarding module.
    This keeps the function; the old module stays importable through ``sys.modules``.
    """

    def __setattr__(self, name: str, value) -> None:
        current = self.__dict__.get(name)
        if isinstance(value, _Forwarding) and current is not None and not isinstance(current, types.ModuleType):
            return
        super().__setattr__(name, value)


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        is_package = any(other.startswith(fullname + ".") for other in MOVED)
        return importlib.machinery.ModuleSpec(fullname, self, is_package=is_package)

    def create_module(self, spec):
        targets = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {targets[0]}: import it from there (or use the public name attn_core.X). "
            "The old path goes in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return _Forwarding(spec.name, targets)

    def exec_module(self, module):
        if module.__spec__.submodule_search_locations is not None:
            module.__path__ = []  # a package: its old submodules are found by this finder too


if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
    # First, before the path finder: a checkout updated in place keeps the old folders (attn_core/kernels/ with
    # its ignored __pycache__), which the path finder would import as empty namespace packages.
    sys.meta_path.insert(0, _MovedFinder())
