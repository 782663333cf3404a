"""Kernels of two traces matched by role: which kernels of the head do the job that kernels of
the base did, when their names differ (a rename, a new kernel library, another vendor).

A *role* is a group of kernel keys on each side. The stages run in order, each on what the
earlier ones left unmatched, and every role records the weakest stage that built it
(``matched_by``):

1. ``name`` -- the same key (:func:`tracekit.names.kernel_key`) on both sides;
2. ``operator+shapes`` -- launched by the same host operator with the same recorded input
   shapes (PyTorch ``record_shapes``: ``aten::mm`` with ``[[1024, 896], [896, 4864]]``);
3. ``operator`` -- launched by the same host operator, shapes aside;
4. ``function`` -- the same function once template arguments and trailing numbers are dropped
   (:func:`tracekit.names.kernel_family`), within one category;
5. ``order`` -- the same place within a step: each side's first steps, as sequences of
   matched roles and of the categories of unmatched kernels, are aligned
   (:class:`difflib.SequenceMatcher`). Two unmatched kernels of one category aligned with
   each other, or standing in one short replaced stretch (an unfused pair where the other
   side runs a fused kernel), join when they do so in at least :data:`VOTE_SHARE` of the
   occurrences of each; an unmatched kernel joins a matched role in its place only when it
   has the role's category or is a fallback kernel (a fallback chain where the other side
   runs the native kernel), in :data:`VOTE_SHARE` of its occurrences. A kernel of another
   known category never joins by place alone (``other``, a name the taxonomy does not know,
   may pair with an unmatched kernel of any category).

Kernels left unmatched after the last stage appeared or disappeared.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from difflib import SequenceMatcher

import polars as pl

from tracekit.names import kernel_family

STAGES = ("name", "operator+shapes", "operator", "function", "order")
# a kernel joins a partner found by order when they align in this share of its occurrences
VOTE_SHARE = 0.5
# a replaced stretch this short on each side links its kernels whatever their categories
SMALL_STRETCH = 8
# a step is aligned on its first kernels only (difflib is quadratic in the worst case: 3,000
# against 3,000 takes about half a second; the layers of a model repeat within a step)
MAX_TOKENS = 3_000
# a kernel is counted as launched by an operator that launched at least this share of it
OP_SHARE = 0.2


@dataclass
class Side:
    """What one side knows of its kernels: per key its category, fallback flag and time
    (``catalogue``), its launching operators (``ops``: key, op, shapes, n) and the key
    sequences of its first steps."""

    catalogue: pl.DataFrame  # key, category, fallback, ns
    ops: pl.DataFrame
    sequences: list[list[str]] = field(default_factory=list)


@dataclass
class Role:
    """Kernels of each side doing one job: ``key`` names it (unique), ``matched_by`` the
    weakest stage that joined its members (None: on one side only)."""

    key: str
    category: str
    fallback: bool
    base_keys: list[str]
    head_keys: list[str]
    matched_by: str | None
    op: str | None = None  # the operator that launched most of it
    ops: list[str] = field(default_factory=list)  # every operator that launched much of it

    @property
    def in_base(self) -> bool:
        """The role runs on the base side."""
        return bool(self.base_keys)

    @property
    def in_head(self) -> bool:
        """The role runs on the head side."""
        return bool(self.head_keys)

    @property
    def presence(self) -> str:
        """``both`` (same name), ``renamed`` (one key each, other names), ``role`` (several
        keys on a side), ``appeared`` or ``disappeared``."""
        if not self.base_keys:
            return "appeared"
        if not self.head_keys:
            return "disappeared"
        if self.base_keys == self.head_keys:
            return "both"
        if len(self.base_keys) == len(self.head_keys) == 1:
            return "renamed"
        return "role"


Node = tuple[str, str]  # ("b" | "h", key)


class _Groups:
    """Union-find over the keys of both sides, remembering the weakest stage of each group."""

    def __init__(self, nodes: list[Node]) -> None:
        self.parent = {n: n for n in nodes}
        self.stage: dict[Node, int] = {}

    def find(self, node: Node) -> Node:
        root = node
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[node] != root:
            self.parent[node], node = root, self.parent[node]
        return root

    def join(self, a: Node, b: Node, stage: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[rb] = ra
        self.stage[ra] = max(self.stage.get(ra, stage), self.stage.get(rb, stage), stage)

    def matched(self, node: Node) -> bool:
        """Whether the node's group has members on both sides."""
        return self.find(node) in self.stage


