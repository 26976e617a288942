"""Born-digital PDF pages read from their own text (``engines.pdf_text``) through the
worker's real page pipeline (``stages.run_job``, the real classic engine): which reader
each page gets and why, a PDF built to trip each check, the result cache, and a mixed
document through a real daemon."""

from __future__ import annotations

import random
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from PIL import Image, ImageChops

from appliance.config import PdfSettings, load_settings
from appliance.engines import pdf_text
from appliance.engines.cache import ResultCache
from appliance.engines.classic import ClassicEngine
from appliance.engines.messages import Job, PageDone
from appliance.intake.spool import Spool
from appliance.library import Library
from appliance.measure import born_digital
from appliance.measure.evaluate import _tables
from appliance.measure.metrics import cer, table_similarity
from appliance.measure.synthetic_sets import FONTS
from appliance.pipeline.stages import PagePipeline, PageSettings, run_job
from appliance.raster import render_page
from appliance.store import Database
from tests.daemon import Daemon
from tests.fixtures.documents import (ARTICLE_END, EXTENSION_B_LINES, JOURNAL_HEADERS,
                                      LOOSE_LINE, SHORT_COLUMNS, TURNED_ROWS,
                                      write_article_end_pdf, write_chinese_journal_pdf,
                                      write_extension_b_pdf, write_png, write_turned_pdf,
                                      write_two_column_report_pdf)


@pytest.fixture(scope="module")
def engine():
    engine = ClassicEngine(threads=2)
    yield engine
    engine.close()


def _pdf(tmp_path, maker, name: str = "doc", seed: str = "1"):
    data, truth = maker(random.Random(seed))
    path = tmp_path / f"{name}.pdf"
    path.write_bytes(data)
    return path, next(iter(truth.values()))


def _read(engine, path, *, page: int = 0, mode: str = "auto", cache=None,
          kind: str = "pdf", pdf: PdfSettings = PdfSettings()) -> PageDone:
    pipeline = PagePipeline(engine, PageSettings(pdf=pdf), cache)
    job = Job(job_id=1, original=path, kind=kind, page_index=page, dpi=200,
              max_pixels=40_000_000, page_image=path.with_suffix(f".{page}.seen.png"),
              doc_type="report", engine=None, attempt=1, pdf_password=None, deadline_s=120,
              text_layer=mode)
    with ThreadPoolExecutor(1) as background:
        done = run_job(pipeline, job, background)
    assert isinstance(done, PageDone), done
    return done


def _verdict(done: PageDone) -> dict:
    return done.recognition.provenance["text_layer"]


@pytest.mark.parametrize("maker", [born_digital.one_column, born_digital.two_columns,
                                   born_digital.cjk, born_digital.ocr_layer])
def test_a_trusted_page_is_read_exactly_from_its_own_text(tmp_path, engine, maker):
    path, truth = _pdf(tmp_path, maker)
    done = _read(engine, path)
    verdict = _verdict(done)
    assert (verdict["reader"], verdict["reason"]) == ("text", "trusted"), verdict
    assert all(check["passed"] for check in verdict["checks"].values())
    assert (done.engine, done.model_id) == (pdf_text.NAME, pdf_text.model_id())
    assert cer(truth, done.recognition.text) <= 0.002, done.recognition.text
    # it needs no review, and every line has its words with boxes on the rendered page
    assert done.confidence == 1.0 and done.signals["source"] == "text_layer"
    width, height = done.recognition.provenance["rendered"]["size"]
    assert done.recognition.provenance["preprocess"] == []
    for line in done.recognition.lines:
        assert line.words and 0 <= line.box[0] < line.box[2] <= width
        assert 0 <= line.box[1] < line.box[3] <= height
    assert "inference_ms" not in done.timings_ms and "text_layer_ms" in done.timings_ms


