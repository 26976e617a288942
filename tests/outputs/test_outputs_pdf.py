"""The searchable PDF: real files through img2pdf, OCRmyPDF's fpdf2 renderer and
pikepdf, read back with pdfium (the appliance's own renderer): the text extracts as
written, each word where its box is on the page as rendered (also on a page turned by
/Rotate), the page's pixels and content as they were, PDF/A-2b declared with an sRGB
output intent and validated, and pages without a text layer said to be so."""

from __future__ import annotations

import concurrent.futures
import ctypes
import io
from pathlib import Path

import numpy as np
import pikepdf
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest
from PIL import Image

from appliance.errors import EncryptedPdf
from appliance.outputs.pdf import PAGES_WITHOUT_TEXT_KEY, device_to_user, searchable_pdf
from appliance.outputs.tree import PageTree, TextBlock, TextLine
from appliance.page import Word
from appliance.raster import render_page
from appliance.raster.synthetic import render_text_page, sample_lines, text_page_words
from tests.fixtures.documents import write_encrypted_pdf, write_pdf

DPI = 150
MAX_PIXELS = 10**9
CJK_LINE = "中文识别测试 发票 金额"


# --- helpers ---------------------------------------------------------------------------


def tree_for(number: int, lines: list[str], size: tuple[int, int], dpi: int = DPI,
             font_size: int = 36) -> PageTree:
    """The page tree an engine that read ``render_text_page(lines)`` perfectly would
    give: one block, a line per text line, each word at its ink box."""
    words = iter(text_page_words(lines, font_size=font_size))
    text_lines = []
    for line in lines:
        placed = [Word(text, tuple(float(v) for v in box), 0.9)
                  for text, box in (next(words) for _ in line.split())]
        text_lines.append(TextLine(union(w.box for w in placed), placed))
    return PageTree(number, size[0], size[1], dpi, "done",
                    [TextBlock(union(line.box for line in text_lines), text_lines)])


def union(boxes):
    boxes = list(boxes)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))


def iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    whole = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / whole if whole > 0 else 0.0


def page_texts(data: bytes) -> list[str]:
    doc = pdfium.PdfDocument(data)
    try:
        texts = []
        for page in doc:
            textpage = page.get_textpage()
            texts.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return texts
    finally:
        doc.close()


def text_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def extracted_boxes(data: bytes, index: int, tree: PageTree) -> list[tuple[str, tuple]]:
    """Each of the tree's words found in the page's extracted text (in order), with the
    union of its characters' boxes mapped by pdfium onto the page rendered at the
    tree's size (pdfium applies the page's /Rotate and CropBox itself)."""
    doc = pdfium.PdfDocument(data)
    page = doc[index]
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()

        def device(x, y):
            dx, dy = ctypes.c_int(), ctypes.c_int()
            pdfium_c.FPDF_PageToDevice(page.raw, 0, 0, tree.width, tree.height, 0, x, y,
                                       ctypes.byref(dx), ctypes.byref(dy))
            return dx.value, dy.value

        found, cursor = [], 0
        for word in (w for block in tree.blocks for line in block.lines for w in line.words):
            at = text.find(word.text, cursor)
            if at < 0:
                found.append((word.text, None))
                continue
            cursor = at + len(word.text)
            corners = []
            for char in range(at, at + len(word.text)):
                left, bottom, right, top = textpage.get_charbox(char)
                corners += [device(left, top), device(right, bottom)]
            xs, ys = [p[0] for p in corners], [p[1] for p in corners]
            found.append((word.text, (min(xs), min(ys), max(xs), max(ys))))
        return found
    finally:
        textpage.close()
        page.close()
        doc.close()


def assert_words_in_place(data: bytes, index: int, tree: PageTree) -> float:
    """IoU >= 0.5 between extracted and true word boxes for >= 95 % of the words."""
    truth = [w.box for block in tree.blocks for line in block.lines for w in line.words]
    found = extracted_boxes(data, index, tree)
    scores = [iou(box, true) if box is not None else 0.0
              for (_, box), true in zip(found, truth)]
    share = sum(score >= 0.5 for score in scores) / len(scores)
    assert share >= 0.95, (share, [(t, b, s) for (t, b), s in zip(found, scores) if s < 0.5])
    return share


