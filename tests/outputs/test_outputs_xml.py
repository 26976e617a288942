"""hOCR 1.2 and ALTO v4 written from page trees: ALTO validated against the vendored
ALTO 4.4 schema (offline: the xlink import is mapped to the vendored copy and remote
access is refused), hOCR parsed as XML and held to the hOCR 1.2 structure and
properties grammar."""

from __future__ import annotations

import io
import re
from html.parser import HTMLParser
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from appliance.outputs.alto import to_alto
from appliance.outputs.hocr import to_hocr
from appliance.outputs.tree import PageTree, TextBlock, TextLine, pixel_box
from appliance.page import Word

DATA = Path(__file__).parents[1] / "data"
ALTO = "{http://www.loc.gov/standards/alto/ns-v4#}"
XHTML = "{http://www.w3.org/1999/xhtml}"
XLINK_URL = "http://www.loc.gov/standards/xlink/xlink.xsd"  # as alto-4-4.xsd imports it

TITLE = 'scan 中文 <2024> "Q3"; 50%.pdf'
UNPLACED = "UNPLACED-TEXT-MARKER nowhere on the page"
CHINESE = "中文识别测试"
SPECIAL = '<&">'


def document() -> list[PageTree]:
    """Two pages: one read (two blocks; a Chinese line; XML's special characters;
    confidences known, unknown, 0 and 1; text without positions), one failed."""
    heading = TextBlock(box=(100.4, 80.6, 900.2, 160.9), role="heading", lines=[
        TextLine(box=(100.4, 80.6, 900.2, 120.3), words=[
            Word("Invoice", (100.4, 80.6, 300.7, 120.3), 0.97),
            Word(SPECIAL, (320.2, 82.0, 420.9, 119.5), 0.5),
            Word("R&D's", (440.0, 81.0, 900.2, 120.0), None),
        ]),
        TextLine(box=(100.0, 125.0, 400.0, 160.9), words=[
            Word(CHINESE, (100.0, 125.0, 400.0, 160.9), 0.884),
        ]),
    ])
    body = TextBlock(box=(100.0, 200.0, 1100.5, 300.0), lines=[
        TextLine(box=(100.0, 200.0, 1100.5, 240.0), words=[
            Word("Total:", (100.0, 200.0, 220.0, 240.0), 1.0),
            Word("42,00\u00a0€", (260.0, 201.5, 420.0, 239.0), 0.0),
        ]),
    ])
    done = PageTree(number=1, width=1240, height=1754, dpi=150, status="done",
                    blocks=[heading, body], unplaced_text=UNPLACED)
    failed = PageTree(number=2, width=1240, height=1754, dpi=150, status="failed")
    return [done, failed]


def furnished(number: int = 3) -> PageTree:
    """A page with furniture (``reading.furniture``): a running header, the body, a
    footer and a page number on its own at the bottom."""
    def block(role, box, *words):
        return TextBlock(box=box, role=role, lines=[TextLine(box=box, role=role, words=[
            Word(text, word_box, 0.9) for text, word_box in words])])
    return PageTree(number=number, width=1240, height=1754, dpi=150, status="done", blocks=[
        block("header", (100, 40, 600, 70), ("Annual", (100, 40, 300, 70)),
              ("report", (320, 40, 600, 70))),
        block(None, (100, 200, 1100, 240), ("Body", (100, 200, 400, 240))),
        block("footer", (100, 1660, 700, 1690), ("ACME", (100, 1660, 700, 1690))),
        block("page_number", (600, 1700, 640, 1730), ("7", (600, 1700, 640, 1730))),
    ])


