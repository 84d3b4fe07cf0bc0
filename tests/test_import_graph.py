"""The shape of ``attn_core``: imports point one way, no circles, the public names import, old paths forward.

The import graph is read from the source with the standard library's ``ast``: every ``import`` and ``from ... import``
anywhere in a module counts, at module level or inside a function (a lazy import is still an arrow, and two lazy
imports still make a circle). ``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``.
Importing a submodule also runs its parent packages' ``__init__``; that implicit step is not an arrow.

Layers, low to high; a module may import its own layer and the layers below it, never a layer above:

0. the math, and the core of ``i18n``: ``attention``, ``masks``, ``layers``, ``positions``, ``caches``, ``flash``,
   ``deepseek``, ``linear``, ``variants``, ``_moved``; ``i18n`` itself with ``i18n.fonts`` and
   ``i18n.literal_prefix`` (``set_language``, ``verdict_line``: what prints a learner-facing line; it imports no
   other part of attn_core, so the math may use it too);
1. ``models``, ``serving`` (real weights and the engine on top of the math);
2. ``viz`` (plots and explorers of all the above);
3. ``exercises`` (the graders);
4. the Chinese catalogs ``i18n.zh_*``: they translate the messages of ``viz`` and ``exercises`` and may import
   the English constants they translate (``NOT_DONE``); the ``i18n`` core finds them by name at run time
   (``importlib``), which is no arrow, so the graph stays one-way;
5. the package itself, ``attn_core/__init__.py`` (the public ``ac.X``; nothing inside the package imports it).

Also here: no module over ``MAX_LINES`` lines without a docstring line starting with ``One piece:`` that says why it
is one piece (CONTRIBUTING.md, "Files by concept").
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import types
import warnings
from pathlib import Path

import pytest

import attn_core as ac
from attn_core import _moved

PACKAGE = Path(ac.__file__).resolve().parent
MAX_LINES = 300
MATH = ("attention", "masks", "layers", "positions", "caches", "flash", "deepseek", "linear", "variants", "_moved")
LAYER_NAMES = ("math and the i18n core", "models/serving", "viz", "exercises", "i18n catalogs", "attn_core/__init__")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> int:
    """The layer of a module of attn_core (see the docstring)."""
    parts = module.split(".")
    if len(parts) == 1:
        return 5
    family = parts[1].removesuffix(".py")
    if family in MATH:
        return 0
    if family == "i18n":
        return 4 if len(parts) > 2 and parts[2].startswith("zh_") else 0
    if family in ("models", "serving"):
        return 1
    return {"viz": 2, "exercises": 3}[family]  # a new family fails here: give it a layer above


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a (possibly relative) ``from ... import`` names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, source: str | None = None) -> list[tuple[str, int]]:
    """``(imported attn_core module, line)`` for every import statement in ``module``, lazy ones included."""
    found = []
    source = MODULES[module].read_text() if source is None else source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, node)
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES and target.startswith("attn_core."):
                target = target.rsplit(".", 1)[0]  # import a.b.c where c is a name: the arrow goes to a.b
            if target in MODULES and target != module:
                found.append((target, node.lineno))
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def _strongly_connected(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: every set of modules that reach each other (each circle's members)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for target, _ in edges:
                if target not in index:
                    index[target] = low[target] = counter[0]
                    counter[0] += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_graph_sees_lazy_relative_and_submodule_imports():
    """The walk itself, on a made-up module body: every kind of import it must turn into an arrow."""
    source = (
        "import torch\n"
        "from attn_core.masks import causal_mask\n"  # a name: the arrow goes to its module
        "from attn_core import i18n\n"  # a submodule named in a from-import
        "from . import kv_cache\n"  # relative (as if in attn_core/caches/paged_cache.py)
        "def f():\n"
        "    import attn_core.viz.plotting\n"  # lazy
        "    from attn_core.layers import MultiHeadAttention\n"
    )
    assert sorted(imports_of("attn_core.caches.paged_cache", source), key=lambda arrow: arrow[1]) == [
        ("attn_core.masks", 2),
        ("attn_core.i18n", 3),
        ("attn_core.caches.kv_cache", 4),
        ("attn_core.viz.plotting", 6),
        ("attn_core.layers", 7),
    ]
    circle = {"a": [("b", 1)], "b": [("c", 1)], "c": [("a", 1)], "d": [("a", 1)]}
    assert _strongly_connected(circle) == [["a", "b", "c"]]


def test_no_import_circles():
    circles = _strongly_connected(GRAPH)
    described = []
    for members in circles:
        arrows = sorted({f"{m} -> {t} (line {line})" for m in members for t, line in GRAPH[m] if t in members})
        described.append("; ".join(arrows))
    assert not circles, "import circles (move what both sides need into a module below them):\n" + "\n".join(described)


def test_no_arrow_points_up():
    upward = [
        f"{module} (layer {layer(module)}, {LAYER_NAMES[layer(module)]}) line {line} imports {target} "
        f"(layer {layer(target)}, {LAYER_NAMES[layer(target)]})"
        for module, edges in GRAPH.items()
        for target, line in edges
        if layer(target) > layer(module)
    ]
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_math_never_imports_viz_exercises_or_models():
    """The issue's own words, checked directly (the layers above imply it)."""
    bad = [
        (module, target)
        for module, edges in GRAPH.items()
        if layer(module) == 0
        for target, _ in edges
        if target.split(".")[1] in ("viz", "exercises", "models", "serving")
    ]
    assert not bad