def embedded_image(data: bytes, index: int) -> pikepdf.Stream:
    with pikepdf.open(io.BytesIO(data)) as pdf:
        (image,) = pdf.pages[index].get_images().values()
        return image.read_raw_bytes(), pikepdf.PdfImage(image).as_pil_image(), image.get("/Filter")


def rendered(data: bytes, index: int, size: tuple[int, int]) -> np.ndarray:
    """The page rendered by pdfium stretched over exactly ``size`` pixels."""
    doc = pdfium.PdfDocument(data)
    page = doc[index]
    try:
        bitmap = pdfium.PdfBitmap.new_native(size[0], size[1], pdfium_c.FPDFBitmap_BGR)
        pdfium_c.FPDFBitmap_FillRect(bitmap.raw, 0, 0, size[0], size[1], 0xFFFFFFFF)
        pdfium_c.FPDF_RenderPageBitmap(bitmap.raw, page.raw, 0, 0, size[0], size[1], 0, 0)
        return np.asarray(bitmap.to_pil().convert("RGB")).astype(int)
    finally:
        page.close()
        doc.close()


def metadata(data: bytes) -> tuple[dict, dict, list]:
    with pikepdf.open(io.BytesIO(data)) as pdf:
        with pdf.open_metadata() as meta:
            xmp = {key: meta.get(key) for key in ("pdfaid:part", "pdfaid:conformance",
                                                   "dc:description")}
        info = {str(key): str(value) for key, value in pdf.docinfo.items()}
        intents = [{"S": str(intent.get("/S")),
                    "id": str(intent.get("/OutputConditionIdentifier")),
                    "icc": bytes(intent.DestOutputProfile.read_bytes())}
                   for intent in pdf.Root.get("/OutputIntents", [])]
        return xmp, info, intents


@pytest.fixture(scope="module")
def png_page(tmp_path_factory) -> tuple[Path, list[str], Image.Image]:
    lines = sample_lines(7, count=16)
    image = render_text_page(lines)
    path = tmp_path_factory.mktemp("png") / "page.png"
    image.save(path, format="PNG", dpi=(DPI, DPI))
    return path, lines, image


# --- 1 and 2: an image page: text, positions, pixels -------------------------------------


def test_image_page_text_lands_on_its_words_and_pixels_stay(png_page):
    path, lines, image = png_page
    tree = tree_for(1, lines, image.size)
    data, report = searchable_pdf(path, "png", [tree])

    assert report == {"output_type": "pdfa-2", "pdfa_error": None, "pages_with_text": [1],
                      "pages_without_text": [], "replaced_text": []}
    assert text_lines(page_texts(data)[0]) == lines
    assert_words_in_place(data, 0, tree)
    # the PNG's pixels, losslessly (Flate), at the image's own resolution
    _raw, pixels, filter_ = embedded_image(data, 0)
    assert filter_ == "/FlateDecode"
    assert np.array_equal(np.asarray(pixels.convert("RGB")), np.asarray(image))
    with pikepdf.open(io.BytesIO(data)) as pdf:
        box = [float(v) for v in pdf.pages[0].mediabox]
    assert box == pytest.approx([0, 0, image.width * 72 / DPI, image.height * 72 / DPI])
    # and as displayed: the invisible text changes no pixel beyond pdfium's resampling
    # of an image whose page size in points is not a whole number
    plain = rendered(searchable_pdf(path, "png", [PageTree(1, *image.size, DPI, "failed")])[0],
                     0, image.size)
    assert np.array_equal(rendered(data, 0, image.size), plain)
    assert np.abs(plain - np.asarray(image)).mean() < 3


def test_jpeg_passes_through_and_exif_turn_is_the_pages(tmp_path):
    """A phone photo stored turned with EXIF orientation 6: the JPEG is embedded as it
    is (its bytes), the page is turned by /Rotate like the appliance turned it, and the
    text lies on the upright page the appliance read."""
    lines = sample_lines(3, count=10)
    upright = render_text_page(lines)
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "photo.jpg"
    upright.transpose(Image.Transpose.ROTATE_90).save(path, format="JPEG", quality=90,
                                                       exif=exif.tobytes(), dpi=(DPI, DPI))
    read = render_page(path, "jpeg", 0, DPI, MAX_PIXELS)
    assert read.size == upright.size
    tree = tree_for(1, lines, read.size)
    data, report = searchable_pdf(path, "jpeg", [tree])

    assert report["output_type"] == "pdfa-2" and report["pages_with_text"] == [1]
    raw, _pixels, filter_ = embedded_image(data, 0)
    assert filter_ == "/DCTDecode" and raw == path.read_bytes()
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert int(pdf.pages[0].obj.Rotate) == 90
    assert text_lines(page_texts(data)[0]) == lines
    assert_words_in_place(data, 0, tree)
    assert np.abs(rendered(data, 0, read.size) - np.asarray(read)).mean() < 3


