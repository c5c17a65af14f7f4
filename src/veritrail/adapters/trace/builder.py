"""The walk over one trace's spans in time order that records the nodes (roots, generations, the
terminal) and links each generation to the texts its input holds (`Builder`; the rules are in
`build`'s module docstring)."""

from __future__ import annotations

import re
from collections.abc import Callable

from .calls import tool_call_text
from .index import Index
from .matching import STATS, Matcher, Node, common_words, document_frequencies
from .model import Kind, TraceError, TraceSpan
from .result import Ambiguity, Link, SpanNote
from .settings import MatchSettings
from .text import inside, normalize, occurrences, preview, word_count

# `Name(field=...` or `Name()`: how Python's dataclass and pydantic reprs begin; `<Name(...`
# and `<module.Name object at 0x...>`: a class's signature and the default repr.
_OBJECT_REPR = re.compile(r"^\s*[A-Z][\w.]*\((?:[a-z_]\w*=|\))")
_OTHER_REPR = re.compile(r"^\s*<[A-Za-z_][\w.]*(?:\(| object at 0x[0-9a-fA-F]+>)")


def _is_repr(text: str) -> bool:
    """A Python object's repr written where a chain's input was recorded (OpenInference's
    LlamaIndex workflows record their events so): no text from outside, never a root."""
    return bool(_OBJECT_REPR.match(text) or _OTHER_REPR.match(text))


def _rank(node: Node) -> int:
    return node.rank


