"""Review flags: what in an exercise cell an instructor may want to read. They never change points.

The judge decides outside the learner's process; a flag points at an attempt on the grade (or an
honest answer doing something unusual), a second line of defence. Two readings of each cell:
    text    patterns in its source (FLAG_PATTERNS), which also see inside strings (a command
            line, code run from a string) and IPython's magics;
    code    its syntax tree (`code_flags`), which sees what a name built at run time hides from
            text: getattr or an import whose name is computed, `vars()`/`globals()`/`__dict__`
            indexing, importlib, pkgutil and `__import__`, frames and tracebacks, audit hooks,
            ctypes, assignments into a library's modules or classes, sockets and threads of its
            own; and the course's own answer reached under any name (imports and aliases are
            resolved to `course_utils.module.name` before an exercise's `reference` patterns
            are tried).
A flag the exercise itself calls for (its `allows`) is not raised for it.
"""

from __future__ import annotations

import ast
import re

FLAG_PATTERNS = {
    "mentions solutions/": r"solutions",
    "opens or removes files": r"\bopen\(|\.write_text|\.write_bytes|shutil\.|os\.(remove|unlink)",
    "exits or kills the process": r"sys\.exit|os\._exit|os\.kill|\bsignal\.",
    "starts processes": (
        r"subprocess|os\.system|os\.fork|os\.exec|multiprocessing|^\s*!|%%(bash|sh|script)"
        r"|%system|\bget_ipython\(\)\.system"
    ),
    "touches the grading machinery": (
        r"\bgrading\b|_REGISTRY|_SESSION|_PROBES|\bcheck\s*=|judge|COURSE_JUDGE|COURSE_WITNESS"
    ),
    "replaces builtins or output": (
        r"builtins|__builtins__|\bprint\s*=|sys\.(stdout|stderr|modules)\b"
    ),
    "runs code built at run time": (
        r"\bexec\s*\(|\beval\s*\(|\bcompile\s*\(|__import__|importlib|base64|codecs|rot.?13"
        r"|marshal|pickle\.loads"
    ),
    "reaches into frames or globals": (
        r"__globals__|__code__|_getframe|\bgc\.|inspect\.|__subclasses__|object\.__setattr__"
        r"|__dict__\s*\[|ctypes"
    ),
    "hooks IPython": (
        r"get_ipython|input_transformers|\.events\.register|register_magic|post_run_cell"
        r"|pre_run_cell|IPython"
    ),
}

COMPUTED = "reaches names built at run time"
MONKEYPATCH = "replaces a library's names"
SOCKETS = "opens sockets or threads of its own"
FRAMES = "reaches into frames or globals"
GRADING = "touches the grading machinery"

# Attributes that lead from any object to frames, code, globals or the class machinery.
_FRAME_ATTRIBUTES = {
    "__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__", "__mro__",
    "__bases__", "__base__", "__getattribute__", "__setattr__", "__delattr__", "__reduce__",
    "__reduce_ex__", "__class_getitem__", "__init_subclass__", "__set_name__",
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next",
    "gi_frame", "cr_frame", "ag_frame", "__traceback__", "cell_contents",
}  # fmt: skip
_DYNAMIC_CALLS = {"getattr", "setattr", "delattr", "hasattr"}
_NAMESPACE_CALLS = {"vars", "globals", "locals", "dir", "__import__", "eval", "exec", "compile"}
_MODULES = {  # a module's use, by the flag it raises
    "importlib": COMPUTED,
    "pkgutil": COMPUTED,
    "runpy": COMPUTED,
    "inspect": FRAMES,
    "gc": FRAMES,
    "ctypes": FRAMES,
    "cffi": FRAMES,
    "socket": SOCKETS,
    "threading": SOCKETS,
    "_thread": SOCKETS,
    "asyncio": SOCKETS,
    "concurrent": SOCKETS,
}
_SYS_HOOKS = {
    "_getframe",
    "settrace",
    "setprofile",
    "audit",
    "addaudithook",
    "modules",
    "meta_path",
}