@pytest.mark.parametrize("name", ac.__all__)
def test_every_public_name_imports(name):
    namespace: dict = {}
    exec(f"from attn_core import {name}", namespace)  # the way a notebook writes it
    assert namespace[name] is getattr(ac, name)


def _forget(old: str) -> None:
    """Drop an old path from the import caches, so importing it runs the forwarding (and its warning) again."""
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        del sys.modules[name]
    parent, _, child = old.rpartition(".")
    if parent in sys.modules and isinstance(vars(sys.modules[parent]).get(child), types.ModuleType):
        delattr(sys.modules[parent], child)  # the import system set it: ac.rope must go through __getattr__ again
        # (never a public function of the same name: ac.sparse_attention, ac.linear_attention)


def _import_error(name: str) -> BaseException | None:
    try:
        importlib.import_module(name)
    except ImportError as error:  # flash_forward / flash_backward need the triton extra
        return error
    return None


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_old_module_paths_import_with_a_warning_naming_the_new_path(old):
    new = _moved.MOVED[old]
    error = _import_error(new[0])
    parent = old.rpartition(".")[0]
    if parent in _moved.MOVED:  # an old package (attn_core.kernels): imported first, its own warning is its own test
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            importlib.import_module(parent)
    _forget(old)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old} moved to {new[0]}")):
        if error is not None:  # where the new path cannot import (no triton here), the old one fails the same way
            with pytest.raises(type(error), match=re.escape(str(error))):
                importlib.import_module(old)
            return
        module = importlib.import_module(old)
    targets = [importlib.import_module(n) for n in new]
    public = [n for t in targets for n in getattr(t, "__all__", [n for n in vars(t) if not n.startswith("_")])]
    for name in public:  # every name the new module(s) offer reads the same through the old path
        owner = next(t for t in targets if hasattr(t, name))
        assert getattr(module, name) is getattr(owner, name), (old, name)
    _forget(old)


def test_a_leftover_old_folder_does_not_shadow_the_forwarding(tmp_path, monkeypatch):
    """A checkout updated in place keeps ``attn_core/kernels/__pycache__``: the old folder, now an empty namespace
    package to the path finder. The forwarding must still answer for ``attn_core.kernels`` (and ``.rope``)."""
    for leftover in ("kernels", "rope"):
        (tmp_path / leftover / "__pycache__").mkdir(parents=True)
    monkeypatch.setattr(ac, "__path__", [*ac.__path__, str(tmp_path)])
    for old, name in (("attn_core.kernels", "triton_attention"), ("attn_core.rope", "apply_rope")):
        _forget(old)
        with pytest.warns(DeprecationWarning, match=re.escape(old)):
            module = importlib.import_module(old)
        assert getattr(module, name) is getattr(ac, name), old
        _forget(old)