def _by_operator(sides: dict[str, Side], groups: _Groups, with_shapes: bool) -> None:
    """Unmatched keys launched by the same operator (and shapes) on both sides join."""
    stage = STAGES.index("operator+shapes" if with_shapes else "operator")
    keys = ["op", "shapes"] if with_shapes else ["op"]
    members: dict[tuple, dict[str, set[str]]] = defaultdict(lambda: {"b": set(), "h": set()})
    for tag, side in sides.items():
        if side.ops.height == 0:
            return
        ops = side.ops.filter(pl.col("op").is_not_null())
        if with_shapes:
            ops = ops.filter(pl.col("shapes").is_not_null())
        per = ops.group_by("key", *keys).agg(pl.col("n").sum())
        per = per.with_columns(share=pl.col("n") / pl.col("n").sum().over("key"))
        for row in per.filter(pl.col("share") >= OP_SHARE).iter_rows(named=True):
            if not groups.matched((tag, row["key"])):
                members[tuple(row[k] for k in keys)][tag].add(row["key"])
    for group in members.values():
        if group["b"] and group["h"]:
            nodes = [("b", k) for k in sorted(group["b"])] + [("h", k) for k in group["h"]]
            for node in nodes[1:]:
                groups.join(nodes[0], node, stage)


def _by_function(categories: dict[Node, str], groups: _Groups) -> None:
    """Unmatched keys of one category whose names differ only in templates and numbers."""
    members: dict[tuple[str, str], list[Node]] = defaultdict(list)
    for node, category in categories.items():
        if not groups.matched(node):
            members[(kernel_family(node[1]), category)].append(node)
    for nodes in members.values():
        if {n[0] for n in nodes} == {"b", "h"}:
            for node in nodes[1:]:
                groups.join(nodes[0], node, STAGES.index("function"))


Token = tuple  # ("g", root) for a matched group, ("b" | "h", key) for an unmatched key


def _node(tag: str, key: str, groups: _Groups) -> Token:
    """The token of a key: its group where matched, else the key itself."""
    node = (tag, key)
    return ("g", groups.find(node)) if groups.matched(node) else node


def _vote(a: list[Token], b: list[Token], votes: Counter, all_pairs: bool) -> None:
    """Votes between two aligned stretches (``a`` base, ``b`` head) for every pair with an
    unmatched end: position by position when they are as long, else all with all when
    ``all_pairs`` (a small replacement)."""
    if len(a) == len(b):
        pairs = list(zip(a, b))
    elif all_pairs:
        pairs = [(x, y) for x in a for y in b]
    else:
        return
    votes.update((x, y) for x, y in pairs if x[0] != "g" or y[0] != "g")


def _vote_by_category(
    a: list[Token], b: list[Token], categories: dict[Node, str], votes: Counter
) -> None:
    """A long replaced stretch, aligned again on its kernels' categories."""

    def cat(token: Token) -> str:
        return categories[token] if token[0] != "g" else categories[token[1]]

    cats_a, cats_b = [cat(t) for t in a], [cat(t) for t in b]
    for op, i1, i2, j1, j2 in SequenceMatcher(None, cats_a, cats_b, autojunk=False).get_opcodes():
        if op in ("equal", "replace"):
            small = i2 - i1 <= SMALL_STRETCH and j2 - j1 <= SMALL_STRETCH
            _vote(a[i1:i2], b[j1:j2], votes, small)