def test_mirroring_exif_is_embedded_as_the_appliance_read_it(tmp_path):
    """EXIF orientation 2 (mirrored), which /Rotate cannot say: the page is embedded as
    the appliance rendered it, losslessly."""
    lines = sample_lines(4, count=6)
    upright = render_text_page(lines)
    exif = Image.Exif()
    exif[0x0112] = 2
    path = tmp_path / "mirrored.png"
    upright.transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(path, format="PNG",
                                                             exif=exif.tobytes())
    read = render_page(path, "png", 0, DPI, MAX_PIXELS)
    assert np.array_equal(np.asarray(read), np.asarray(upright))
    tree = tree_for(1, lines, read.size, dpi=300)  # no dpi stated: the appliance's 300
    data, report = searchable_pdf(path, "png", [tree])

    _raw, pixels, _filter = embedded_image(data, 0)
    assert np.array_equal(np.asarray(pixels.convert("RGB")), np.asarray(upright))
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert [float(v) for v in pdf.pages[0].mediabox] == pytest.approx(
            [0, 0, upright.width * 72 / 300, upright.height * 72 / 300])
    assert text_lines(page_texts(data)[0]) == lines
    assert_words_in_place(data, 0, tree)


def test_multipage_tiff_gives_a_page_per_frame(tmp_path):
    pages = [sample_lines(seed, count=5) for seed in (11, 12, 13)]
    frames = [render_text_page(lines).convert("L") for lines in pages]
    path = tmp_path / "scan.tif"
    frames[0].save(path, format="TIFF", save_all=True, append_images=frames[1:],
                   compression="tiff_deflate", dpi=(DPI, DPI))
    trees = [tree_for(n + 1, lines, frames[n].size) for n, lines in enumerate(pages)]
    data, report = searchable_pdf(path, "tiff", trees)

    assert report["pages_with_text"] == [1, 2, 3]
    for index, lines in enumerate(pages):
        assert text_lines(page_texts(data)[index]) == lines
        assert_words_in_place(data, index, trees[index])
        _raw, pixels, _filter = embedded_image(data, index)
        assert np.array_equal(np.asarray(pixels), np.asarray(frames[index]))


# --- 3: a PDF, one page turned by /Rotate ------------------------------------------------