# every word of page 1: id, text, its box as the files must carry it (x0, y0, x1, y1:
# the float box's enclosing integer box), x_wconf, WC
WORDS = [
    ("word_1_1_1_1", "Invoice", (100, 80, 301, 121), 97, "0.97"),
    ("word_1_1_1_2", SPECIAL, (320, 82, 421, 120), 50, "0.5"),
    ("word_1_1_1_3", "R&D's", (440, 81, 901, 120), None, None),
    ("word_1_1_2_1", CHINESE, (100, 125, 400, 161), 88, "0.884"),
    ("word_1_2_1_1", "Total:", (100, 200, 220, 240), 100, "1"),
    ("word_1_2_1_2", "42,00\u00a0€", (260, 201, 420, 239), 0, "0"),
]
LINES = [
    ("line_1_1_1", (100, 80, 901, 121), ["word_1_1_1_1", "word_1_1_1_2", "word_1_1_1_3"]),
    ("line_1_1_2", (100, 125, 400, 161), ["word_1_1_2_1"]),
    ("line_1_2_1", (100, 200, 1101, 240), ["word_1_2_1_1", "word_1_2_1_2"]),
]
BLOCKS = [
    ("block_1_1", (100, 80, 901, 161), ["line_1_1_1", "line_1_1_2"]),
    ("block_1_2", (100, 200, 1101, 300), ["line_1_2_1"]),
]


@pytest.fixture(scope="module")
def alto_schema() -> xmlschema.XMLSchema:
    schema = xmlschema.XMLSchema(
        DATA / "alto-4-4.xsd", allow="local",  # nothing from the network
        uri_mapper={XLINK_URL: (DATA / "xlink.xsd").as_uri()})
    xlink = schema.maps.namespaces["http://www.w3.org/1999/xlink"]
    assert [Path(s.url.removeprefix("file://")) for s in xlink] == [DATA / "xlink.xsd"]
    return schema


# ---------------------------------------------------------------- ALTO


def _alto_position(element: ET.Element) -> tuple[int, int, int, int]:
    x, y = int(element.get("HPOS")), int(element.get("VPOS"))
    return x, y, x + int(element.get("WIDTH")), y + int(element.get("HEIGHT"))


def test_alto_validates_against_the_alto_4_4_schema(alto_schema):
    data = to_alto(TITLE, document())
    assert data.startswith(b'<?xml version="1.0" encoding="UTF-8"?>')
    alto_schema.validate(io.BytesIO(data))  # raises with the reason when invalid


def test_page_furniture_is_marked_in_hocr_and_stands_in_alto_margins(alto_schema):
    root = check_hocr(to_hocr(TITLE, [furnished(1)]))
    page = root.find(f"{XHTML}body")[0]
    assert [(div.get("class"), div.get("id")) for div in page] == [
        ("ocr_header", "block_1_1"), ("ocr_carea", "block_1_2"), ("ocr_footer", "block_1_3"),
        ("ocr_pageno", "block_1_4")]
    data = to_alto(TITLE, [furnished(1)])
    alto_schema.validate(io.BytesIO(data))
    layout_page = ET.fromstring(data).find(f"{ALTO}Layout/{ALTO}Page")
    assert [(space.tag.split("}")[1], [block.get("ID") for block in space]) for space in layout_page] == [
        ("TopMargin", ["block_1_1"]), ("BottomMargin", ["block_1_3", "block_1_4"]),
        ("PrintSpace", ["block_1_2"])]