def _align_step(
    seq_b: list[str], seq_h: list[str], categories: dict[Node, str], groups: _Groups
) -> Counter:
    """The (base token, head token) votes of one pair of steps."""
    a = [_node("b", k, groups) for k in seq_b]
    b = [_node("h", k, groups) for k in seq_h]

    def token(t: Token) -> tuple:  # what the alignment compares: group, or category
        return t if t[0] == "g" else ("?", categories[t])

    votes: Counter = Counter()
    matcher = SequenceMatcher(None, [token(t) for t in a], [token(t) for t in b], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            _vote(a[i1:i2], b[j1:j2], votes, False)
        elif op == "replace":
            if i2 - i1 <= SMALL_STRETCH and j2 - j1 <= SMALL_STRETCH:
                _vote(a[i1:i2], b[j1:j2], votes, True)
            else:
                _vote_by_category(a[i1:i2], b[j1:j2], categories, votes)
    return votes


def _eligible(x: Token, y: Token, categories: dict[Node, str], fallback: set[Node]) -> bool:
    """Whether two aligned tokens (at least one an unmatched key) may join by place: the same
    category (or one unknown to the taxonomy), or a fallback kernel in another's place."""
    cats = [categories[t[1]] if t[0] == "g" else categories[t] for t in (x, y)]
    if cats[0] == cats[1] or any(t in fallback for t in (x, y)):
        return True
    # "other", a name the taxonomy does not know (a kernel renamed), may take the place of an
    # unmatched kernel of any category, never grow a role that names already matched
    return "other" in cats and x[0] != "g" and y[0] != "g"


def _by_order(
    base: Side,
    head: Side,
    categories: dict[Node, str],
    fallback: set[Node],
    groups: _Groups,
) -> None:
    """Unmatched keys that take the same place in the aligned steps join (module docstring)."""
    votes: Counter = Counter()
    seen: Counter = Counter()
    for seq_b, seq_h in zip(base.sequences, head.sequences):
        seq_b, seq_h = seq_b[:MAX_TOKENS], seq_h[:MAX_TOKENS]
        votes += _align_step(seq_b, seq_h, categories, groups)
        seen.update(_node("b", k, groups) for k in seq_b)
        seen.update(_node("h", k, groups) for k in seq_h)
    stage = STAGES.index("order")
    for (x, y), n in sorted(votes.items()):
        ends = [t for t in (x, y) if t[0] != "g"]
        if not ends or not _eligible(x, y, categories, fallback):
            continue
        if all(n >= VOTE_SHARE * seen[t] for t in ends):
            groups.join(x[1] if x[0] == "g" else x, y[1] if y[0] == "g" else y, stage)


def _operators(keys: list[tuple[str, str]], sides: dict[str, Side]) -> list[str]:
    """The operators that launched at least :data:`OP_SHARE` of ``keys``'s linked launches
    ((side tag, key) pairs), most launches first."""
    counts: Counter = Counter()
    for tag, side in sides.items():
        mine = [k for t, k in keys if t == tag]
        if side.ops.height and mine:
            rows = side.ops.filter(pl.col("key").is_in(mine) & pl.col("op").is_not_null())
            for op, n in rows.group_by("op").agg(pl.col("n").sum()).iter_rows():
                counts[op] += n
    total = sum(counts.values())
    return [op for op, n in counts.most_common() if n >= OP_SHARE * total]


def match_roles(base: Side, head: Side) -> list[Role]:
    """The roles of two sides (module docstring), base roles first, each in key order."""
    sides = {"b": base, "h": head}
    categories: dict[Node, str] = {}
    info: dict[Node, tuple[bool, float]] = {}
    for tag, side in sides.items():
        for key, category, fallback, ns in side.catalogue.iter_rows():
            categories[(tag, key)] = category or "other"
            info[(tag, key)] = (bool(fallback), float(ns or 0))
    groups = _Groups(list(categories))
    base_keys = {k for t, k in categories if t == "b"}
    for key in sorted(base_keys & {k for t, k in categories if t == "h"}):
        groups.join(("b", key), ("h", key), STAGES.index("name"))
    unmatched = {t for t, k in categories if not groups.matched((t, k))}
    if unmatched == {"b", "h"}:
        _by_operator(sides, groups, with_shapes=True)
        _by_operator(sides, groups, with_shapes=False)
        _by_function(categories, groups)
    has_head = len(categories) > len(base_keys)
    if base_keys and has_head and any(not groups.matched(n) for n in categories):
        fallback = {node for node, (flag, _) in info.items() if flag}
        _by_order(base, head, categories, fallback, groups)
    members: dict[Node, list[Node]] = defaultdict(list)
    for node in categories:
        members[groups.find(node)].append(node)
    roles = []
    for root, nodes in members.items():
        b = sorted(k for t, k in nodes if t == "b")
        h = sorted(k for t, k in nodes if t == "h")
        # the category of its busiest kernel, the base side's where it runs there
        busiest = max(nodes, key=lambda n: (n[0] == "b", info[n][1], n))
        stage = groups.stage.get(root)
        role = Role(
            b[0] if b else h[0],
            categories[busiest],
            any(info[n][0] for n in nodes),
            b,
            h,
            STAGES[stage] if stage is not None else None,
        )
        if role.presence != "both":
            role.ops = _operators(nodes, sides)
            role.op = role.ops[0] if role.ops else None
        roles.append(role)
    return sorted(roles, key=lambda r: (not r.in_base, r.key))