def test_pdf_pages_keep_their_content_and_text_lands_on_the_turned_page(tmp_path):
    """Four scanned pages; the second stored sideways and shown upright by /Rotate 90
    (as a scanner does). The appliance renders each page as pdfium displays it; the
    text must land on the words there, and the pages' content stay byte for byte."""
    pages = [sample_lines(seed, count=12) for seed in (21, 22, 23, 24)]
    source = write_pdf(tmp_path / "scan.pdf", pages, dpi=DPI)
    turned = tmp_path / "turned.pdf"
    with pikepdf.open(source) as pdf:
        page = pdf.pages[1]
        (name, image), = page.get_images().items()
        upright = pikepdf.PdfImage(image).as_pil_image()
        stored = upright.transpose(Image.Transpose.ROTATE_90)  # a quarter turn back
        replacement = pikepdf.Stream(pdf, stored.convert("RGB").tobytes())
        replacement.Type, replacement.Subtype = pikepdf.Name.XObject, pikepdf.Name.Image
        replacement.Width, replacement.Height = stored.width, stored.height
        replacement.ColorSpace, replacement.BitsPerComponent = pikepdf.Name.DeviceRGB, 8
        page.Resources.XObject[name] = replacement
        width, height = (float(v) for v in page.mediabox[2:])
        page.MediaBox = [0, 0, height, width]
        page.Contents = pikepdf.Stream(pdf, b"q %.4f 0 0 %.4f 0 0 cm %s Do Q"
                                       % (height, width, str(name).encode()))
        page.Rotate = 90
        pdf.save(turned)

    trees = []
    for index, lines in enumerate(pages):
        read = render_page(turned, "pdf", index, DPI, MAX_PIXELS)
        if index == 1:  # the appliance sees the page upright
            upright = render_text_page(lines)
            assert read.width in (upright.width, upright.width + 1)
            shown = np.asarray(read.resize((155, 219), Image.Resampling.BOX)).astype(int)
            like = np.asarray(upright.resize((155, 219), Image.Resampling.BOX)).astype(int)
            assert np.abs(shown - like).mean() < 2
        trees.append(tree_for(index + 1, lines, read.size))
    data, report = searchable_pdf(turned, "pdf", trees)

    assert report["output_type"] == "pdfa-2" and report["pages_with_text"] == [1, 2, 3, 4]
    texts = page_texts(data)
    for index, lines in enumerate(pages):
        assert text_lines(texts[index]) == lines
        assert_words_in_place(data, index, trees[index])
    with pikepdf.open(turned) as before, pikepdf.open(io.BytesIO(data)) as after:
        assert len(after.pages) == 4
        for old, new in zip(before.pages, after.pages):
            assert new.obj.get("/Rotate") == old.obj.get("/Rotate")
            assert list(new.mediabox) == list(old.mediabox)
            old_contents = [old.obj.Contents] if isinstance(old.obj.Contents, pikepdf.Stream) \
                else list(old.obj.Contents)
            new_contents = list(new.obj.Contents)
            assert len(new_contents) == len(old_contents) + 1  # the text layer, first
            assert b" Do Q" in new_contents[0].read_bytes()
            assert [s.read_bytes() for s in new_contents[1:]] == \
                [s.read_bytes() for s in old_contents]
            old_images = {k: v.read_raw_bytes() for k, v in old.get_images().items()}
            new_images = {k: v.read_raw_bytes() for k, v in new.get_images().items()}
            assert new_images == old_images


def _device_to_page_by_pdfium(data: bytes, index: int, width: int, height: int) -> np.ndarray:
    doc = pdfium.PdfDocument(data)
    page = doc[index]
    try:
        def to_page(x, y):
            px, py = ctypes.c_double(), ctypes.c_double()
            pdfium_c.FPDF_DeviceToPage(page.raw, 0, 0, width, height, 0, x, y,
                                       ctypes.byref(px), ctypes.byref(py))
            return px.value, py.value

        return np.array([to_page(x, y) for x, y in
                         ((0, 0), (width, 0), (0, height), (width, height), (37, 91))])
    finally:
        page.close()
        doc.close()


@pytest.mark.parametrize("rotate", [0, 90, 180, 270, -90, 450, 45])
@pytest.mark.parametrize("boxes", [
    {"MediaBox": [0, 0, 612, 792]},
    {"MediaBox": [-50, -30, 700, 900], "CropBox": [10, 20, 500, 640]},
    {"MediaBox": [0, 0, 600, 800], "CropBox": [-100, 400, 300, 1000]},  # beyond: clipped
    {"MediaBox": [600, 800, 0, 0]},  # corners in the wrong order
    {"MediaBox": [0, 0, 595, 842], "CropBox": [0, 0, 0, 0]},  # an empty CropBox
], ids=["letter", "offset-crop", "crop-beyond-media", "reversed", "empty-crop"])
@pytest.mark.parametrize("inherited", [False, True], ids=["own", "inherited"])
def test_device_to_user_is_pdfiums_own(boxes, rotate, inherited):
    """The pixel -> user space map computed from the page dictionary is the one pdfium
    uses to render (FPDF_DeviceToPage), for any boxes and /Rotate, also when they are
    inherited from the page tree."""
    pdf = pikepdf.new()
    pdf.add_blank_page()
    page = pdf.pages[0].obj
    holder = pdf.Root.Pages if inherited else page
    for key in ("MediaBox", "CropBox"):
        if key in page:
            del page[pikepdf.Name("/" + key)]
    for key, value in boxes.items():
        holder[pikepdf.Name("/" + key)] = pikepdf.Array(value)
    holder.Rotate = rotate
    out = io.BytesIO()
    pdf.save(out)
    data = out.getvalue()
    with pikepdf.open(io.BytesIO(data), inherit_page_attributes=False) as reread:
        for width, height in ((1275, 1650), (1001, 777)):
            ours = device_to_user(reread.pages[0].obj, width, height)
            points = np.array([(0, 0), (width, 0), (0, height), (width, height), (37, 91)],
                              dtype=float)
            mapped = (np.column_stack([points, np.ones(len(points))]) @ ours.T)[:, :2]
            theirs = _device_to_page_by_pdfium(data, 0, width, height)
            assert mapped == pytest.approx(theirs, abs=1e-3)