def test_tables_and_headings_come_out_as_the_ocr_path_makes_them(tmp_path, engine):
    for ruled in (True, False):
        path, truth = _pdf(tmp_path, lambda rng: born_digital.table(rng, ruled=ruled),
                           f"table-{ruled}")
        done = _read(engine, path)
        markdown = done.recognition.markdown
        assert markdown.startswith("# "), markdown
        assert table_similarity(_tables(truth), _tables(markdown)) >= 0.9, markdown
        roles = {line.role for line in done.recognition.lines}
        assert {"heading", "table"} <= roles


@pytest.mark.parametrize("maker, check", [
    (born_digital.without_tounicode, "unicode"),
    (born_digital.type3, "unicode"),
    (born_digital.off_page, "outside"),
    (born_digital.stacked, "duplicates"),
    (lambda rng: born_digital.ocr_layer(rng, wrong=True), "invisible_ocr"),
])
def test_a_layer_that_trips_a_check_is_read_by_ocr(tmp_path, engine, maker, check):
    path, truth = _pdf(tmp_path, maker)
    done = _read(engine, path)
    verdict = _verdict(done)
    assert (verdict["reader"], verdict["reason"]) == ("ocr", check), verdict
    assert not verdict["checks"][check]["passed"]
    assert verdict["checks"][check]["value"] > verdict["checks"][check]["limit"]
    assert done.engine == "classic" and "inference_ms" in done.timings_ms
    if truth.strip():  # the OCR reading, not the layer's (a wrong layer is replaced)
        assert cer(truth, done.recognition.text) < 0.1, done.recognition.text
    # "prefer" trusts what passes the Unicode check, and only that
    preferred = _verdict(_read(engine, path, mode="prefer"))
    assert list(preferred["checks"]) == ["unicode"]
    assert preferred["reader"] == ("ocr" if check == "unicode" else "text")


@pytest.mark.parametrize("mode", ["auto", "prefer"])
def test_a_layer_with_more_characters_than_a_page_holds_is_not_read(tmp_path, engine, mode):
    """A text layer past pdf.max_page_chars is counted, not read: its page goes to OCR,
    whatever the mode (1.1 million characters on one page once took 56 s to read and
    wrote 63 MB of JSON). Here the limit is lowered under an ordinary page's."""
    path, truth = _pdf(tmp_path, born_digital.one_column)
    done = _read(engine, path, mode=mode, pdf=PdfSettings(max_page_chars=50))
    verdict = _verdict(done)
    assert (verdict["reader"], verdict["reason"]) == ("ocr", "chars"), verdict
    assert verdict["checks"]["chars"]["value"] > 50 and not verdict["checks"]["chars"]["passed"]
    assert done.engine == "classic" and cer(truth, done.recognition.text) < 0.1