def test_alto_carries_description_pages_words_and_positions():
    root = ET.fromstring(to_alto(TITLE, document()))
    assert root.tag == f"{ALTO}alto"
    assert root.get("SCHEMAVERSION") == "4.4"
    xsi = "{http://www.w3.org/2001/XMLSchema-instance}"
    schema_location = root.get(f"{xsi}schemaLocation")
    assert schema_location.split() == [
        "http://www.loc.gov/standards/alto/ns-v4#",
        "http://www.loc.gov/standards/alto/v4/alto-4-4.xsd"]

    description = root.find(f"{ALTO}Description")
    assert description.findtext(f"{ALTO}MeasurementUnit") == "pixel"
    assert description.findtext(f"{ALTO}sourceImageInformation/{ALTO}fileName") == TITLE
    software = description.find(
        f"{ALTO}OCRProcessing/{ALTO}ocrProcessingStep/{ALTO}processingSoftware")
    assert software.findtext(f"{ALTO}softwareName") == "ocr-appliance"

    pages = root.findall(f"{ALTO}Layout/{ALTO}Page")
    assert [(p.get("ID"), p.get("PHYSICAL_IMG_NR"), p.get("WIDTH"), p.get("HEIGHT"))
            for p in pages] == [("page_1", "1", "1240", "1754"),
                                ("page_2", "2", "1240", "1754")]
    space = pages[0].find(f"{ALTO}PrintSpace")
    assert _alto_position(space) == (0, 0, 1240, 1754)

    blocks = space.findall(f"{ALTO}TextBlock")
    assert [(b.get("ID"), _alto_position(b),
             [line.get("ID") for line in b.findall(f"{ALTO}TextLine")])
            for b in blocks] == BLOCKS
    lines = [line for b in blocks for line in b.findall(f"{ALTO}TextLine")]
    assert [(line.get("ID"), _alto_position(line),
             [s.get("ID") for s in line.findall(f"{ALTO}String")])
            for line in lines] == LINES

    strings = [s for line in lines for s in line.findall(f"{ALTO}String")]
    assert [(s.get("ID"), s.get("CONTENT"), _alto_position(s), s.get("WC"))
            for s in strings] == [(i, text, box, wc) for i, text, box, _, wc in WORDS]


def test_alto_puts_an_sp_over_the_gap_between_two_words():
    root = ET.fromstring(to_alto(TITLE, document()))
    line = root.find(f".//{ALTO}TextLine[@ID='line_1_1_1']")
    assert [child.tag.removeprefix(ALTO) for child in line] == [
        "String", "SP", "String", "SP", "String"]
    assert [(sp.get("HPOS"), sp.get("VPOS"), sp.get("WIDTH"))
            for sp in line.findall(f"{ALTO}SP")] == [("301", "80", "19"),
                                                     ("421", "80", "19")]
    single = root.find(f".//{ALTO}TextLine[@ID='line_1_1_2']")
    assert [child.tag.removeprefix(ALTO) for child in single] == ["String"]


def test_alto_failed_page_has_an_empty_print_space_and_unplaced_text_is_left_out():
    data = to_alto(TITLE, document())
    root = ET.fromstring(data)
    failed = root.find(f"{ALTO}Layout/{ALTO}Page[@ID='page_2']")
    assert [child.tag for child in failed] == [f"{ALTO}PrintSpace"]
    space = failed.find(f"{ALTO}PrintSpace")
    assert list(space) == [] and _alto_position(space) == (0, 0, 1240, 1754)
    assert UNPLACED.encode() not in data and b"UNPLACED" not in data


# ---------------------------------------------------------------- hOCR

# the hOCR 1.2 properties grammar (http://kba.github.io/hocr-spec/1.2/#grammar), and
# the property grammars of those this writer uses
ASCII_WORD = r"[\x21-\x3a\x3c-\x7e]+"  # printable, no space, no semicolon
DELIMITED = r'"[\x20\x21\x23-\x7e]+"'  # printable ASCII without '"', quoted
VALUE = rf"(?:{ASCII_WORD}|{DELIMITED})(?: +(?:{ASCII_WORD}|{DELIMITED}))*"
PAIR = rf"([a-z_]+) +({VALUE})"
PROPERTIES = re.compile(rf"{PAIR}(?: *; *{PAIR})*")
UINT = r"\d+"
PROPERTY_GRAMMAR = {
    "bbox": re.compile(rf"{UINT} {UINT} {UINT} {UINT}"),
    "image": re.compile(DELIMITED),
    "ppageno": re.compile(UINT),
    "scan_res": re.compile(rf"{UINT} {UINT}"),
    "x_wconf": re.compile(UINT),  # an integer, as Tesseract writes it, OCRmyPDF reads it
    "textangle": re.compile(r"90|180|270"),
}
# per class: the properties it must have, and those it may have besides
# a block is an ocr_carea, or the page's furniture: header, footer, page number
BLOCK_CLASSES = ("ocr_carea", "ocr_header", "ocr_footer", "ocr_pageno")
REQUIRED = {"ocr_page": {"bbox", "ppageno", "scan_res"}, "ocr_par": {"bbox"},
            "ocr_line": {"bbox"}, "ocrx_word": {"bbox"}, **{cls: {"bbox"} for cls in BLOCK_CLASSES}}