# --- 4: CJK ------------------------------------------------------------------------------


def test_words_whose_boxes_touch_are_drawn_apart(png_page):
    """An engine's word boxes may touch (split at the spaces of the line's box); the
    text layer leaves a gap between the words, or extractors that find spaces by the
    gaps (pdftotext) join them."""
    path, _lines, image = png_page
    words = [Word(text, (100.0 + 150 * i, 100.0, 250.0 + 150 * i, 140.0), 0.9)
             for i, text in enumerate(["Searchable", "archive", "copy"])]
    line = TextLine((100.0, 100.0, 550.0, 140.0), words)
    tree = PageTree(1, *image.size, DPI, "done", [TextBlock(line.box, [line])])
    data, _report = searchable_pdf(path, "png", [tree])
    boxes = [box for _text, box in extracted_boxes(data, 0, tree)]
    assert all(after[0] - before[2] >= 40 / 10 for before, after in zip(boxes, boxes[1:]))
    assert all(iou(box, word.box) >= 0.5 for box, word in zip(boxes, words))


def test_chinese_extracts_as_written(tmp_path):
    """CJK words in the glyphless font (no CJK font is bundled or needed: the text is
    invisible): the characters of a word together, nothing inserted; two CJK words
    joined as OCRmyPDF's renderer joins them (CJK puts no spaces between words), a
    space where one side is not CJK."""
    lines = [CJK_LINE, "合计 1,234.56 元", "Invoice 中文 mixed"]
    image = render_text_page(lines)
    path = tmp_path / "cjk.png"
    image.save(path, format="PNG", dpi=(DPI, DPI))
    tree = tree_for(1, lines, image.size)
    data, report = searchable_pdf(path, "png", [tree])

    assert report["output_type"] == "pdfa-2"
    assert text_lines(page_texts(data)[0]) == ["中文识别测试发票金额", "合计 1,234.56 元",
                                               "Invoice 中文 mixed"]
    assert_words_in_place(data, 0, tree)


def test_a_column_of_vertical_text_has_each_character_on_its_own(tmp_path):
    """A column of CJK set vertically (its characters, each a word, one under the
    other): each character's text lies on its box, not along one baseline."""
    image = Image.new("RGB", (600, 900), "white")
    path = tmp_path / "vertical.png"
    image.save(path, format="PNG", dpi=(DPI, DPI))
    characters = [Word(ch, (400.0, 100.0 + 60 * i, 448.0, 148.0 + 60 * i), 0.99)
                  for i, ch in enumerate("床前明月光疑是地上霜")]
    column = TextLine((400.0, 100.0, 448.0, 688.0), characters)
    heading = TextLine((60.0, 100.0, 300.0, 136.0), [Word("静夜思", (60.0, 100.0, 300.0, 136.0))])
    tree = PageTree(1, *image.size, DPI, "done", [TextBlock(column.box, [column]),
                                                  TextBlock(heading.box, [heading])])
    data, _report = searchable_pdf(path, "png", [tree])

    assert "".join(page_texts(data)[0].split()) == "床前明月光疑是地上霜静夜思"
    assert_words_in_place(data, 0, tree)


# --- 5: PDF/A ----------------------------------------------------------------------------