class _Reader(ast.NodeVisitor):
    """One cell's syntax tree: the flags it raises, and the course's names it reaches."""

    def __init__(self):
        self.flags: set[str] = set()
        self.aliases: dict[str, str] = {}  # a local name -> the module or object it was bound to
        self.reached: list[str] = []  # course_utils.x.y reached, each also as "course_utils.x.y("

    def qualified(self, node) -> str | None:
        """`a.b.c` with `a` resolved through the cell's imports; None for anything else."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def bind(self, name: str, target: str) -> None:
        self.aliases[name] = target
        self.module_used(target)

    def module_used(self, dotted: str) -> None:
        root = dotted.split(".")[0]
        if root in _MODULES:
            self.flags.add(_MODULES[root])
        if ".grading" in dotted or dotted.startswith("course_utils.grading"):
            self.flags.add(GRADING)
        if dotted.startswith("course_utils"):  # reached is as good as called: f = x.y; f()
            self.reached += [dotted, f"{dotted}("]

    def visit_Import(self, node):
        for alias in node.names:
            if alias.asname:  # import a.b as x: x is a.b
                self.bind(alias.asname, alias.name)
            else:  # import a.b: a is a, and a.b is reached through it
                self.bind(alias.name.split(".")[0], alias.name.split(".")[0])
            self.module_used(alias.name)

    def visit_ImportFrom(self, node):
        base = "." * node.level + (node.module or "")
        self.module_used(base)
        for alias in node.names:
            self.bind(alias.asname or alias.name, f"{base}.{alias.name}")

    def visit_Call(self, node):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        literal = len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
        if name in _DYNAMIC_CALLS and not literal:
            self.flags.add(COMPUTED)
        if name in ("setattr", "delattr"):
            self.flags.add(MONKEYPATCH)
        if name in _NAMESPACE_CALLS:
            self.flags.add(COMPUTED)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr in _FRAME_ATTRIBUTES:
            self.flags.add(FRAMES)
        if node.attr == "__dict__":
            self.flags.add(COMPUTED)
        whole = self.qualified(node)
        if whole:
            self.module_used(whole)
            if whole.startswith("sys.") and whole.split(".")[1] in _SYS_HOOKS:
                self.flags.add(FRAMES if "frame" in whole or "trace" in whole else COMPUTED)
        self.generic_visit(node)

    def visit_Name(self, node):
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self.flags.add(FRAMES)
        self.generic_visit(node)

    def assigned(self, target) -> None:
        """An assignment into something the cell imported: a library's module or class."""
        root = target
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(target, (ast.Attribute, ast.Subscript)) and isinstance(root, ast.Name):
            if root.id in self.aliases:
                self.flags.add(MONKEYPATCH)

    def visit_Assign(self, node):
        for target in node.targets:
            self.assigned(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self.assigned(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for target in node.targets:
            self.assigned(target)
        self.generic_visit(node)

    def visit_Constant(self, node):  # a name spelled as a string: importable at run time
        if isinstance(node.value, str) and re.search(r"grading|judge|COURSE_WITNESS", node.value):
            self.flags.add(GRADING)


def parse_cell(source: str) -> ast.Module | None:
    """A cell as Python, with IPython's magics and shell escapes turned into calls; None when
    it is not Python (the run will say so)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError):
        return None


def code_flags(source: str) -> tuple[set[str], str]:
    """The flags the cell's syntax tree raises, and the course's names it reaches as one text
    (each on a line, as `course_utils.precision.round_to_tf32` and with `(` after it)."""
    tree = parse_cell(source)
    if tree is None:
        return set(), ""
    reader = _Reader()
    reader.visit(tree)
    return reader.flags, "\n".join(reader.reached)


def cell_flags(source: str, allows: set[str], reference: tuple[str, ...]) -> list[str]:
    """What one exercise cell raises, in a stable order."""
    found = {what for what, pattern in FLAG_PATTERNS.items() if re.search(pattern, source, re.M)}
    from_code, reached = code_flags(source)
    flags = sorted((found | from_code) - allows)
    lazy = [p for p in reference if re.search(p, source) or re.search(p, reached)]
    if lazy:
        flags.append(f"calls the course's own answer ({lazy[0]})")
    return flags