OPTIONAL = {"ocr_page": {"image"}, "ocr_line": {"textangle"}, "ocrx_word": {"x_wconf"}}
# per class: its tag and the class of its children (None: text only)
NESTING = {"ocr_page": ("div", BLOCK_CLASSES), "ocr_par": ("p", ("ocr_line",)),
           "ocr_line": ("span", ("ocrx_word",)), "ocrx_word": ("span", None),
           **{cls: ("div", ("ocr_par",)) for cls in BLOCK_CLASSES}}
ID_PATTERN = {"ocr_page": r"page_\d+", "ocr_par": r"par_\d+_\d+",
              "ocr_line": r"line_\d+_\d+_\d+", "ocrx_word": r"word_\d+_\d+_\d+_\d+",
              **{cls: r"block_\d+_\d+" for cls in BLOCK_CLASSES}}


def properties(title: str) -> dict[str, str]:
    """An hOCR title parsed by the spec's grammar; fails on anything outside it."""
    assert PROPERTIES.fullmatch(title), f"not hOCR properties: {title!r}"
    pairs = [part.split(" ", 1) for part in re.split(r" *; *(?=[a-z_]+ )", title)]
    names = [name for name, _ in pairs]
    assert len(set(names)) == len(names), f"a property repeats: {title!r}"
    parsed = {name: value.strip() for name, value in pairs}
    for name, value in parsed.items():
        assert PROPERTY_GRAMMAR[name].fullmatch(value), f"bad {name}: {value!r}"
    return parsed


def _bbox(props: dict[str, str]) -> tuple[int, ...]:
    return tuple(int(v) for v in props["bbox"].split())


def _hocr_elements(root: ET.Element) -> list[ET.Element]:
    return [e for e in root.iter() if e.get("class", "").startswith(("ocr_", "ocrx_"))]


def check_hocr(text: str) -> ET.Element:
    """Parse an hOCR document and hold it to hOCR 1.2: metadata, nesting, classes,
    ids, properties. Returns the root."""
    root = ET.fromstring(text)
    assert root.tag == f"{XHTML}html"
    head = root.find(f"{XHTML}head")
    assert head.find(f"{XHTML}title") is not None
    metas = {}
    for meta in head.findall(f"{XHTML}meta[@name]"):
        assert meta.get("name") not in metas, "metadata repeats"
        metas[meta.get("name")] = meta.get("content")
    assert metas["ocr-system"].split()[0] == "ocr-appliance"
    capabilities = metas["ocr-capabilities"].split()

    body = root.find(f"{XHTML}body")
    pages = list(body)
    assert pages and all(p.get("class") == "ocr_page" for p in pages)
    assert metas["ocr-number-of-pages"] == str(len(pages))

    elements = _hocr_elements(root)
    ids = [e.get("id") for e in elements]
    assert len(set(ids)) == len(ids), "ids repeat"
    for element in elements:
        cls = element.get("class")
        assert cls in capabilities, f"{cls} used but not declared"
        tag, child_class = NESTING[cls]
        assert element.tag == f"{XHTML}{tag}"
        assert re.fullmatch(ID_PATTERN[cls], element.get("id"))
        props = properties(element.get("title"))
        assert REQUIRED[cls] <= props.keys() <= REQUIRED[cls] | OPTIONAL.get(cls, set())
        if "x_wconf" in props:
            assert 0 <= int(props["x_wconf"]) <= 100
        x0, y0, x1, y1 = _bbox(props)
        assert x0 <= x1 and y0 <= y1
        for child in element:
            assert child.get("class") in child_class, f"{child_class} expected in {cls}"
            cx0, cy0, cx1, cy1 = _bbox(properties(child.get("title")))
            assert x0 <= cx0 <= cx1 <= x1 and y0 <= cy0 <= cy1 <= y1, "child outside"
        if child_class is None:
            assert len(element) == 0 and element.text
        else:  # only whitespace between the elements
            assert not (element.text or "").strip()
            assert all(not (child.tail or "").strip() for child in element)
    return root