@pytest.mark.parametrize("output_type,part", [("pdfa-2", "2"), ("pdfa-3", "3")])
def test_pdfa_is_declared_with_an_srgb_output_intent_and_validates(png_page, output_type, part):
    path, lines, image = png_page
    data, report = searchable_pdf(path, "png", [tree_for(1, lines, image.size)],
                                  output_type=output_type)

    assert report["output_type"] == output_type and report["pdfa_error"] is None
    xmp, info, intents = metadata(data)
    assert xmp["pdfaid:part"] == part and xmp["pdfaid:conformance"] == "B"
    assert len(intents) == 1
    assert intents[0]["S"] == "/GTS_PDFA1" and intents[0]["id"] == "sRGB"
    assert intents[0]["icc"][36:40] == b"acsp" and intents[0]["icc"][16:20] == b"RGB "
    assert info[PAGES_WITHOUT_TEXT_KEY] == ""
    # validated again from the bytes, by pikepdf's PDF/A validator (veraPDF's rules)
    validated = pikepdf.pdfa.validate_written(io.BytesIO(data), f"{part}b")
    # (failed once in ~20 runs of the suite, not again in 400 runs of this step alone:
    # the findings say which rule, the next time)
    assert validated.verdict == "pass", validated.summary()
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert not pdf.is_encrypted


def test_a_pdf_that_cannot_be_pdfa_is_written_plain_and_says_why(tmp_path):
    """A born-digital PDF whose font is not embedded cannot be PDF/A without
    Ghostscript: a plain PDF, the reason in the report, and no PDF/A claim in it. Its
    page shows text of its own, which it keeps: no second layer."""
    from fpdf import FPDF

    document = FPDF(unit="pt", format=(595, 842))
    document.add_page()
    document.set_font("helvetica", size=24)
    document.text(100, 100, "Hello born digital")
    path = tmp_path / "born.pdf"
    document.output(str(path))
    tree = PageTree(1, 1240, 1754, DPI, "done", [TextBlock((200, 200, 500, 240), [
        TextLine((200, 200, 500, 240), [Word("scanned", (200, 200, 340, 240)),
                                        Word("words", (360, 200, 500, 240))])])])
    data, report = searchable_pdf(path, "pdf", [tree])

    assert report["output_type"] == "pdf"
    assert report["pdfa_error"].startswith("PDF/A-2b: ")
    assert "not embedded" in report["pdfa_error"]
    assert page_texts(data)[0].strip() == "Hello born digital"
    assert report["pages_without_text"] == [{"page": 1, "reason": "own text"}]
    xmp, _info, _intents = metadata(data)
    assert xmp["pdfaid:part"] is None


def test_an_opening_page_and_zoom_do_not_keep_a_pdf_from_pdfa(tmp_path):
    """/OpenAction [page /Fit] is a viewer's hint the validator does not check: it is
    removed from the PDF/A, kept in a plain PDF."""
    pages = [sample_lines(41, count=4)]
    source = tmp_path / "open.pdf"
    with pikepdf.open(write_pdf(tmp_path / "scan.pdf", pages, dpi=DPI)) as pdf:
        pdf.Root.OpenAction = pikepdf.Array([pdf.pages[0].obj, pikepdf.Name.Fit])
        pdf.save(source)
    size = render_page(source, "pdf", 0, DPI, MAX_PIXELS).size
    trees = [tree_for(1, pages[0], size)]
    data, report = searchable_pdf(source, "pdf", trees)
    assert report["output_type"] == "pdfa-2"
    plain, report = searchable_pdf(source, "pdf", trees, output_type="pdf")
    with pikepdf.open(io.BytesIO(data)) as pdfa, pikepdf.open(io.BytesIO(plain)) as pdf:
        assert "/OpenAction" not in pdfa.Root and "/OpenAction" in pdf.Root


# --- 6: pages without a text layer; plain PDF -------------------------------------------