def test_ink_no_character_covers_distrusts_the_layer(tmp_path, engine):
    """Text drawn as pictures of text (here a scan covering a third of the page) beside a
    line of real text: most of the ink is not text, and the page is read by OCR."""
    from fpdf import FPDF

    image, placed = born_digital.scan_image(random.Random("ink"))
    pdf = FPDF(unit="pt", format="A4")
    pdf.set_auto_page_break(False)
    pdf.add_page()
    pdf.set_font("helvetica", size=10)
    pdf.set_xy(56, 800)
    pdf.cell(text="Page 1 of 1")
    crop = image.crop((0, 0, image.width, image.height // 2))
    pdf.image(crop, x=0, y=0, w=born_digital.A4[0])  # half the page: below scan size
    path = tmp_path / "outlines.pdf"
    path.write_bytes(bytes(pdf.output()))
    settings = PdfSettings(min_picture_area=0.9)  # the picture is not read as a stamp is
    pipeline = PagePipeline(engine, PageSettings(pdf=settings))
    job = Job(1, path, "pdf", 0, 200, 40_000_000, tmp_path / "seen.png", "report", None, 1,
              None, 120)
    with ThreadPoolExecutor(1) as background:
        done = run_job(pipeline, job, background)
    verdict = _verdict(done)
    assert (verdict["reader"], verdict["reason"]) == ("ocr", "ink"), verdict
    assert placed[0][0].split()[0] in done.recognition.text


def test_a_stamp_scanned_over_text_is_read_by_ocr_beside_the_text(tmp_path, engine):
    path, truth = _pdf(tmp_path, born_digital.stamped)
    done = _read(engine, path)
    verdict = _verdict(done)
    assert verdict["reader"] == "mixed" and verdict["ocr_lines"] >= 1, verdict
    assert born_digital.STAMP in done.recognition.text
    assert cer(truth, done.recognition.text) < 0.01, done.recognition.text
    assert done.signals["source"] == "lines"  # the stamp's words are OCR's, scored as OCR's


def test_scans_are_read_as_before(tmp_path, engine):
    """An image page never looks for a text layer; a PDF of a scan has none, and auto
    reads it exactly as ignore does."""
    png = write_png(tmp_path / "scan.png", ["Invoice 4711", "Total 118.50 EUR"])
    assert "text_layer" not in _read(engine, png, kind="png").recognition.provenance
    path, _truth = _pdf(tmp_path, born_digital.mixed)
    auto, ignored = _read(engine, path, page=1), _read(engine, path, page=1, mode="ignore")
    assert (_verdict(auto)["reader"], _verdict(auto)["reason"]) == ("ocr", "no_text")
    assert "text_layer" not in ignored.recognition.provenance
    assert auto.recognition.text == ignored.recognition.text
    assert [line.box for line in auto.recognition.lines] == \
        [line.box for line in ignored.recognition.lines]


def test_the_cache_keeps_text_and_ocr_readings_apart(tmp_path, engine):
    path, _truth = _pdf(tmp_path, born_digital.one_column)
    cache = ResultCache(tmp_path / "cache")
    first = _read(engine, path, cache=cache)
    ignored = _read(engine, path, mode="ignore", cache=cache)
    again = _read(engine, path, cache=cache)
    assert first.engine == pdf_text.NAME and "cached" not in first.recognition.flags
    assert ignored.engine == "classic" and "cached" not in ignored.recognition.flags
    assert "inference_ms" in ignored.timings_ms
    assert again.engine == pdf_text.NAME and "cached" in again.recognition.flags
    assert _read(engine, path, mode="ignore", cache=cache).engine == "classic"
    assert again.recognition.text == first.recognition.text


def test_a_mixed_document_reads_each_page_with_its_reader_through_the_daemon(tmp_path):
    path, truth = _pdf(tmp_path, born_digital.mixed)
    (tmp_path / "home").mkdir()
    d = Daemon(tmp_path / "home").start()
    try:
        d.wait_ready()
        auto = d.upload(path)["id"]
        d.wait_final([auto])
        _page_images_wait_for_the_viewer(d, auto)  # before "ignore" reads the same pages
        ignored = d.upload(path, text_layer="ignore")["id"]
        layered, layer_truth = _pdf(tmp_path, lambda rng: born_digital.ocr_layer(rng, wrong=True),
                                    "layered")
        wrong_layer = d.upload(layered)["id"]
        d.wait_final([auto, ignored, wrong_layer])
        result = d.client.get(f"/api/v1/documents/{auto}/result",
                              params={"format": "json"}).json()
        readers = [page["provenance"]["text_layer"]["reader"] for page in result["pages"]]
        assert readers == ["text", "ocr", "text"]
        assert [page["provenance"]["engine"] for page in result["pages"]] == \
            [pdf_text.NAME, "classic", pdf_text.NAME]
        assert [page["status"] for page in result["pages"]] == ["done"] * 3
        text = "\n".join(page["text"] for page in result["pages"])
        assert cer(truth, text) < 0.02
        other = d.client.get(f"/api/v1/documents/{ignored}/result",
                             params={"format": "json"}).json()
        assert all(page["provenance"]["engine"] == "classic" for page in other["pages"])
        # hOCR carries the text pages' words; the searchable PDF adds no layer to them
        hocr = d.client.get(f"/api/v1/documents/{auto}/result",
                            params={"format": "hocr"}).text
        assert result["pages"][0]["lines"][0]["words"][0]["text"] in hocr
        searchable = d.client.get(f"/api/v1/documents/{auto}/result",
                                  params={"format": "pdf"}).content
        (tmp_path / "out.pdf").write_bytes(searchable)
        import pikepdf
        with pikepdf.open(tmp_path / "out.pdf") as out:
            assert "1 (own text)" in str(out.docinfo["/OCRPagesWithoutText"])
            assert "2 (" not in str(out.docinfo["/OCRPagesWithoutText"])
        found = d.client.get("/api/v1/documents", params={"q": result["pages"][0]["text"].split()[0]})
        assert auto in [doc["id"] for doc in found.json()["documents"]]
        # a scanner's wrong invisible layer: read by OCR, and replaced by that reading in
        # the searchable PDF (pdftotext, as an archive indexes it, finds it and not the old)
        replaced = tmp_path / "replaced.pdf"
        replaced.write_bytes(d.client.get(f"/api/v1/documents/{wrong_layer}/result",
                                          params={"format": "pdf"}).content)
        extracted = subprocess.run(["pdftotext", str(replaced), "-"], capture_output=True,
                                   text=True, check=True).stdout
        old_words = set(subprocess.run(["pdftotext", str(layered), "-"], capture_output=True,
                                       text=True, check=True).stdout.split())
        assert cer(layer_truth, extracted) < 0.1, extracted
        assert not (old_words - set(layer_truth.split())) & set(extracted.split())
    finally:
        d.stop()


def _page_images_wait_for_the_viewer(d: Daemon, document_id: str) -> None:
    """The worker kept the image of the scanned page it read (page 2) and not those of
    the pages read from their own text; opening one renders it, as the worker would
    have, where the OCR page's image would be."""
    settings = load_settings(d.config_path)
    library = Library(settings, Database(settings.paths.data_dir / "appliance.db"),
                      Spool(settings.paths.data_dir / "spool"))
    view = library.document(document_id)
    spool_image = [library.spool.page_image_path(view.doc.sha256, page.index, 200)
                   for page in view.pages]
    assert [path.exists() for path in spool_image] == [False, True, False]
    opened = library.page_images(document_id)
    assert opened == spool_image
    drawn = render_page(library.spool.original_path(view.doc.sha256), "pdf", 0, 200,
                        settings.limits.max_pixels)
    with Image.open(opened[0]) as kept:
        assert kept.size == drawn.size
        assert ImageChops.difference(kept.convert("RGB"), drawn).getbbox() is None


def test_two_short_columns_of_a_born_digital_page_are_read_one_after_the_other(tmp_path,
                                                                               engine):
    """Issue 50: two columns of two lines each, too few to judge as columns by their
    length, were read line by line across the gutter; lines of running text filling
    each side are columns however short."""
    from fpdf import FPDF

    words = ("the annual report shows that revenue grew in every region while costs "
             "stayed close to the plan of last year our customers ordered more").split()
    pdf = FPDF(unit="pt", format="A4")
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    pdf.text(40, 60, "Two short columns")
    width, expected = 247, ["Two short columns"]
    for side, x in (("Left", 40), ("Right", 307)):
        for row in range(2):
            text = [f"{side}{row}"]
            for word in words[row * 3:]:
                if pdf.get_string_width(" ".join(text + [word])) > width:
                    break
                text.append(word)
            pdf.text(x, 100 + row * 14, " ".join(text))
            expected.append(" ".join(text))
    path = tmp_path / "short.pdf"
    pdf.output(str(path))
    done = _read(engine, path, mode="prefer")
    assert _verdict(done)["reader"] == "text"
    assert done.recognition.text.split("\n") == expected


def test_a_character_past_the_basic_plane_is_read_whole(tmp_path, engine):
    """pdfium gives "𠮷" as two UTF-16 surrogates: read one by one, the page failed
    with a UnicodeEncodeError on every attempt; it is one character, in its place."""
    done = _read(engine, write_extension_b_pdf(tmp_path / "names.pdf"))
    assert _verdict(done)["reader"] == "text"
    assert done.recognition.text.splitlines() == EXTENSION_B_LINES


def test_a_ligature_and_a_hyphen_that_ends_a_line_read_as_printed(tmp_path, engine):
    """A paper typeset with ligatures and hyphenation (MinerU's demo2.pdf): pdfium gives
    the "fi" glyph as "f" and "i" in the glyph's one box, and a hyphen that ends a line
    as the control code 0x02. The page read "f ind" (a word cut at its ligature) and
    "de" over "signed" (the hyphen lost); it reads as printed now."""
    from fpdf import FPDF

    printed = ["Stereo algorithms are nearly always de-", "signed to \ufb01nd matches"]
    pdf = FPDF(unit="pt", format="A4")
    pdf.add_page()
    pdf.add_font("sans", fname=FONTS[0])
    pdf.set_font("sans", size=11)
    for row, text in enumerate(printed):
        pdf.text(40, 60 + 14 * row, text)
    path = tmp_path / "ligature.pdf"
    pdf.output(str(path))
    done = _read(engine, path, mode="prefer")
    assert _verdict(done)["reader"] == "text"
    assert done.recognition.text.split("\n") == [printed[0], "signed to find matches"]


def test_a_font_sized_by_the_text_matrix_reads_in_lines_not_words(tmp_path, engine):
    """Acrobat Distiller sets its text in a font of size 1 scaled tenfold by the text
    matrix (MinerU's demo1.pdf, a journal's pages): measured by the font's nominal
    size, every word space was wider than a line's gap, and the page read a word a
    line, its two columns across each other. The character's own matrix sizes it."""
    import pikepdf

    rows = ["Widespread afforestation through plantation estab-",
            "lishment on non-forested land represents a potentially",
            "significant alteration of catchment evapotranspiration"]
    pdf = pikepdf.new()
    font = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica,
        Encoding=pikepdf.Name.WinAnsiEncoding))
    shown = "".join(f"BT /F1 1 Tf 10 0 0 10 72 {700 - 12 * row} Tm ({text}) Tj ET\n"
                    for row, text in enumerate(rows))
    pdf.pages.append(pikepdf.Page(pikepdf.Dictionary(
        Type=pikepdf.Name.Page, MediaBox=[0, 0, 612, 792],
        Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(F1=font)),
        Contents=pdf.make_stream(shown.encode()))))
    path = tmp_path / "scaled.pdf"
    pdf.save(path)
    done = _read(engine, path, mode="prefer")
    assert _verdict(done)["reader"] == "text"
    assert [line.text for line in done.recognition.lines] == rows


