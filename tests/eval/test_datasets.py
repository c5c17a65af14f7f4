"""Dataset format round trips and the converters, on the real WiCE and FABLES files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from veritrail.eval.datasets import (
    DatasetError,
    EvalDataset,
    chunk_article,
    fables_items,
    load_dataset,
    open_dataset,
    save_dataset,
    veritrail_layout_items,
    wice_items,
    wice_to_wice_indices,
)
from veritrail.method.segment import SentenceIndex, split_sentences
from veritrail.records import Verdict

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
WICE = DATA / "wice" / "data" / "entailment_retrieval" / "claim"
FABLES = DATA / "fables" / "FABLES.json"
needs_data = pytest.mark.skipif(not WICE.is_dir(), reason="shared/data not present")

FS, NFS = Verdict.FULLY_SUPPORTED, Verdict.NOT_FULLY_SUPPORTED


def _rows(split: str) -> list[dict[str, object]]:
    with (WICE / f"{split}.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize(("split", "n"), [("dev", 349), ("test", 358)])
def test_wice_converter_on_real_files(split: str, n: int) -> None:
    rows = _rows(split)
    items = wice_items(WICE / f"{split}.jsonl", sentences_per_chunk=8)
    assert len(items) == n == len(rows)
    expected = {"supported": FS, "partially_supported": NFS, "not_supported": NFS}
    for item, row in zip(items, rows, strict=True):
        (claim,) = item.claims
        assert claim.text == row["claim"]
        assert claim.label == expected[str(row["label"])]
        assert claim.meta["wice_label"] == row["label"]
        # Gold sets survive the mapping to (node, sentence) and back, exactly.
        # (Empty sets, as `[[]]` on some not_supported claims, carry no evidence and are dropped.)
        originals = [set(alt) for alt in row["supporting_sentences"] if alt]  # type: ignore[attr-defined]
        assert len(claim.gold_evidence) == len(originals)
        for gold, orig in zip(claim.gold_evidence, originals, strict=True):
            assert wice_to_wice_indices(item, gold) == orig
        # The DAG is single-step: roots are the article, the terminal is the claim sentence.
        ds = EvalDataset("w", [item])
        dag = ds.dag(item)
        assert dag.node(dag.terminal).text == row["claim"]
        assert {n.stage for n in dag} == {1, 2}
    counts = Counter(c.label for it in items for c in it.claims)
    assert sum(counts.values()) == n


@needs_data
def test_wice_root_sentences_are_the_article_sentences() -> None:
    row = _rows("dev")[0]
    (item,) = wice_items(WICE / "dev.jsonl", sentences_per_chunk=10, limit=1)
    ds = EvalDataset("w", [item])
    dag = ds.dag(item)
    index = SentenceIndex(dag)
    evidence = row["evidence"]
    assert isinstance(evidence, list)
    for i, keys in enumerate(item.meta["wice_sentence_map"]):
        pieces = [index.sentences(node)[s] for node, s in keys]
        assert " ".join(pieces) == " ".join(split_sentences(evidence[i]))


def test_chunk_article_handles_blank_and_multi_sentence_entries() -> None:
    sents = ["First one.", "   ", "Dr. Smith arrived. He sat down.", "# Heading", "Last."]
    ch = chunk_article(sents, per_chunk=2)
    assert [r["id"] for r in ch.records] == ["chunk-0", "chunk-1", "chunk-2"]
    assert ch.sentence_map[0] == (("chunk-0", 0),)
    assert ch.sentence_map[1] == ()  # blank: no sentence
    assert ch.sentence_map[2] == (("chunk-1", 0), ("chunk-1", 1))  # split in two by the segmenter
    assert ch.sentence_map[3] == (("chunk-1", 2),)
    assert ch.sentence_map[4] == (("chunk-2", 0),)
    with pytest.raises(ValueError):
        chunk_article(sents, per_chunk=0)


_sentence = st.text(
    alphabet=st.sampled_from(list("abcdefgh ABC.,?!:;'\"-#*0123456789")), min_size=0, max_size=40
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_sentence, min_size=1, max_size=12), st.integers(min_value=1, max_value=5))
def test_chunk_map_points_at_the_segmented_sentences(sents: list[str], per_chunk: int) -> None:
    """Property: every mapped key names a real sentence, and pieces come back in order."""
    try:
        ch = chunk_article(sents, per_chunk)
    except DatasetError:
        return  # the converter refuses rather than mislabel; the real data never triggers it
    texts = {r["id"]: split_sentences(r["text"]) for r in ch.records}
    flat = [k for ks in ch.sentence_map for k in ks]
    assert len(flat) == len(set(flat))
    for i, keys in enumerate(ch.sentence_map):
        assert (
            [texts[n][s] for n, s in keys] == split_sentences(sents[i])
            if sents[i].strip()
            else keys == ()
        )
    assert sum(len(v) for v in texts.values()) == len(flat)


@needs_data
def test_fables_converter_counts_and_surrogate_roots() -> None:
    items = fables_items(FABLES)
    raw = json.loads(FABLES.read_text(encoding="utf-8"))["FABLES"]
    labels = Counter(
        c["label"] for b in raw.values() for m in b.values() for c in m["claims"].values()
    )
    claims = [c for it in items for c in it.claims]
    assert len(claims) == sum(labels.values()) - labels["Inapplicable"]
    assert Counter(c.label for c in claims) == {
        FS: labels["Yes"],
        NFS: labels["No"] + labels["PartialSupport"],
    }
    item = items[0]
    dag = EvalDataset("f", [item]).dag(item)
    assert dag.node(dag.terminal).id == "summary"
    for c in item.claims:
        quotes = [
            q.strip()
            for q in raw[item.meta["book"]][item.meta["summarizer"]]["claims"][c.id]["evidence"]
        ]
        gold_nodes = {n for g in c.gold_evidence for n, _ in g}
        assert {dag.node(n).text for n in gold_nodes} == {q for q in quotes if q}


def test_format_round_trip(tmp_path: Path) -> None:
    doc = {
        "format": "veritrail-eval",
        "version": 1,
        "name": "tiny",
        "items": [
            {
                "id": "i1",
                "dag": {
                    "nodes": [
                        {
                            "id": "r1",
                            "text": "Alice founded Acme in 1990. It sells anvils.",
                            "sources": [],
                        },
                        {"id": "t", "text": "Acme was founded in 1990.", "sources": ["r1"]},
                    ]
                },
                "claims": [
                    {
                        "id": "c1",
                        "text": "Acme was founded in 1990.",
                        "label": "fully supported",
                        "gold_evidence": [
                            [{"node": "r1", "sentences": [0]}],
                            [{"node": "r1", "sentences": [0, 1]}],
                        ],
                    },
                    {"id": "c2", "text": "Acme sells rockets.", "label": "Not Fully Supported"},
                ],
            },
            {
                "id": "i2",
                "dag_path": "dag.json",
                "claims": [{"id": "c", "text": "x", "label": "Inconclusive"}],
            },
        ],
    }
    (tmp_path / "dag.json").write_text(
        json.dumps(
            {
                "nodes": [
                    {"id": "a", "text": "A.", "sources": []},
                    {"id": "b", "text": "B.", "sources": ["a"]},
                ]
            }
        )
    )
    src = tmp_path / "ds.json"
    src.write_text(json.dumps(doc))
    ds = load_dataset(src)
    assert ds.name == "tiny" and ds.n_claims == 3
    c1 = ds.items[0].claims[0]
    assert c1.label == FS
    assert c1.gold_evidence == (frozenset({("r1", 0)}), frozenset({("r1", 0), ("r1", 1)}))
    assert len(ds.dag(ds.items[1])) == 2
    for name in ("copy.json", "copy.jsonl"):
        save_dataset(ds, tmp_path / name)
        back = load_dataset(tmp_path / name)
        assert [it.claims for it in back.items] == [it.claims for it in ds.items]
    assert ds.head(1).n_claims == 1


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"id": "x", "claims": []}, "exactly one of"),
        ({"id": "x", "dag": {"nodes": []}, "dag_path": "d.json", "claims": []}, "exactly one of"),
        (
            {
                "id": "x",
                "dag": {"nodes": []},
                "claims": [{"id": "c", "text": "t", "label": "maybe"}],
            },
            "unknown verdict",
        ),
    ],
)
def test_format_errors_name_the_item(tmp_path: Path, item: dict[str, object], message: str) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(item) + "\n")
    with pytest.raises(DatasetError, match=message):
        load_dataset(p)


def test_veritrail_layout_with_shared_index(tmp_path: Path) -> None:
    # DiverseSumm+ shape: a shared index (stages 1-4) and one file of query nodes per question.
    index = {
        "nodes": [
            {"id": "chunk1", "text": "Rates rose in May.", "sources": [], "stage": 1},
            {"id": "chunk2", "text": "Unrelated text.", "sources": [], "stage": 1},
            {"id": "ent1", "text": "Rates: rose in May.", "sources": ["chunk1"], "stage": 2},
            {"id": "ent2", "text": "Other entity.", "sources": ["chunk2"], "stage": 2},
            {"id": "sum1", "text": "Rates rose.", "sources": ["ent1"], "stage": 3},
            {"id": "rep1", "text": "Report: rates rose in May.", "sources": ["sum1"], "stage": 4},
        ]
    }
    question = {
        "nodes": [
            {"id": "map1", "text": "Rates rose in May.", "sources": ["rep1"], "stage": 5},
            {"id": "answer", "text": "Rates rose in May.", "sources": ["map1"], "stage": 6},
        ]
    }
    (tmp_path / "dags").mkdir()
    (tmp_path / "index.json").write_text(json.dumps(index))
    (tmp_path / "dags" / "q1.json").write_text(json.dumps(question))
    rows = [
        {
            "dag": "q1",
            "id": "c1",
            "claim": "Rates rose in May.",
            "label": "All Parts are Supported",
        },
        {"dag": "q1", "id": "c2", "claim": "Rates fell.", "label": "At Least One Part is Refuted"},
        {
            "dag": "q1",
            "id": "c3",
            "claim": "Rates moved.",
            "label": "Conflicting Evidence with No Clear Resolution",
        },
        {"dag": "q1", "id": "c4", "claim": "???", "label": "I Don't Understand the Claim"},
    ]
    (tmp_path / "claims.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    items = veritrail_layout_items(tmp_path)
    assert len(items) == 1
    assert [(c.id, c.label) for c in items[0].claims] == [
        ("c1", FS),
        ("c2", NFS),
        ("c3", Verdict.INCONCLUSIVE),
    ]
    ds = open_dataset(str(tmp_path))
    dag = ds.dag(ds.items[0])
    # chunk2/ent2 never reach the answer and are pruned; stages are kept as given.
    assert {n.id for n in dag} == {"chunk1", "ent1", "sum1", "rep1", "map1", "answer"}
    assert dag.terminal == "answer" and dag.stage("answer") == 6
    with pytest.raises(DatasetError, match="missing"):
        (tmp_path / "dags" / "q1.json").unlink()
        veritrail_layout_items(tmp_path)


@pytest.mark.slow
@needs_data
def test_open_dataset_guesses_the_kind() -> None:
    ds = open_dataset(str(WICE / "dev.jsonl"), sentences_per_chunk=5)
    assert ds.name == "wice-dev" and ds.n_claims == 349
    assert open_dataset(f"fables:{FABLES}").meta["surrogate_roots"] is True


# -- the package (format, wice, fables, layout) ----------------------------------------------------

# Every public name `veritrail.eval.datasets` had when it was one module.
NAMES_BEFORE_THE_SPLIT = [
    "DatasetError",
    "EvalDataset",
    "EvalItem",
    "FABLES_LABELS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "GoldClaim",
    "LAYOUT_LABELS",
    "SentenceKey",
    "WICE_LABELS",
    "WiceChunking",
    "build_dag",
    "chunk_article",
    "claim_key",
    "fables_items",
    "item_to_json",
    "iter_claims",
    "load_dataset",
    "open_dataset",
    "parse_layout_label",
    "save_dataset",
    "veritrail_layout_items",
    "wice_items",
    "wice_to_wice_indices",
]


def test_every_name_of_the_old_module_still_imports() -> None:
    import importlib

    pkg = importlib.import_module("veritrail.eval.datasets")
    for name in NAMES_BEFORE_THE_SPLIT:
        assert getattr(pkg, name, None) is not None, name
        assert name in pkg.__all__, name
    for module in ("format", "wice", "fables", "layout"):
        mod = importlib.import_module(f"veritrail.eval.datasets.{module}")
        for name in mod.__all__:
            assert getattr(pkg, name) is getattr(mod, name), f"{module}.{name}"


def test_layout_labels_keep_the_fables_style_labels() -> None:
    from veritrail.eval.datasets import FABLES_LABELS, LAYOUT_LABELS, parse_layout_label

    # The layout reads FABLES's own labels too (its table borrows FABLES's mapping).
    assert {k: LAYOUT_LABELS[k] for k in ("yes", "no", "partialsupport", "inapplicable")} == {
        "yes": FS,
        "no": NFS,
        "partialsupport": NFS,
        "inapplicable": None,
    }
    for label, verdict in FABLES_LABELS.items():
        assert parse_layout_label(label) is verdict
        assert parse_layout_label(f"  {label.upper()} ") is verdict


def test_json_lines_readers_skip_blank_lines_and_count_them(tmp_path: Path) -> None:
    good = {"id": "i", "dag": {"nodes": [{"id": "a", "text": "A.", "sources": []}]}, "claims": []}
    p = tmp_path / "ds.ndjson"
    p.write_text(json.dumps(good) + "\n\n   \n" + json.dumps({"id": "x", "claims": 1}) + "\n")
    with pytest.raises(DatasetError, match=r"ds\.ndjson:4: "):
        load_dataset(p)

    (tmp_path / "claims.jsonl").write_text(
        "\n" + json.dumps({"dag": "q", "claim": "c", "label": "Yes"}) + "\n\n" + '{"dag": "q"}\n'
    )
    with pytest.raises(DatasetError, match=r"claims\.jsonl:4: "):
        veritrail_layout_items(tmp_path)
    # A claim without an id is numbered by its line, blank lines counted.
    (tmp_path / "claims.jsonl").write_text(
        "\n\n" + json.dumps({"dag": "q", "claim": "c", "label": "Yes"}) + "\n"
    )
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "q.json").write_text(
        json.dumps({"nodes": [{"id": "a", "text": "A.", "sources": []}]})
    )
    [item] = veritrail_layout_items(tmp_path)
    assert [c.id for c in item.claims] == ["claim-3"]