def test_failed_and_unplaced_pages_get_no_text_layer_and_the_metadata_says_so(tmp_path):
    pages = [sample_lines(seed, count=6) for seed in (31, 32, 33, 34)]
    source = write_pdf(tmp_path / "four.pdf", pages, dpi=DPI)
    size = render_page(source, "pdf", 0, DPI, MAX_PIXELS).size
    trees = [tree_for(1, pages[0], size),
             PageTree(2, 0, 0, 300, "failed"),
             PageTree(3, *size, DPI, "done", unplaced_text="\n".join(pages[2])),
             PageTree(4, *size, DPI, "done")]  # read; nothing on it
    for output_type in ("pdfa-2", "pdf"):
        data, report = searchable_pdf(source, "pdf", trees, output_type=output_type)

        assert report == {"output_type": output_type, "pdfa_error": None,
                          "pages_with_text": [1],
                          "pages_without_text": [{"page": 2, "reason": "failed"},
                                                 {"page": 3, "reason": "no positions"},
                                                 {"page": 4, "reason": "no text"}],
                          "replaced_text": []}
        texts = page_texts(data)
        assert text_lines(texts[0]) == pages[0]
        assert texts[1:] == ["", "", ""]
        with pikepdf.open(io.BytesIO(data)) as pdf, pikepdf.open(source) as before:
            for number in (2, 3, 4):  # not even an empty text layer
                page, old = pdf.pages[number - 1].obj, before.pages[number - 1].obj
                assert isinstance(page.Contents, pikepdf.Stream)
                assert page.Contents.read_bytes() == old.Contents.read_bytes()
                assert set(page.Resources.XObject.keys()) == set(old.Resources.XObject.keys())
        xmp, info, intents = metadata(data)
        expected = "2 (failed), 3 (no positions), 4 (no text)"
        assert info[PAGES_WITHOUT_TEXT_KEY] == expected
        assert expected in str(xmp["dc:description"])
        if output_type == "pdf":
            assert xmp["pdfaid:part"] is None and intents == []
        else:
            assert xmp["pdfaid:part"] == "2"


def test_a_plain_pdf_does_not_keep_the_originals_pdfa_claim(png_page, tmp_path):
    """A "pdf" output is not validated: a PDF/A claim of the original's goes."""
    path, lines, image = png_page
    tree = tree_for(1, lines, image.size)
    pdfa = tmp_path / "pdfa.pdf"
    pdfa.write_bytes(searchable_pdf(path, "png", [tree])[0])
    assert metadata(pdfa.read_bytes())[0]["pdfaid:part"] == "2"
    plain, report = searchable_pdf(pdfa, "pdf", [tree], output_type="pdf")
    assert report["output_type"] == "pdf"
    assert metadata(plain)[0]["pdfaid:part"] is None
    assert lines[0] in page_texts(plain)[0]


def test_a_page_without_a_tree_is_not_read(png_page):
    path, _lines, _image = png_page
    _data, report = searchable_pdf(path, "png", [])
    assert report["pages_without_text"] == [{"page": 1, "reason": "not read"}]
    with pytest.raises(ValueError):
        searchable_pdf(path, "png", [PageTree(2, 10, 10, DPI, "failed")])
    with pytest.raises(ValueError):
        searchable_pdf(path, "png", [], output_type="pdf/x")


def test_a_searchable_pdf_made_before_keeps_its_layer_and_gets_no_second(png_page, tmp_path):
    """A searchable PDF submitted again (its text in a form) keeps its text, which
    extracts once; a scanned page after it gets its layer."""
    path, lines, image = png_page
    searchable = tmp_path / "searchable.pdf"
    searchable.write_bytes(searchable_pdf(path, "png", [tree_for(1, lines, image.size)])[0])
    scanned_lines = sample_lines(31, count=6)
    both = tmp_path / "both.pdf"
    with pikepdf.open(searchable) as pdf, \
            pikepdf.open(write_pdf(tmp_path / "scan.pdf", [scanned_lines], dpi=DPI)) as scan:
        pdf.pages.extend(scan.pages)
        pdf.save(both)
    trees = [tree_for(1, lines, image.size),
             tree_for(2, scanned_lines, render_page(both, "pdf", 1, DPI, MAX_PIXELS).size)]
    trees[0].own_text = True  # read from that layer (engines.pdf_text trusted it)

    data, report = searchable_pdf(both, "pdf", trees)
    assert report["pages_with_text"] == [2]
    assert report["pages_without_text"] == [{"page": 1, "reason": "own text"}]
    assert report["replaced_text"] == []
    texts = page_texts(data)
    assert text_lines(texts[0]) == lines  # once, not twice
    assert text_lines(texts[1]) == scanned_lines

    # read by OCR instead (the layer distrusted, or ignored): the earlier invisible layer
    # (in a form the page draws) gives way to this reading, which extracts once
    again = sample_lines(32, count=len(lines))
    trees[0] = tree_for(1, again, image.size)
    data, report = searchable_pdf(both, "pdf", trees)
    assert (report["pages_with_text"], report["replaced_text"]) == ([1, 2], [1])
    assert report["pages_without_text"] == []
    assert text_lines(page_texts(data)[0]) == again


