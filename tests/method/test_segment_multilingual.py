"""Segmentation beyond English prose: CJK, German ordinals and abbreviations, JSON tool outputs,
Markdown tables, fenced code; CJK-aware token estimates. English must not move (test_segment.py
and benchmarks/bench_segment.py check that on real English text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from veritrail.dag import Dag
from veritrail.method.segment import SentenceIndex, _json_units, sentence_spans, split_sentences
from veritrail.method.tokens import estimate_tokens

FIXTURES = Path(__file__).parents[1] / "fixtures" / "multilingual"


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_chinese_fixture() -> None:
    assert split_sentences(_fixture("zh.txt")) == [
        "# 城市河流治理报告",
        "去年三月，暴雨导致河水上涨，沿岸的三个村庄被淹。",
        "所幸没有人员伤亡，但老石桥被冲毁了！",
        "市政府随即成立了专项小组。",
        "小组由水利局牵头，成员包括环保、交通和财政部门的负责人。",
        # Reported speech: the closing quote is followed by more of the same sentence.
        "“我们必须在汛期之前完成加固工程。”组长在第一次会议上说。",
        "新堤坝全长4.5公里，总投资约为2.3亿元。",  # decimals are not sentence ends
        "工程于今年六月完工，比原计划提前了两个月？",
        "不，是提前了一个月。",
        "居民们对结果基本满意。",
        "有人问：今后还会发生类似的洪水吗？",
        "专家认为，风险已经大大降低。",
    ]


def test_japanese_fixture() -> None:
    assert split_sentences(_fixture("ja.txt")) == [
        "# 図書館の新しいサービスについて",
        "市立図書館は、来月から電子書籍の貸し出しを始めます。",
        "利用者は自宅からでも本を借りられるようになります！",
        "館長の山田さんは「若い世代にもっと本を読んでほしい。」と話しました。",
        "対象となるのは約1万2千冊で、毎年500冊ずつ増やす予定です。",
        "貸し出し期間は二週間です。",
        "延長はできますか？",
        "はい、一回だけ延長できます。",
        "なお、紙の本の貸し出しはこれまでどおり続けます。",
        "詳しくは図書館のウェブサイトをご覧ください。",
    ]


def test_german_fixture() -> None:
    assert split_sentences(_fixture("de.txt")) == [
        "# Die Geschichte der Brücke",
        "Die alte Steinbrücke wurde am 3. Mai 1887 eröffnet.",
        "Sie verband die beiden Ortsteile, die bis dahin nur mit einer Fähre erreichbar waren.",
        "Im 19. Jahrhundert war der Verkehr noch gering.",
        "Nach dem 2. Weltkrieg stieg er jedoch stark an, u. a. wegen der neuen Fabrik am Fluss.",
        "Die Sanierung kostete ca. 4,5 Mio. Euro und dauerte bis zum 15. Oktober 2021.",
        "Die Stadt trug davon rund 1,2 Mio. Euro, den Rest zahlte das Land.",
        "Laut Bericht Nr. 7 der Bauverwaltung (vgl. Abb. 2) war das Fundament in gutem Zustand.",
        # A number that ends a sentence is not an ordinal ("war 3." is not "am 3.").
        "Die Zahl der Schäden lag bei 3.",
        "Danach wurde die Brücke wieder freigegeben.",
        "Heute überqueren sie täglich etwa 8.000 Fahrzeuge.",
        "Dr. Weber, die Leiterin des Projekts, ist zufrieden.",
    ]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # English keeps its cuts after numbers and month abbreviations, even with "und" inside.
        (
            "Sen. Warren left at 5 p.m. on Jan. 5. April was cold. The Sturm und Drang era ended.",
            [
                "Sen. Warren left at 5 p.m. on Jan. 5.",
                "April was cold.",
                "The Sturm und Drang era ended.",
            ],
        ),
        (
            "Sie kam am 1. Januar und ging. Er blieb.",
            ["Sie kam am 1. Januar und ging.", "Er blieb."],
        ),
        # Mixed CJK and English: the English part is still split by nupunkt.
        (
            "東京は日本の首都です。It is large. It is old.",
            ["東京は日本の首都です。", "It is large.", "It is old."],
        ),
        # Hard-wrapped CJK lines join without a space.
        ("这是一个很长的\n句子。下一句。", ["这是一个很长的句子。", "下一句。"]),
        ("价格是３．５元。好。", ["价格是３．５元。", "好。"]),
        ("真的吗?!当然。", ["真的吗?!", "当然。"]),
    ],
)
def test_language_cases(text: str, want: list[str]) -> None:
    assert split_sentences(text) == want


def test_json_tool_output_gives_one_unit_per_leaf_with_its_key_path() -> None:
    doc = {
        "weather": {"city": "Berlin", "temp_c": 21.5, "tags": ["sunny", "dry"], "alerts": []},
        "ok": True,
        "note": None,
        "summary": "The forecast is stable for the week. Wind stays below twenty kilometres.",
        "page views": 3,
        "raw": json.dumps({"source": "dwd", "rows": [{"id": 7}]}),
        "城市": "柏林",
    }
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    assert split_sentences(text) == [
        "weather.city: Berlin",
        "weather.temp_c: 21.5",
        "weather.tags[0]: sunny",
        "weather.tags[1]: dry",
        "weather.alerts: []",
        "ok: true",
        "note: null",
        # A long string is prose: its first sentence carries the key path.
        "summary: The forecast is stable for the week.",
        "Wind stays below twenty kilometres.",
        "page views: 3".replace("page views", '["page views"]'),
        # A string that holds JSON is unpacked.
        "raw.source: dwd",
        "raw.rows[0].id: 7",
        '["城市"]: 柏林',
    ]
    # Compact JSON gives the same units as pretty-printed JSON.
    assert split_sentences(json.dumps(doc)) == split_sentences(text)


def test_json_lines_and_arrays() -> None:
    assert split_sentences('{"a": 1}\n{"a": 2, "b": "x"}\n') == ["[0].a: 1", "[1].a: 2", "[1].b: x"]
    assert split_sentences('[{"q": "Who?"}, ["x"]]') == ["[0].q: Who?", "[1][0]: x"]


@pytest.mark.parametrize(
    "text",
    ["[1]", "[1, 2]", "[citation needed] It was big.", '{"unclosed": 1', "{}", "{a} b."],
)
def test_json_like_text_that_is_not_a_document_stays_prose(text: str) -> None:
    got = split_sentences(text)
    assert "".join("".join(s.split()) for s in got) == "".join(text.split())


def test_markdown_table_one_row_per_unit() -> None:
    text = (
        "Quarterly figures:\n\n| Quarter | Revenue |\n| --- | --- |\n| Q1 | 3.5 M |\n"
        "| Q2 | 4.1 M |\n\nRevenue grew."
    )
    assert split_sentences(text) == [
        "Quarterly figures:",
        "| Quarter | Revenue |",
        "| --- | --- |",
        "| Q1 | 3.5 M |",
        "| Q2 | 4.1 M |",
        "Revenue grew.",
    ]


def test_fenced_code_is_kept_whole() -> None:
    code = '```python\ndef area(r):\n    """Area. Of a circle."""\n\n    return 3.14 * r * r\n```'
    text = f"Use this. It works.\n{code}\nThen call it. Done.\n~~~\nplain\n~~~~\n```\nopen to the end. Yes."
    assert split_sentences(text) == [
        "Use this.",
        "It works.",
        code,  # line breaks and the blank line inside are kept
        "Then call it.",
        "Done.",
        "~~~\nplain\n~~~~",
        "```\nopen to the end. Yes.",  # an unclosed fence runs to the end of the text
    ]
    # ```inline``` on one line is not a fence.
    assert split_sentences("Run ```ls``` first. Then stop.") == [
        "Run ```ls``` first.",
        "Then stop.",
    ]


def test_sentence_index_over_a_json_node() -> None:
    dag = Dag.from_records(
        [
            {"id": "tool", "text": '{"temp_c": 21, "city": "Berlin"}'},
            {"id": "t", "text": "It is 21 degrees in Berlin.", "sources": ["tool"]},
        ]
    )
    assert SentenceIndex(dag).sentences("tool") == ("temp_c: 21", "city: Berlin")


def test_token_estimate_counts_cjk_characters() -> None:
    assert estimate_tokens("abcd" * 10) == 10  # English: unchanged, 4 characters per token
    assert estimate_tokens("Grüße aus München.") == (len("Grüße aus München.") + 3) // 4
    zh = _fixture("zh.txt")
    cjk = sum(
        1
        for c in zh
        if "\u3000" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef"
    )
    assert cjk > 150
    assert estimate_tokens(zh) == cjk + (len(zh) - cjk + 3) // 4
    assert estimate_tokens(zh) > len(zh) * 0.9  # was len/4 before: a 4x undercount


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=300))
def test_token_estimate_unchanged_for_ascii(text: str) -> None:
    assert estimate_tokens(text) == (len(text) + 3) // 4


_PIECES = [
    *"。！？．」”“「（）!?. \n",
    *("中文", "日本語", "am 3. Mai", " und ", "der 2. ", "Mio. ", "Euro", "```", "\n```\n", "|a|"),
    *("Die ", "bzw. ", "19.", "Jahrhundert", "x", "A"),
]


@given(st.lists(st.sampled_from(_PIECES), max_size=60).map("".join))
def test_sentences_cover_all_non_whitespace_in_order(text: str) -> None:
    assume(_json_units(text) is None)  # JSON units are not slices of the text
    sents = split_sentences(text)
    assert "".join("".join(s.split()) for s in sents) == "".join(text.split())
    assert all(s and s == s.strip() for s in sents)
    prev = 0
    for a, b in sentence_spans(text):
        assert prev <= a < b <= len(text)
        assert not text[prev:a].strip()
        prev = b
    assert not text[prev:].strip()