def test_a_word_processor_s_symbol_font_bullets_read_as_a_list(tmp_path, engine):
    """Word sets a list's bullets in Symbol or Wingdings and maps each to a private-use
    character, U+F000 plus its code (pdfplumber's chelsea_pdta.pdf, a municipal plan:
    "" before each item). Read as printed ("•", "▪"), the items are a list; a symbol
    font's code that is no mark a document uses stays as given. Symbol's Greek given as
    the Latin letter of its code (pdfplumber's issue-71 example: "b" for β) reads as
    Greek."""
    import pikepdf

    items = ["Evaluate the vision", "Validate the orientations", "Plan the priority actions"]
    pdf = pikepdf.new()
    cmap = b"""/CIDInit /ProcSet findresource begin 12 dict begin begincmap
/CMapName /Word def 1 begincodespacerange <00> <FF> endcodespacerange
3 beginbfchar <B7> <F0B7> <A7> <F0A7> <62> <0062> endbfchar endcmap
CMapName currentdict /CMap defineresource pop end end"""

    def font(name: str) -> pikepdf.Dictionary:
        return pdf.make_indirect(pikepdf.Dictionary(
            Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name(name),
            ToUnicode=pdf.make_stream(cmap)))
    text = pdf.make_indirect(pikepdf.Dictionary(
        Type=pikepdf.Name.Font, Subtype=pikepdf.Name.Type1, BaseFont=pikepdf.Name.Helvetica,
        Encoding=pikepdf.Name.WinAnsiEncoding))
    marks = [("S", "B7"), ("W", "A7"), ("O", "A7")]  # Symbol, Wingdings, another symbol font
    shown = "".join(f"BT /{mark} 11 Tf 72 {700 - 16 * row} Td <{code}> Tj ET "
                    f"BT /T 11 Tf 90 {700 - 16 * row} Td ({item}) Tj ET\n"
                    for row, ((mark, code), item) in enumerate(zip(marks, items)))
    shown += "BT /T 11 Tf 72 600 Td (Dose of the) Tj ET BT /S 11 Tf 130 600 Td <62> Tj ET\n"
    pdf.pages.append(pikepdf.Page(pikepdf.Dictionary(
        Type=pikepdf.Name.Page, MediaBox=[0, 0, 612, 792],
        Resources=pikepdf.Dictionary(Font=pikepdf.Dictionary(
            S=font("/Symbol"), W=font("/ABCDEF+Wingdings-Regular"), O=font("/Dingbats"),
            T=text)),
        Contents=pdf.make_stream(shown.encode()))))
    path = tmp_path / "bullets.pdf"
    pdf.save(path)
    done = _read(engine, path, mode="prefer")
    assert _verdict(done)["reader"] == "text"
    assert done.recognition.text.split("\n") == [f"• {items[0]}", f"▪ {items[1]}",
                                                 f"\uf0a7 {items[2]}", "Dose of the β"]
    assert done.recognition.markdown.split("\n")[:2] == [f"- {item}" for item in items[:2]]