def test_hocr_is_well_formed_hocr_1_2():
    text = to_hocr(TITLE, document() + [furnished()])
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    root = check_hocr(text)
    assert root.findtext(f"{XHTML}head/{XHTML}title") == TITLE
    capabilities = root.find(f"{XHTML}head/{XHTML}meta[@name='ocr-capabilities']")
    assert set(capabilities.get("content").split()) == {
        e.get("class") for e in _hocr_elements(root)}


def test_hocr_pages_carry_image_bbox_ppageno_scan_res():
    root = check_hocr(to_hocr(TITLE, document()))
    pages = root.findall(f"{XHTML}body/{XHTML}div")
    assert [(p.get("id"), properties(p.get("title"))) for p in pages] == [
        (f"page_{n}", {"image": '"scan %E4%B8%AD%E6%96%87 <2024> %22Q3%22%3B 50%25.pdf"',
                       "bbox": "0 0 1240 1754", "ppageno": str(n - 1),
                       "scan_res": "150 150"})
        for n in (1, 2)]


def test_hocr_carries_blocks_lines_words_and_their_boxes():
    root = check_hocr(to_hocr(TITLE, document()))
    page = root.find(f".//{XHTML}div[@id='page_1']")
    careas = page.findall(f"{XHTML}div")
    assert [(c.get("id"), _bbox(properties(c.get("title"))),
             [line.get("id") for line in c.iterfind(f".//{XHTML}span")
              if line.get("class") == "ocr_line"])
            for c in careas] == BLOCKS
    assert [p.get("id") for c in careas for p in c] == ["par_1_1", "par_1_2"]
    assert all(properties(p.get("title")) == properties(c.get("title"))
               for c in careas for p in c)
    lines = page.findall(f".//{XHTML}span[@class='ocr_line']")
    assert [(line.get("id"), _bbox(properties(line.get("title"))),
             [w.get("id") for w in line]) for line in lines] == LINES
    words = page.findall(f".//{XHTML}span[@class='ocrx_word']")
    assert [(w.get("id"), w.text, _bbox(properties(w.get("title"))),
             properties(w.get("title")).get("x_wconf"))
            for w in words] == [(i, text, box, None if conf is None else str(conf))
                                for i, text, box, conf, _ in WORDS]
    # the words of a line read apart, as the tree's line text
    tree_lines = [line for block in document()[0].blocks for line in block.lines]
    assert [" ".join("".join(line.itertext()).split()) for line in lines] == [
        " ".join(line.text.split()) for line in tree_lines]


def test_hocr_failed_page_is_empty_and_unplaced_text_is_left_out():
    text = to_hocr(TITLE, document())
    root = check_hocr(text)
    failed = root.find(f".//{XHTML}div[@id='page_2']")
    assert list(failed) == [] and not (failed.text or "").strip()
    assert UNPLACED not in text and "UNPLACED" not in text