def test_a_wrong_invisible_ocr_layer_is_replaced_and_visible_text_never(tmp_path):
    """A scan under a scanner's wrong invisible layer (in the page's own content), read
    by OCR: the searchable PDF has the OCR reading in its place, the page's pixels as
    they were. A page of visible text read by OCR (its font has no Unicode map) keeps
    its text: nothing visible is taken off a page."""
    import random

    from appliance.measure import born_digital

    for maker, name in ((lambda rng: born_digital.ocr_layer(rng, wrong=True), "layer"),
                        (born_digital.without_tounicode, "visible")):
        data, truth = maker(random.Random("1"))
        path = tmp_path / f"{name}.pdf"
        path.write_bytes(data)
        lines = text_lines(next(iter(truth.values())))
        before = page_texts(data)[0]
        size = render_page(path, "pdf", 0, DPI, MAX_PIXELS).size
        out, report = searchable_pdf(path, "pdf", [tree_for(1, lines, size)])
        text = page_texts(out)[0]
        if name == "layer":
            assert (report["pages_with_text"], report["replaced_text"]) == ([1], [1])
            # the reading's words (placed as a page of another layout would have them)
            assert set(" ".join(lines).split()) <= set(text.split()), text
            garbled = set(before.split()) - set(" ".join(lines).split())
            assert garbled and not garbled & set(text.split()), text
            # the scan is drawn as before
            assert np.array_equal(np.asarray(render_page(path, "pdf", 0, 50, MAX_PIXELS)),
                                  np.asarray(render_page(_saved(tmp_path, out), "pdf", 0, 50,
                                                         MAX_PIXELS)))
        else:
            assert report["pages_without_text"] == [{"page": 1, "reason": "own text"}]
            assert report["replaced_text"] == [] and text == before


def _saved(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "out.pdf"
    path.write_bytes(data)
    return path


# --- encrypted input; threads ------------------------------------------------------------


def test_an_encrypted_pdf_opens_with_its_password_and_the_output_is_not_encrypted(tmp_path):
    path = write_encrypted_pdf(tmp_path / "locked.pdf", user_password="secret")
    size = render_page(path, "pdf", 0, DPI, MAX_PIXELS, password="secret").size
    tree = PageTree(1, *size, DPI, "done", [TextBlock((100, 100, 600, 140), [
        TextLine((100, 100, 600, 140), [Word("confidential", (100, 100, 330, 140)),
                                        Word("contract", (360, 100, 600, 140))])])])
    data, report = searchable_pdf(path, "pdf", [tree], password="secret")

    assert report["pages_with_text"] == [1]
    with pikepdf.open(io.BytesIO(data)) as pdf:
        assert not pdf.is_encrypted
    assert text_lines(page_texts(data)[0]) == ["confidential contract"]
    assert_words_in_place(data, 0, tree)
    for wrong in (None, "guess"):
        with pytest.raises(EncryptedPdf):
            searchable_pdf(path, "pdf", [tree], password=wrong)


def test_calls_in_threads_give_what_one_call_gives(png_page):
    path, lines, image = png_page
    tree = tree_for(1, lines, image.size)
    alone = page_texts(searchable_pdf(path, "png", [tree])[0])
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: searchable_pdf(path, "png", [tree]), range(8)))
    assert all(page_texts(data) == alone and report["output_type"] == "pdfa-2"
               for data, report in results)


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (20000, 40)])
def test_an_image_of_any_size_makes_a_pdf_page_readers_accept(tmp_path, size):
    """PDF pages are 3 to 14,400 points a side: a tiny or huge image is wrapped at the
    resolution that makes it one (the fuzzer's 1-pixel WebP made the export fail)."""
    path = tmp_path / "odd.png"
    Image.new("RGB", size, "white").save(path)
    data, report = searchable_pdf(path, "png", [PageTree(1, size[0], size[1], 300, "done")])
    with pikepdf.open(io.BytesIO(data)) as pdf:
        x0, y0, x1, y1 = (float(v) for v in pdf.pages[0].mediabox)
    assert 3 <= x1 - x0 <= 14400 and 3 <= y1 - y0 <= 14400
    assert report["output_type"] == "pdfa-2"