def test_a_stamp_printed_up_the_margin_is_one_line_read_with_the_foot(tmp_path, engine):
    """arXiv stamps its papers up the left margin ("arXiv:2203.00274v2 [cs.CL] 23 May
    2022", MinerU's demo3.pdf): read character by character across the page, it came
    first, a character a line. Characters are put in lines along their own direction
    now: the stamp is one line, printed up the margin, read after the body."""
    from fpdf import FPDF

    stamp = "arXiv:2203.00274v2 [cs.CL] 23 May 2022"
    body = [f"line {row} of the paper's running text, set in one column" for row in range(14)]
    pdf = FPDF(unit="pt", format="A4")
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    for row, text in enumerate(body):
        pdf.text(90, 80 + 16 * row, text)
    with pdf.rotation(90, 30, 500):
        pdf.text(30, 500, stamp)
    path = tmp_path / "stamped.pdf"
    pdf.output(str(path))
    done = _read(engine, path, mode="prefer")
    assert _verdict(done)["reader"] == "text"
    assert done.recognition.text.split("\n") == [*body, stamp]
    assert {line.text: line.role for line in done.recognition.lines}[stamp] == "footer"


@pytest.mark.parametrize("turn", [90, 180, 270])
def test_a_page_whose_text_runs_sideways_or_upside_down_is_read_turned_level(tmp_path, engine,
                                                                            turn):
    """A landscape table set sideways on an upright page (pdfplumber's
    nics-background-checks-2015-11-rotated.pdf: /Rotate 90 over text that runs down),
    a page upside down (issue-848.pdf): the lines ran across the reading order, each a
    column of its own, the table a word a row. The page is read turned level, as a scan
    would be: its lines are placed on the page turned as much, which the worker keeps
    for review and records as the orientation step that maps them back."""
    from appliance.raster.preprocess import mapped_box, to_original

    path = write_turned_pdf(tmp_path / "turned.pdf", turn)
    done = _read(engine, path, mode="prefer")
    assert _verdict(done)["reader"] == "text"
    assert done.recognition.text.split("\n") == TURNED_ROWS
    assert _verdict(done)["turn"] == turn
    steps = done.recognition.provenance["preprocess"]
    assert [(s["step"], s["detail"]["rotated_deg"], s["detail"]["by"]) for s in steps] == \
        [("orientation", (360 - turn) % 360, pdf_text.NAME)]
    rendered = tuple(done.recognition.provenance["rendered"]["size"])
    size = tuple(done.recognition.provenance["image_size"])
    assert size == (rendered if turn == 180 else rendered[::-1])
    with Image.open(path.with_suffix(".0.seen.png")) as kept:  # the page review shows
        assert kept.size == size
    # mapped back, each line stands where the page draws it, as the layer found it
    layer = pdf_text.read_layer(path, 0, None, rendered, 1.0, 1.0)
    drawn = {line.text: line.box for line in pdf_text.layer_lines(layer.chars)}
    back = to_original(steps)
    for line in done.recognition.lines:
        assert mapped_box(line.box, back) == pytest.approx(drawn[line.text], abs=0.5)


