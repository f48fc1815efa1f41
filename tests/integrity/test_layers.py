"""The package is a stack (docs/architecture.md): every import statement in medexp/, those inside
functions included, points down a layer or stays inside its own package; no module cycle; no
import of another package's private name; no import at a module's bottom (registration by side
effect). The guard is shown to catch a planted violation of each kind."""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[2] / "medexp"

# Bottom to top; packages on one line may not import each other, except in the kernel (layer 0),
# whose packages build on one another (tracking and config use the kernel's hashing and atomic
# writes); the cycle test keeps them acyclic.
LAYERS = (
    ("kernel", "tracking", "config"),
    ("stats",),
    ("benchmarks",),
    ("probes",),
    ("scoring",),
    ("models", "answers"),
    ("detectors", "demo", "translators"),
    ("controls", "images", "train", "report"),
    ("evaluators",),
    ("runner",),
    ("__main__", "inspect", "refine", "power", "plan", "export"),
)
LAYER_OF = {name: level for level, names in enumerate(LAYERS) for name in names}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    names: tuple[str, ...]
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported}"


def module_names(package: Path) -> dict[str, Path]:
    names = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def imports_of(package: Path) -> list[Import]:
    """Every import of a medexp module by a medexp module, resolved to the deepest module it names
    (``from medexp.x import y`` names ``medexp.x.y`` when that is a module)."""
    modules = module_names(package)
    found = []
    for module, path in modules.items():
        here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                candidates = [(alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                names = tuple(alias.name for alias in node.names)
                submodules = [(f"{base}.{name}", ()) for name in names if f"{base}.{name}" in modules]
                candidates = submodules or [(base, names)]
            else:
                continue
            for name, names in candidates:
                parts = name.split(".")
                while parts and ".".join(parts) not in modules:
                    parts.pop()
                if parts and ".".join(parts) != module:
                    found.append(Import(module, ".".join(parts), names, node.lineno))
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def direction_violations(imports: list[Import]) -> list[str]:
    """Imports that go up a layer, sideways to another package of the same layer, or from or to a
    package the layer table does not know."""
    wrong = []
    for imp in imports:
        source, target = package_of(imp.importer), package_of(imp.imported)
        if source == target or not target:
            continue
        if source not in LAYER_OF or target not in LAYER_OF:
            wrong.append(f"{imp} (a package with no layer: add it to LAYERS and docs/architecture.md)")
        elif LAYER_OF[target] > LAYER_OF[source] or LAYER_OF[target] == LAYER_OF[source] > 0:
            kind = "up" if LAYER_OF[target] > LAYER_OF[source] else "sideways"
            wrong.append(f"{imp} ({kind}: {source} is in layer {LAYER_OF[source]}, {target} in {LAYER_OF[target]})")
    return wrong


def import_cycles(imports: list[Import]) -> list[list[str]]:
    graph = nx.DiGraph((imp.importer, imp.imported) for imp in imports)
    return [sorted(component) for component in nx.strongly_connected_components(graph) if len(component) > 1]


def private_name_imports(imports: list[Import]) -> list[str]:
    return [f"{imp} name {name}" for imp in imports
            if package_of(imp.importer) != package_of(imp.imported)
            for name in imp.names if name.startswith("_") and not name.startswith("__")]


def bottom_imports(package: Path) -> list[str]:
    """Module-level imports after the first function or class: the registration-by-side-effect pattern."""
    late = []
    for module, path in module_names(package).items():
        seen_definition = False
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                seen_definition = True
            elif seen_definition and isinstance(node, (ast.Import, ast.ImportFrom)):
                late.append(f"{module}:{node.lineno}")
    return late


# A cell's context (evaluators.context.CellContext) belongs to the evaluators and what runs them;
# below them a function takes values. These names mark a context handed down by duck typing,
# which no import statement shows: a parameter named ``ctx`` (the name every evaluator gives it;
# the report's ``context`` is a template's), or a context's own attributes read or set.
CONTEXT_PARAMETERS = ("ctx",)
CONTEXT_ATTRIBUTES = ("cohort_additions", "example_scores", "scoring_metrics", "nonmember_examples")
ABOVE_CONTEXT = {name for name, level in LAYER_OF.items() if level >= LAYER_OF["evaluators"]}


def context_reach_ups(package: Path) -> list[str]:
    """Places below the evaluators that take a cell context or use its attributes."""
    found = []
    for module, path in module_names(package).items():
        if package_of(module) in ABOVE_CONTEXT:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                found += [f"{module}:{node.lineno} takes {arg.arg}" for arg in arguments
                          if arg.arg in CONTEXT_PARAMETERS]
            elif isinstance(node, ast.Attribute) and node.attr in CONTEXT_ATTRIBUTES:
                found.append(f"{module}:{node.lineno} uses .{node.attr}")
    return found


def test_nothing_below_the_evaluators_receives_a_cell_context():
    assert context_reach_ups(PACKAGE) == []


def test_the_guard_catches_a_duck_typed_context(tmp_path):
    copy = _plant(tmp_path, "controls/__init__.py",
                  "\n\ndef _planted(ctx):\n    ctx.cohort_additions = []\n    return ctx.example_scores()\n")
    new = [line for line in context_reach_ups(copy) if line not in context_reach_ups(PACKAGE)]
    assert len(new) == 3 and all(line.startswith("medexp.controls:") for line in new), new


def test_every_import_points_down_or_stays_in_its_package():
    assert direction_violations(imports_of(PACKAGE)) == []


def test_no_module_import_cycle():
    assert import_cycles(imports_of(PACKAGE)) == []


def test_no_package_imports_another_packages_private_name():
    assert private_name_imports(imports_of(PACKAGE)) == []


def test_no_module_is_imported_for_its_side_effect():
    assert bottom_imports(PACKAGE) == []


def test_every_package_and_top_level_module_has_a_layer():
    top = {package_of(module) for module in module_names(PACKAGE)} - {""}
    assert top - set(LAYER_OF) == set()


def test_the_package_root_holds_the_command_line_entry_points_only():
    """Kernel modules live in medexp/kernel/; a module at the root is a command (python -m medexp.<name>)."""
    root_modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    assert root_modules == set(LAYERS[-1])
    for name in root_modules - {"__main__"}:
        assert 'if __name__ == "__main__":' in (PACKAGE / f"{name}.py").read_text(encoding="utf-8"), name


def _plant(tmp_path: Path, relative: str, code: str) -> Path:
    copy = tmp_path / "medexp"
    if not copy.exists():
        shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / relative).open("a", encoding="utf-8") as handle:
        handle.write(code)
    return copy


def _new_findings(copy: Path) -> dict[str, list]:
    """What the guard finds in the planted copy and not in the package itself."""
    def findings(package: Path) -> dict[str, list]:
        imports = imports_of(package)
        return {"direction": direction_violations(imports), "cycles": import_cycles(imports),
                "private": private_name_imports(imports), "bottom": bottom_imports(package)}

    before, after = findings(PACKAGE), findings(copy)
    return {kind: [item for item in after[kind] if item not in before[kind]] for kind in after}


def test_the_guard_catches_a_lazy_upward_import(tmp_path):
    copy = _plant(tmp_path, "stats/__init__.py", "\n\ndef _planted():\n    from medexp.runner import signals\n")
    new = _new_findings(copy)
    assert len(new["direction"]) == 1, new
    assert "medexp.stats:" in new["direction"][0] and "medexp.runner.signals" in new["direction"][0]
    assert "(up:" in new["direction"][0]


def test_the_guard_catches_a_sideways_import_a_cycle_a_private_name_and_a_bottom_import(tmp_path):
    copy = _plant(tmp_path, "images/__init__.py", "\n\ndef _planted():\n    from medexp.report import _planted_name\n")
    _plant(tmp_path, "report/__init__.py", "\n\ndef _other():\n    import medexp.images\n")
    _plant(tmp_path, "stats/__init__.py", "\n\ndef _later():\n    pass\n\n\nimport medexp.kernel.hashing  # noqa: E402\n")
    new = _new_findings(copy)
    assert any(line.startswith("medexp.images:") and "sideways" in line for line in new["direction"]), new
    assert ["medexp.images", "medexp.report"] in new["cycles"]
    assert any("_planted_name" in line for line in new["private"])
    assert any(line.startswith("medexp.stats:") for line in new["bottom"])
