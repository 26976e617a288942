"""A final document's results as files to download: one per format in the document
view, and the selected documents' outputs as one zip.

The results come from ``appliance.exporter.rendered``, when a person asks for them
(the searchable PDF of a long scan takes seconds), as the document is at that moment.
The searchable PDF is made from the original, which retention may have deleted (or a
PDF library may refuse): then the other formats are still offered, and the note says
why the PDF is not.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from appliance.errors import ApplianceError, OutputFailed
from appliance.export import FORMATS, SUFFIXES, safe_stem, write_atomic
from ui.i18n import EN, label, status_text, text

DOWNLOAD_LABELS = {"md": label("download_md"), "json": label("download_json"),
                   "txt": label("download_txt"), "hocr": label("download_hocr"),
                   "alto": label("download_alto"), "pdf": label("download_pdf"),
                   "fields.json": label("download_fields")}


def render_formats(exporter, document_id: str, formats=FORMATS, lang: str = EN
                   ) -> tuple[dict[str, str | bytes], str]:
    """(the document in ``formats``, a note: "" or why the PDF is missing)."""
    try:
        return exporter.rendered(document_id, formats), ""
    except OutputFailed as exc:
        if "pdf" not in formats:
            raise
        others = [fmt for fmt in formats if fmt != "pdf"]
        return exporter.rendered(document_id, others), text("no_searchable_pdf", lang, why=exc.message)


def prepare_downloads(appliance, document_id: str, download_dir: Path, lang: str = EN
                      ) -> tuple[dict[str, Path], str]:
    """The final document in every format, rendered now and written as files named
    after it: (format -> file, a note: "" or what is missing and why, unescaped)."""
    try:
        name = appliance.library.document(document_id).doc.name
        # key fields only for a type that has them: a generic document's would be null
        formats = [fmt for fmt in FORMATS if fmt != "fields.json"
                   or appliance.library.fields(document_id) is not None]
        rendered, note = render_formats(appliance.exporter, document_id, formats, lang)
    except ApplianceError as exc:  # deleted, or no longer final (a retry), since it was shown
        return {}, exc.message
    return write_downloads(rendered, download_dir, document_id, name), note


def write_downloads(rendered: dict[str, str | bytes], download_dir: Path, document_id: str,
                    name: str) -> dict[str, Path]:
    """The renderings as files named after the document, in a folder of their own."""
    folder = download_dir / document_id
    folder.mkdir(parents=True, exist_ok=True)
    stem = safe_stem(name)
    files = {}
    for fmt, content in rendered.items():
        path = folder / f"{stem}{SUFFIXES[fmt]}"
        write_atomic(path, content)
        files[fmt] = path
    return files


def zip_outputs(appliance, document_ids: list[str], zip_path: Path, lang: str = EN
                ) -> tuple[int, list[str]]:
    """The outputs (``output.formats``) of the final ones of ``document_ids`` in one zip,
    a folder per document. Returns (documents in it, why each other one is not: its
    name, unescaped, and the reason)."""
    formats = appliance.settings.output.formats
    added, left_out = 0, []
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for document_id in document_ids:
            name = document_id
            try:
                view = appliance.library.document(document_id)
                name = view.doc.name
                if not view.is_final:
                    left_out.append(text("zip_not_finished", lang, name=name,
                                         status=status_text(view.status, lang)))
                    continue
                rendered, note = render_formats(appliance.exporter, document_id, formats, lang)
            except ApplianceError as exc:  # deleted since, refused at intake, ...
                left_out.append(f"{name}: {exc.message}")
                continue
            stem = safe_stem(name)
            for fmt, content in rendered.items():
                archive.writestr(f"{stem}-{document_id[:8]}/{stem}{SUFFIXES[fmt]}", content)
            added += 1
            if note:
                left_out.append(f"{name}: {note}")
    return added, left_out