class Builder:
    """One trace's spans → its nodes, links and notes (`build` turns them into the DAG).

    `build` walks the spans once, in time order; the attributes hold what it found: `nodes` by
    id (in creation order), `links`, `ambiguous`, `notes` (spans that gave no node, or not
    simply one), `no_text` (spans of kinds that never give a node, by kind) and `gen_of_span`
    (the node each generation span gave or repeated).
    """

    def __init__(self, spans: list[TraceSpan], settings: MatchSettings) -> None:
        self.spans = spans
        self.settings = settings
        df, n_texts = document_frequencies(
            t for s in spans for t in (*s.inputs, *s.outputs, *s.documents)
        )
        self.matcher = Matcher(
            settings,
            common_words(df, n_texts) if settings.fuzzy and settings.prefilter else frozenset(),
            df,
        )
        self.index = Index(self.matcher)
        self.nodes: dict[str, Node] = {}
        self.by_norm: dict[str, str] = {}
        self.counters: dict[str, int] = {}
        self.links: list[Link] = []
        self.ambiguous: list[Ambiguity] = []
        self.notes: list[SpanNote] = []
        self.no_text: dict[str, int] = {}
        self.gen_of_span: dict[str, str] = {}
        self.gen_ids: list[str] = []
        self.top_ids: set[str] = set()
        """The spans whose parent is not in the trace (`build` sets them)."""
        self.call_ids: list[str] = []
        """Nodes of tool calls (a call and its result), linked also by their result."""
        self.by_result: dict[str, str] = {}
        """A tool call's result (normalised) → its node."""
        self.repr_inputs = False
        """Whether a chain's input was an object's repr (skipped: `_is_repr`)."""
        self.chain_inputs = False
        """Whether a chain's (or the trace's top span's) input held text."""

    def _new_id(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        return f"{prefix}-{n}"

    def _note(self, s: TraceSpan, note: str) -> None:
        self.notes.append(SpanNote(s.id, s.name, str(s.kind), note))

    def _record(self, node: Node) -> None:
        """Add a new node: its id, its text's key, the indexes."""
        node.rank = len(self.nodes)
        self.nodes[node.id] = node
        self.by_norm[node.norm] = node.id
        self.index.add(node)

    def _add_root(
        self, text: str, origin: str, prefix: str, s: TraceSpan, at: tuple[int, int]
    ) -> None:
        norm = normalize(text)
        if not norm:
            return
        if norm in self.by_norm:
            return  # identical texts are one node
        nodes = self.nodes
        # Derived text: a text that carries the output of a generation that had finished.
        for nid in self.index.contained_in(norm):
            n = nodes[nid]
            if n.origin == "generation" and n.avail[0] <= at[0] and occurrences(norm, n.norm):
                return
        # Part of a text already recorded (a trimmed document, one field of an input): not new
        # text from outside; generations that read it are matched to the whole text. Only
        # inputs are checked: a document or a tool output is text from outside as it is.
        if origin == "input":
            hosts = self.index.containing(norm)
            for n in nodes.values() if hosts is None else (nodes[h] for h in hosts):
                if n.avail[0] <= at[0] and occurrences(n.norm, norm):
                    return
        nid = self._new_id(prefix)
        self._record(Node(nid, text.strip(), norm, origin, at, spans=[s.id], names=[s.name]))

    def _add_turn(self, text: str, s: TraceSpan) -> None:
        """An earlier user turn of the conversation in a prompt: what the user said is text from
        outside. Not when it holds recorded text (a template over a document, a generation's
        output): that text reaches the generation by itself."""
        norm = normalize(text)
        if not norm or norm in self.by_norm or word_count(text) < self.settings.min_root_words:
            return
        for nid in self.index.contained_in(norm):
            n = self.nodes[nid]
            if n.avail[0] <= s.start and occurrences(norm, n.norm):
                return
        self._add_root(text, "input", "turn", s, (s.start, -1))

    def _tool_call(self, s: TraceSpan, at: tuple[int, int]) -> None:
        """One root for a tool call whose arguments were recorded: the call and its result."""
        outputs = [o.strip() for o in s.outputs if o.strip()]
        text = tool_call_text(s.call, "\n\n".join(outputs) if outputs else None)
        before = len(self.nodes)
        self._add_root(text, "tool", "tool", s, at)
        if len(self.nodes) == before:
            return  # the same call and result again, or derived text
        node = next(reversed(self.nodes.values()))
        node.results = tuple(p for p in map(normalize, outputs) if p)
        self.call_ids.append(node.id)
        for part in node.results:
            self.by_result.setdefault(part, node.id)

    def _candidates(
        self, readable: Callable[[Node], bool], norm_input: str, folded: str
    ) -> tuple[list[Node], set[int]]:
        """The nodes `readable` accepts that may match this input, in creation order (every one
        without the prefilter, else those `Index` finds), and the sentences the input anchors."""
        if not self.settings.prefilter:
            return [n for n in self.nodes.values() if readable(n)], set()
        index = self.index
        ids = set(index.contained_in(norm_input))
        anchored = index.fuzzy_candidates(folded) if index.fuzzy else set()
        ids.update(index.sentence_node[number] for number in anchored)
        nodes = self.nodes
        out = sorted((n for n in map(nodes.__getitem__, ids) if readable(n)), key=_rank)
        STATS["pairs_skipped"] = STATS.get("pairs_skipped", 0) + len(nodes) - len(out)
        return out, anchored

    def _link(
        self, target_span: TraceSpan, raw_input: str, readable: Callable[[Node], bool]
    ) -> tuple[list[str], list[Link]]:
        norm_input = normalize(raw_input)
        folded = norm_input.casefold()
        found: dict[str, tuple[str, float, str, list[tuple[int, int]]]] = {}
        candidates, anchored = self._candidates(readable, norm_input, folded)
        for n in candidates:
            m = self.matcher.match(n, raw_input, norm_input, folded, anchored)
            if m is not None:
                found[n.id] = m
        # A tool call's node words the call its own way; the input holds the call's result.
        by_result = False
        for nid in self.call_ids:
            n = self.nodes[nid]
            if nid in found or not readable(n):
                continue
            occ = sorted(iv for part in n.results for iv in occurrences(norm_input, part))
            if occ:
                found[nid] = ("result", 100.0, "", occ)
                by_result = True
        if by_result:
            found = dict(sorted(found.items(), key=lambda kv: self.nodes[kv[0]].rank))
        # A node found only inside another matched node's occurrence reached the generation
        # through that node: no direct edge.
        keep: list[str] = []
        subsumed: dict[str, str] = {}
        for nid, (how, _, _, iv) in found.items():
            host = None
            for oid, (ohow, _, _, oiv) in found.items():
                if oid == nid or ohow == "fuzzy":
                    continue
                if all(any(inside(a, b, c, d, how == "fuzzy") for c, d in oiv) for a, b in iv):
                    host = oid
                    break
            if host is None:
                keep.append(nid)
            else:
                subsumed[nid] = host
        links = [Link(nid, "", found[nid][0], found[nid][1], found[nid][2]) for nid in keep]
        for nid, host in subsumed.items():
            if not self._derives(host, nid):
                self.ambiguous.append(
                    Ambiguity(
                        f"span {target_span.name} ({target_span.id})",
                        (nid, host),
                        f"{nid}'s text appears in the input only inside {host}'s, which does "
                        f"not derive from it; linked to {host} only",
                    )
                )
        for i, a in enumerate(keep):
            for b in keep[i + 1 :]:
                if any(
                    x < d and c < y and not (x >= c and y <= d) and not (c >= x and d <= y)
                    for x, y in found[a][3]
                    for c, d in found[b][3]
                ):
                    self.ambiguous.append(
                        Ambiguity(
                            f"span {target_span.name} ({target_span.id})",
                            (a, b),
                            "their matches overlap in the input; both linked",
                        )
                    )
        return keep, links

    def _derives(self, nid: str, ancestor: str) -> bool:
        """Whether `ancestor` is an ancestor of `nid` (a direct source is checked first: the
        usual case, and a walk of the whole ancestry per link would be quadratic)."""
        sources = self.nodes[nid].sources
        if ancestor in sources:
            return True
        seen = {nid}
        stack = list(sources)
        while stack:
            cur = stack.pop()
            if cur == ancestor:
                return True
            if cur not in seen:
                seen.add(cur)
                stack.extend(self.nodes[cur].sources)
        return False

    def ancestors(self, nid: str) -> set[str]:
        """`nid` and every node it derives from."""
        seen = {nid}
        stack = [nid]
        while stack:
            for s in self.nodes[stack.pop()].sources:
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return seen

    def _generation(self, s: TraceSpan) -> None:
        out_text = "\n\n".join(t.strip() for t in s.outputs if t.strip())
        if not out_text:
            self._note(s, "LLM span with no output text: no node")
            return
        raw_input = "\n\n".join(s.inputs)
        start = (s.start, s.seq)
        # A conversation's earlier user turns; the last one too for a call that is the trace's
        # top (no chain's input holds it). One user message at the top: the prompt is the root.
        top = s.id in self.top_ids
        for turn in (s.turns if len(s.turns) > 1 else ()) if top else s.turns[:-1]:
            self._add_turn(turn, s)
        agent_without_inputs = not self.chain_inputs and self.counters.get("tool", 0) > 0
        if not top and s.turns and (self.repr_inputs or agent_without_inputs):
            # The last turn too when no chain's input can hold the user's message as text: the
            # chains recorded theirs as objects' reprs (skipped; LlamaIndex's agents) or, in a
            # trace with tool calls, recorded none (the OpenAI Agents SDK's agent and turn
            # spans). Not in a plain trace without chain inputs: a prompt that matches nothing
            # there is a root whole, its system messages (often the context) included.
            self._add_turn(s.turns[-1], s)

        def readable(n: Node) -> bool:
            # Finished before this generation started (texts from outside: by then).
            return n.avail < start or (n.origin != "generation" and n.avail[0] <= s.start)

        keep, links = self._link(s, raw_input, readable)
        if not keep:
            if not raw_input.strip():
                self._note(s, "LLM span without input text and nothing to link: skipped")
                return
            self._add_root(raw_input, "prompt", "prompt", s, (s.start, -1))
            pid = self.by_norm.get(normalize(raw_input))
            if pid is None:  # pragma: no cover - _add_root refused it as derived text
                self._note(s, "LLM input matched no recorded text: skipped")
                return
            self._note(s, f"its input matched no recorded text: the whole prompt became root {pid}")
            keep, links = [pid], [Link(pid, "", "exact", 100.0)]
        norm = normalize(out_text)
        existing = self.by_norm.get(norm)
        if existing is not None:
            node = self.nodes[existing]
            if node.origin != "generation":
                self._note(s, f"its output repeats {node.origin} text {existing}: no new node")
                self.gen_of_span[s.id] = existing
                return
            self._note(s, f"its output repeats generation {existing}: merged into it")
        else:
            nid = self._new_id("gen")
            node = Node(nid, out_text, norm, "generation", (s.end, s.seq))
            self._record(node)
            self.gen_ids.append(nid)
        node.spans.append(s.id)
        node.names.append(s.name)
        for src in keep:
            if src not in node.sources and src != node.id:
                node.sources.append(src)
        self.links += [Link(k.source, node.id, k.how, k.score, k.sentences) for k in links]
        self.gen_of_span[s.id] = node.id

    def build(self) -> tuple[str, list[str]]:
        """Process the spans in time order; returns (terminal id, top-level span ids)."""
        ids = {s.id for s in self.spans}
        top = [s for s in self.spans if s.parent_id is None or s.parent_id not in ids]
        top_ids = self.top_ids = {s.id for s in top}
        # (time, phase, seq): ends before starts at the same instant, so a generation that ended
        # when a chain started is there for the derived-text check.
        events: list[tuple[int, int, int, str, TraceSpan]] = []
        for s in self.spans:
            events.append((s.start, 1, s.seq, "start", s))
            events.append((s.end, 0, s.seq, "end", s))
        events.sort(key=lambda e: (e[0], e[1], e[2]))
        for t, _, _, what, s in events:
            if what == "start":
                if s.kind in (Kind.CHAIN, Kind.AGENT) or (
                    s.id in top_ids and s.kind is not Kind.LLM
                ):
                    for leaf in s.inputs:
                        if _is_repr(leaf):
                            self.repr_inputs = True
                            continue
                        self.chain_inputs = True
                        if s.id in top_ids or word_count(leaf) >= self.settings.min_root_words:
                            self._add_root(leaf, "input", "input", s, (t, -1))
                continue
            if s.kind is Kind.LLM:
                self._generation(s)
            elif s.kind in (Kind.RETRIEVER, Kind.RERANKER):
                for d in s.documents:
                    self._add_root(d, "document", "doc", s, (t, s.seq))
            elif s.kind is Kind.TOOL and s.call:
                self._tool_call(s, (t, s.seq))
            elif s.kind is Kind.TOOL:
                for o in s.outputs:
                    self._add_root(o, "tool", "tool", s, (t, s.seq))
            elif s.kind not in (Kind.CHAIN, Kind.AGENT):
                self.no_text[str(s.kind)] = self.no_text.get(str(s.kind), 0) + 1
        gens = [n for n in self.nodes.values() if n.origin == "generation"]
        if not gens:
            raise TraceError("the trace has no LLM generation with output text: no DAG")
        return self._terminal(top), [s.id for s in top]

    def _terminal(self, top: list[TraceSpan]) -> str:
        last = max(top, key=lambda s: (s.end, s.seq))
        leaves = [t for t in last.outputs if normalize(t)]
        gen_ids = set(self.gen_ids)
        if not leaves:
            tid = max((self.nodes[g] for g in self.gen_ids), key=lambda n: n.avail).id
            self.notes.append(
                SpanNote(
                    last.id,
                    last.name,
                    str(last.kind),
                    f"no final output: terminal is the last generation {tid}",
                )
            )
            return tid
        # An agent's final state lists its messages: a tool's result there is its call's node.
        hits = [self.by_norm.get(k, self.by_result.get(k)) for k in map(normalize, leaves)]
        gen_hits = list(dict.fromkeys(h for h in hits if h in gen_ids))
        whole = "\n\n".join(t.strip() for t in leaves)
        if len(gen_hits) == 1 and all(h is not None for h in hits):
            return gen_hits[0]
        existing = self.by_norm.get(normalize(whole))
        if existing in gen_ids:
            return str(existing)
        # The final output is text of its own (joined, post-processed): a node linked like a
        # generation to the generation nodes it contains.
        pseudo = TraceSpan(
            last.id, None, last.trace_id, last.name, Kind.LLM, last.end, last.end, last.seq + 1
        )
        keep, links = self._link(pseudo, whole, lambda n: n.origin == "generation")
        if existing is None and _OBJECT_REPR.match(whole):
            # An object's repr, not text (a LlamaIndex workflow's `StopEvent(result=...)`, often
            # cut short by the instrumentation): the answer is the generation it holds, the
            # last one when it holds none whole.
            tid = max((self.nodes[g] for g in keep or self.gen_ids), key=lambda n: n.avail).id
            self.notes.append(
                SpanNote(
                    last.id,
                    last.name,
                    str(last.kind),
                    f"final output is an object's repr ({preview(whole)!r}): terminal is "
                    f"generation {tid}",
                )
            )
            return tid
        if not keep:
            if existing is not None:
                raise TraceError(
                    f"the trace's final output is the {self.nodes[existing].origin} text {existing}, "
                    "not derived from any LLM generation"
                )
            raise TraceError(
                f"the trace's final output ({preview(whole)!r}) contains no LLM generation's "
                "text: cannot tell which generation produced it"
            )
        nid = "output"
        node = Node(nid, whole, normalize(whole), "output", (last.end, last.seq + 1), list(keep))
        node.spans.append(last.id)
        node.names.append(last.name)
        self._record(node)
        self.links += [Link(k.source, nid, k.how, k.score, k.sentences) for k in links]
        return nid


__all__ = ["Builder"]