class _HtmlNesting(HTMLParser):
    """Reads a document by HTML's rules, where "<div/>" opens a div (only void
    elements have no end tag), and records each hOCR element's chain of classes."""

    VOID = {"meta", "br", "hr", "img", "link", "input", "area", "base", "col", "embed",
            "source", "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack: list[tuple[str, str | None]] = []
        self.chains: list[list[str]] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        cls = dict(attrs).get("class")
        self.stack.append((tag, cls))
        if cls:
            self.chains.append([c for _, c in self.stack if c])

    handle_startendtag = handle_starttag  # HTML ignores the "/" of "<div ... />"

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1][0] == tag, f"</{tag}> closes nothing open"
        self.stack.pop()


def test_hocr_read_as_html_keeps_its_nesting():
    """A failed page's empty div is written open-and-closed, not "<div/>", so an HTML
    parser does not put the pages after it inside it."""
    text = to_hocr(TITLE, document()[::-1])  # the failed page first
    assert not re.search(r"<(?!meta )[a-z]+ [^>]*/>", text), "a non-void element short"
    parser = _HtmlNesting()
    parser.feed(text.split("\n", 1)[1])  # HTMLParser has no use for the XML declaration
    parser.close()
    assert parser.stack == []
    pages = [chain for chain in parser.chains if chain[-1] == "ocr_page"]
    assert pages == [["ocr_page"], ["ocr_page"]]
    words = [chain for chain in parser.chains if chain[-1] == "ocrx_word"]
    assert words == [["ocr_page", "ocr_carea", "ocr_par", "ocr_line", "ocrx_word"]] * 6


# ---------------------------------------------------------------- edges, both formats


def test_boxes_enclose_and_are_clipped_to_the_page():
    assert pixel_box((10.2, 5.9, 20.0000001, 30.5), 100, 100) == (10, 5, 20, 31)
    assert pixel_box((-3.5, -0.2, 120.4, 99.0), 100, 80) == (0, 0, 100, 80)
    assert pixel_box((50.0, 40.0, 10.0, 5.0), 100, 100) == (10, 5, 50, 40)  # reversed


def test_a_page_read_turned_gives_its_boxes_on_the_page_and_says_how_its_text_runs(
        alto_schema, tmp_path):
    """Read upright (100 x 200) from a page submitted on its side (200 x 100, turned
    a quarter counter-clockwise): the boxes are the page's, the text runs up it."""
    line = TextLine((10.0, 20.0, 90.0, 30.0), [Word("up", (10.0, 20.0, 50.0, 30.0), 0.5),
                                                Word("wards", (60.0, 20.0, 90.0, 30.0), 0.5)])
    page = PageTree(1, 200, 100, 150, "done", [TextBlock(line.box, [line])],
                    to_page=(0.0, 1.0, 0.0, -1.0, 0.0, 100.0))
    assert page.text_angle == 90

    text = to_hocr("turned.tif", [page])
    root = check_hocr(text)
    [span] = root.findall(f".//{XHTML}span[@class='ocr_line']")
    assert properties(span.get("title")) == {"bbox": "20 10 30 90", "textangle": "90"}
    words = root.findall(f".//{XHTML}span[@class='ocrx_word']")
    assert [_bbox(properties(w.get("title"))) for w in words] == [(20, 50, 30, 90),
                                                                  (20, 10, 30, 40)]
    from ocrmypdf.hocrtransform.hocr_parser import HocrParser

    path = tmp_path / "turned.hocr"
    path.write_text(text, encoding="utf-8")
    assert [parsed.textangle for parsed in HocrParser(path).parse().lines] == [90]

    data = to_alto("turned.tif", [page])
    alto_schema.validate(io.BytesIO(data))
    alto = ET.fromstring(data)
    assert alto.find(f".//{ALTO}Page").get("ROTATION") == "90"
    assert [_alto_position(s) for s in alto.iter(f"{ALTO}String")] == [(20, 50, 30, 90),
                                                                       (20, 10, 30, 40)]