@pytest.mark.parametrize("script", ["latin", "chinese"])
def test_two_short_columns_on_page_two_of_a_report_are_read_column_by_column(tmp_path, engine,
                                                                             script):
    """Issue 52: page 2 of a born-digital report in two columns, a heading over two short
    columns, each a line of running text and its paragraph's short end, was read line by
    line across the gutter (left, right, left, right), in either script."""
    _font, header, heading, left, right = SHORT_COLUMNS[script]
    path = write_two_column_report_pdf(tmp_path / "report.pdf", script)
    done = _read(engine, path, page=1)
    assert _verdict(done)["reader"] == "text"
    assert done.recognition.text.split("\n") == [header, heading, *left, *right, "2"]


@pytest.mark.parametrize("page", [0, 1])
def test_a_chinese_journal_page_keeps_its_running_header_and_number_apart(tmp_path, engine, page):
    """Issue 53 item 8: on the even page the header, numbered "· 60 ·" at its outer end,
    stayed in the body as a list item ("- 60 · 计算机应用研究 ..."); on the odd page the
    header in small print 0.8 line heights over the text stayed in the body and the
    loose justified line read "传 统 I P 网 络 ..." (pdfium's inferred spaces)."""
    done = _read(engine, write_chinese_journal_pdf(tmp_path / "journal.pdf"), page=page)
    assert _verdict(done)["reader"] == "text"
    number = list(JOURNAL_HEADERS)[page]
    body, furniture = done.recognition.markdown.split("## Page furniture")
    assert " ".join(JOURNAL_HEADERS[number]) in furniture.splitlines()
    assert f"· {number} ·" in furniture and str(number) not in body
    assert not any(line.startswith(("-", "#")) for line in body.splitlines()), body
    if page == 1:
        assert body.splitlines()[0] == LOOSE_LINE