# ac.sparse_attention / ac.linear_attention are the public functions, never the old modules of the same name
@pytest.mark.parametrize("old", sorted(o for o in _moved.MOVED if o.count(".") == 1 and o[10:] not in ac.__all__))
def test_ac_dot_old_submodule_works_with_a_warning(old):
    attribute = old.split(".")[1]
    _forget(old)
    with pytest.warns(DeprecationWarning, match=re.escape(_moved.MOVED[old][0])):
        module = getattr(ac, attribute)
    assert module.__name__ == old
    _forget(old)


def test_old_from_import_of_a_public_name():
    """``from attn_core.rope import apply_rope``, as code written before the move does."""
    _forget("attn_core.rope")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace: dict = {}
        exec("from attn_core.rope import apply_rope", namespace)
    assert namespace["apply_rope"] is ac.apply_rope
    assert any(
        issubclass(w.category, DeprecationWarning) and "attn_core.positions.rope" in str(w.message) for w in caught
    )
    _forget("attn_core.rope")


def test_unknown_attribute_still_raises():
    with pytest.raises(AttributeError, match="no attribute 'not_a_module'"):
        ac.not_a_module  # noqa: B018


def _one_piece_reason(path: Path) -> bool:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    return any(line.strip().startswith("One piece:") for line in docstring.splitlines())


def test_long_modules_say_why_they_are_one_piece():
    """A module over MAX_LINES lines is split by concept, or its docstring has a line "One piece: <why>"."""
    long_ones = [
        f"{path.relative_to(PACKAGE.parent)} ({lines} lines)"
        for path in MODULES.values()
        if (lines := len(path.read_text().splitlines())) > MAX_LINES and not _one_piece_reason(path)
    ]
    assert not long_ones, (
        f"modules over {MAX_LINES} lines with no 'One piece:' line in their docstring (split them by concept, "
        "or say why they are one piece; see CONTRIBUTING.md):\n" + "\n".join(long_ones)
    )


@pytest.mark.parametrize(
    "line",
    [
        # notebook 14 and 16's import lines, and the model loader's two paths: the splits must keep them working
        "from attn_core.exercises.bug_hunt import BUGS, check_all, check_bug",
        "from attn_core.exercises.bug_hunt import BUGS, Bug, HeadsBase, bug_report, check_all, check_bug, show_bug",
        "from attn_core.exercises.handwrite import check_causal_mask, check_gqa, check_mha, check_mla, check_rope_mha, "
        "check_sdpa",
        "from attn_core.exercises.handwrite_norms import check_rms_norm, check_safe_softmax",
        "from attn_core.models.gemma3 import Gemma3, Gemma3Config, load_gemma3, cache_dir, PACKAGE, SHA256",
        "from attn_core.viz.tiles import TILE_DEFAULTS, render_tiles, explain_tiles, tiles_explorer, tile_schedule",
    ],
)
def test_learner_import_lines_keep_working(line):
    exec(line, {})


def test_split_modules_serve_the_same_objects():
    from attn_core.exercises import bug_hunt, handwrite, handwrite_mla, handwrite_rope
    from attn_core.models import gemma3, gemma3_config

    assert ac.load_gemma3 is gemma3.load_gemma3
    assert gemma3.Gemma3Config is gemma3_config.Gemma3Config and gemma3.SHA256 == gemma3_config.SHA256
    assert handwrite.check_mla is handwrite_mla.check_mla and handwrite.check_rope_mha is handwrite_rope.check_rope_mha
    assert len(bug_hunt.BUGS) == 18 and all(bug.id == key for key, bug in bug_hunt.BUGS.items())
    assert bug_hunt.BUGS["scale_by_model_dim"].buggy is bug_hunt.ScaleAttention  # the planted code, still importable


def test_importing_an_old_path_never_replaces_a_public_name():
    """``attn_core.sparse_attention`` and ``attn_core.linear_attention`` were modules named like the functions they
    held; importing the old path (in a fresh process: the binding happens once) must leave ``ac.X`` the function."""
    import subprocess
    import sys

    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "import attn_core as ac\n"
        "functions = ac.sparse_attention, ac.linear_attention\n"
        "import attn_core.sparse_attention, attn_core.linear_attention\n"
        "from attn_core.linear_attention import GatedDeltaNet\n"
        "assert (ac.sparse_attention, ac.linear_attention) == functions, (ac.sparse_attention, ac.linear_attention)\n"
        "assert GatedDeltaNet is ac.GatedDeltaNet\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