def test_odd_input_still_makes_valid_files(alto_schema):
    """Off-page boxes, XML-illegal control characters, a NaN and an out-of-range
    confidence, a line without words, a block without lines, a failed page that still
    holds blocks, a page numbered out of order, an empty title."""
    page = PageTree(number=3, width=200, height=100, dpi=300, status="done", blocks=[
        TextBlock(box=(-5.0, -5.0, 250.0, 120.0), lines=[
            TextLine(box=(0.0, 0.0, 10.0, 10.0), words=[]),
            TextLine(box=(-5.0, 10.0, 250.0, 30.0), words=[
                Word("a\x00b\x1bc\ud800", (-5.0, 10.0, 60.0, 30.0), float("nan")),
                Word("tab\tnew\nline", (70.0, 10.0, 250.0, 30.0), 1.7),
            ]),
        ]),
        TextBlock(box=(0.0, 50.0, 20.0, 60.0), lines=[]),
    ])
    failed = PageTree(number=1, width=200, height=100, dpi=300, status="failed",
                      blocks=[TextBlock(box=(0.0, 0.0, 5.0, 5.0), lines=[
                          TextLine(box=(0.0, 0.0, 5.0, 5.0),
                                   words=[Word("ghost", (0.0, 0.0, 5.0, 5.0))])])])
    data = to_alto("", [page, failed])
    alto_schema.validate(io.BytesIO(data))
    root = ET.fromstring(data)
    strings = root.findall(f".//{ALTO}String")
    assert [(s.get("CONTENT"), _alto_position(s), s.get("WC")) for s in strings] == [
        ("a\ufffdb\ufffdc\ufffd", (0, 10, 60, 30), None),
        ("tab\tnew\nline", (70, 10, 200, 30), "1")]
    assert [line.get("ID") for line in root.iter(f"{ALTO}TextLine")] == ["line_3_1_2"]
    assert root.find(f".//{ALTO}TextBlock[@ID='block_3_2']") is not None
    assert b"ghost" not in data

    text = to_hocr("", [page, failed])
    hroot = check_hocr(text)
    words = hroot.findall(f".//{XHTML}span[@class='ocrx_word']")
    assert [(w.text, properties(w.get("title"))) for w in words] == [
        ("a\ufffdb\ufffdc\ufffd", {"bbox": "0 10 60 30"}),
        ("tab\tnew\nline", {"bbox": "70 10 200 30", "x_wconf": "100"})]
    assert "ghost" not in text
    page_props = properties(hroot.find(f".//{XHTML}div[@id='page_3']").get("title"))
    assert "image" not in page_props and page_props["ppageno"] == "2"


def test_no_pages_or_repeated_page_numbers_are_refused():
    with pytest.raises(ValueError):
        to_alto("t", [])
    with pytest.raises(ValueError):
        to_hocr("t", [])
    twice = [PageTree(number=1, width=1, height=1, dpi=72, status="failed")] * 2
    with pytest.raises(ValueError):
        to_alto("t", twice)
    with pytest.raises(ValueError):
        to_hocr("t", twice)


def test_hocr_is_read_by_a_real_hocr_parser(tmp_path):
    """OCRmyPDF's own hOCR reader (it reads the first page of a file) finds every line
    and word of page 1, with its text, box and confidence."""
    from ocrmypdf.hocrtransform.hocr_parser import HocrParser

    path = tmp_path / "page.hocr"
    path.write_text(to_hocr("scan.tif", document()[:1]), encoding="utf-8")
    page = HocrParser(path).parse()
    assert page.page_number == 0 and page.dpi == 150
    words = [(w.text, (w.bbox.left, w.bbox.top, w.bbox.right, w.bbox.bottom), w.confidence)
             for w in page.words]
    # the parser normalises text: a no-break space reads as a plain space
    assert words == [(text.replace("\u00a0", " "), box,
                      None if wconf is None else wconf / 100) for _id, text, box, wconf, _wc
                     in WORDS]
    assert len(page.lines) == len(LINES)