# by OCR the Chinese page's body measures too close to its small print for headings
@pytest.mark.parametrize("script, mode", [("chinese", "auto"), ("latin", "auto"),
                                          ("latin", "ignore")])
def test_a_body_outnumbered_by_its_references_small_print_is_no_heading(tmp_path, engine,
                                                                       script, mode):
    """Issue 53 item 8: on an article's last page the references in small print have more
    lines than the body, so the page's median line is theirs; the body's lines, in
    larger print, were read as headings: its paragraphs' short last lines, lines broken
    mid-sentence ("# 响力的..."), in Chinese every one. Only the references' heading is,
    read from the PDF's own text ("auto") and by OCR ("ignore")."""
    _font, paragraphs, heading, _reference = ARTICLE_END[script]
    done = _read(engine, write_article_end_pdf(tmp_path / "article.pdf", script), mode=mode)
    markdown = done.recognition.markdown.splitlines()
    assert [row for row in markdown if row.startswith("#")] == [f"# {heading}"], markdown
    body = markdown[:markdown.index(f"# {heading}")]
    assert {line.role for line in done.recognition.lines if line.text in body} == {"text"}
    if mode == "auto":  # the PDF's own text reads its words exactly
        assert _verdict(done)["reader"] == "text"
        joiner = "" if script == "chinese" else " "
        assert joiner.join(row for row in body if row) == joiner.join(paragraphs)
