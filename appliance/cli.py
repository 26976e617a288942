"""The `appliance` command."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from appliance.config import DOC_TYPES, OUTPUT_FORMATS, load_settings
from appliance.engines import pdf_text, registry
from appliance.gguf.families import FAMILIES
from appliance.errors import ApplianceError, InvalidRequest

SHAPED_MODEL_TOKENS = 600  # per page: about a dense page of Markdown
DEFAULT_BENCH_PAGES = 20


def cmd_serve(args) -> int:
    from appliance import logs
    from appliance.server import serve

    settings = load_settings(args.config)
    logs.configure(settings.logging.level)
    serve(settings)
    return 0


def cmd_ocr(args) -> int:
    """One-shot: no daemon, a throw-away data directory, the same pipeline."""
    from appliance import logs
    from appliance.oneshot import run_once

    settings = load_settings(args.config)
    logs.configure("WARNING")
    return run_once(settings, [Path(f) for f in args.files], args.format, args.output,
                    doc_type=args.type, text_layer=args.text_layer)


def cmd_bench(args) -> int:
    from appliance.measure.bench import (
        format_degenerate_report, format_report, measure_detection_latency, run_bench,
        run_degenerate_experiment,
    )

    pages = args.pages or DEFAULT_BENCH_PAGES
    if args.detection_latency:
        result = {mode: measure_detection_latency(mode, files=pages)
                  for mode in ("events", "poll")}
        for mode, run in result.items():
            sys.stdout.write(f"{mode:6} p50 {run['p50_ms']} ms, p95 {run['p95_ms']} ms "
                             f"({run['offered']} of {run['files']} files, fs {run['fs']}, "
                             f"poll interval {run['poll_interval_s']} s)\n")
        _write_json(args.report, result)
        return 0
    if args.search:
        from appliance.measure.search_bench import format_search_report, run_search_bench

        report = run_search_bench(args.search)
        _write_json(args.report, {"search": report})
        sys.stdout.write(format_search_report(report) + "\n")
        return 0 if report["within_target"] else 1
    if args.search_cjk:
        from appliance.measure.cjk_search_bench import format_cjk_report, run_cjk_bench

        report = run_cjk_bench(args.search_cjk)
        _write_json(args.report, {"search_cjk": report})
        sys.stdout.write(format_cjk_report(report) + "\n")
        return 0
    settings = load_settings(args.config)
    if args.searchable_pdf:
        from appliance.measure.pdf_bench import format_pdf_report, run_pdf_bench

        rows = run_pdf_bench(settings, args.searchable_pdf)
        _write_json(args.report, {"searchable_pdf": rows})
        sys.stdout.write(format_pdf_report(rows) + "\n")
        return 0
    if args.remote:
        return _bench_remote(args, settings)
    model = _shaped_model(args.shape, settings) if args.shape else None
    if args.parallel:
        return _bench_parallel(args, settings, model)
    if args.docintel:
        from appliance.measure.bench import format_docintel_report, run_docintel_bench

        result = run_docintel_bench(settings, pages=pages, concurrency=args.concurrency,
                                    dataset=args.dataset, report=args.report)
        sys.stdout.write(format_docintel_report(result) + "\n")
        return 0
    if args.inject_degenerate:
        result = run_degenerate_experiment(settings, pages=pages,
                                           concurrency=args.concurrency)
        _write_json(args.report, result)
        sys.stdout.write(format_degenerate_report(result) + "\n")
        return 0
    tokens = args.tokens or (SHAPED_MODEL_TOKENS if args.shape else 0)
    result = run_bench(settings, pages=pages, concurrency=args.concurrency, url=args.url,
                       report=args.report, tokens=tokens, dataset=args.dataset,
                       cost_per_hour=args.cost_per_hour, model=model,
                       choices=not args.without_choices)
    sys.stdout.write(format_report(result) + "\n")
    return 0


def _shaped_model(name: str, settings) -> tuple[Path, Path]:
    """A random-weight model of a real shape, built once into <data_dir>/bench-models."""
    from appliance.gguf.shapes import SHAPES, build_shaped_model

    if name not in SHAPES:
        raise InvalidRequest(f"unknown shape '{name}'; known: {', '.join(SHAPES)}")
    shape = SHAPES[name]
    return build_shaped_model(shape, settings.paths.data_dir / "bench-models", quant=shape.quant,
                              progress=lambda line: sys.stderr.write(line + "\n"))


def _bench_parallel(args, settings, model: tuple[Path, Path] | None) -> int:
    """The engine at N pages at once, in the daemon's worker process, against the raw
    decode loop (and llama-server). The engine settings give threads, context and
    offload."""
    from appliance.engines.llama.looping_bench import format_looping_report, run_looping_bench
    from appliance.engines.llama.parallel_bench import (
        DEFAULT_TOKENS, format_report, run_parallel_bench,
    )

    engine = settings.engine
    if model is None:
        if not (engine.model and engine.mmproj):
            raise InvalidRequest("bench --parallel needs a vision model: set engine.model and "
                                 "engine.mmproj, or pass --shape")
        model = (engine.model, engine.mmproj)
    if args.inject_degenerate:  # a looping page beside healthy ones, at each N
        results = [run_looping_bench(*model, n, tokens=args.tokens or DEFAULT_TOKENS,
                                     pages=args.pages or 2 * n, threads=engine.threads,
                                     n_ctx=engine.n_ctx, n_gpu_layers=engine.n_gpu_layers,
                                     flash_attn=engine.flash_attn)
                   for n in args.parallel]
        _write_json(args.report, results)
        sys.stdout.write("\n".join(map(format_looping_report, results)) + "\n")
        return 0
    result = run_parallel_bench(settings, *model, args.parallel,
                                tokens=args.tokens or DEFAULT_TOKENS, pages=args.pages,
                                server=args.against_llama_server,
                                log_dir=settings.paths.data_dir / "bench-logs")
    _write_json(args.report, result)
    sys.stdout.write(format_report(result) + "\n")
    return 0


def _bench_remote(args, settings) -> int:
    """The local engine, one remote endpoint and two, side by side on the same model and
    pages (llama-cpp-python's server, started here); the tiny test model unless --shape."""
    from appliance.measure.remote_bench import (
        DEFAULT_PAGES, DEFAULT_TOKENS, format_remote_report, require_server, run_remote_bench,
    )

    clash = [flag for flag, given in (("--url", args.url), ("--parallel", args.parallel),
                                      ("--inject-degenerate", args.inject_degenerate),
                                      ("--cost-per-hour", args.cost_per_hour is not None))
             if given]
    if clash:
        raise InvalidRequest(f"bench --remote starts its own daemons and servers; it does not "
                             f"take {', '.join(clash)}")
    require_server()  # before a shaped model is built
    model = _shaped_model(args.shape, settings) if args.shape else None
    tokens = args.tokens or (SHAPED_MODEL_TOKENS if args.shape else DEFAULT_TOKENS)
    result = run_remote_bench(settings, model, pages=args.pages or DEFAULT_PAGES, tokens=tokens,
                              concurrency=args.concurrency, dataset=args.dataset,
                              report=args.report)
    sys.stdout.write(format_remote_report(result) + "\n")
    return 0


def _page_counts(text: str) -> list[int]:
    from appliance.engines.llama.parallel_bench import parse_parallel

    return parse_parallel(text)


def _write_json(path: Path | None, result: dict) -> None:
    if path:
        path.write_text(json.dumps(result, indent=2) + "\n")


def cmd_eval(args) -> int:
    from appliance import models
    from appliance.measure.evaluate import (compare_models, format_comparison, format_table,
                                            run_eval)
    from appliance.measure.release import contract_drift, release_gate, snapshot

    contract = baseline = None  # read first: a bad file must fail before a long run
    if args.check_contract:
        contract = _read_json(args.check_contract, "contract")
    if args.baseline:
        baseline = _read_json(args.baseline, "baseline report")
    settings = load_settings(args.config)
    if len(args.model or []) > 1 and len(args.text_layer or []) > 1:
        raise InvalidRequest("eval compares models or text-layer modes, not both at once")
    pairs = [models.pair_for(name, args.models_dir) for name in args.model or [None]]
    reports = [run_eval(settings, args.datasets, engine=args.engine, limit=args.limit,
                        doc_type=args.doc_type, concurrency=args.concurrency, model=pair,
                        text_layer=text_layer)
               for pair in pairs for text_layer in args.text_layer or [None]]
    if len(args.text_layer or []) > 1:  # the same pages read with each mode, side by side
        text = format_comparison(reports, [f"text_layer={mode}" for mode in args.text_layer])
        sys.stdout.write(text + "\n")
        for path in args.report or []:
            path.write_text(text + "\n" if path.suffix == ".md"
                            else json.dumps({"compared": reports}, indent=2,
                                            ensure_ascii=False) + "\n")
        return 0
    if len(reports) > 1:  # models side by side, each later one gated against the first
        text, blocked = compare_models(reports, args.model)
        sys.stdout.write(text + "\n")
        for path in args.report or []:
            path.write_text(text + "\n" if path.suffix == ".md"
                            else json.dumps({"compared": reports}, indent=2,
                                            ensure_ascii=False) + "\n")
        return int(blocked)
    report = reports[0]
    table = format_table(report)
    sys.stdout.write(table + "\n")
    for path in args.report or []:
        path.write_text(table + "\n" if path.suffix == ".md"
                        else json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    if args.snapshot:
        _write_json(args.snapshot, snapshot(report))
    status = 0
    if contract is not None:
        drift = contract_drift(contract, report)
        for line in drift or ["format contract: no drift"]:
            sys.stdout.write(f"{line}\n")
        status |= bool(drift)
    if baseline is not None:
        verdict = release_gate(baseline, report)
        sys.stdout.write("\n".join(verdict.lines) + "\n")
        status |= verdict.blocked
    return status


def cmd_make_eval_set(args) -> int:
    from appliance.measure.synthetic_sets import make_sets

    counts = make_sets(args.dir, pages=args.pages, seed=args.seed)
    for name, pages in counts.items():
        sys.stdout.write(f"{args.dir / name}: {pages} pages\n")
    return 0


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"cannot read the {what} {path}: {exc}") from exc


def cmd_calibrate(args) -> int:
    from appliance.measure.metrics import cer
    from appliance.quality.calibration import calibration_report
    from appliance.quality.markdown import markdown_to_text
    from appliance.store import Database, reviews

    settings = load_settings(args.config)
    db = Database(settings.paths.database)
    confidences, cers = [], []
    for action, _page, _doc, machine in reviews.review_actions(db):
        if machine.confidence is not None:  # pages read before confidence existed
            confidences.append(machine.confidence)
            cers.append(cer(markdown_to_text(action.after_markdown or ""), machine.text or "",
                            ignore_whitespace=True))
    if not cers:
        raise InvalidRequest("no reviewed pages yet: calibration needs pages that reviewers "
                             "approved or corrected (keep review.sample_rate above 0)")
    report = calibration_report(confidences, cers, bad_cer=args.bad_cer,
                                target_error_rate=args.target_error_rate,
                                sample_rate=settings.review.sample_rate)
    _write_json(args.report, report)
    sys.stdout.write(format_calibration(report, settings.review) + "\n")
    return 0


def format_calibration(report: dict, review) -> str:
    auroc = "-" if report["auroc"] is None else f"{report['auroc']:.3f}"
    rows = [f"reviewed pages {report['pages']}, bad (CER > {report['bad_cer']:.0%}) "
            f"{report['bad_pages']}; AUROC of confidence for bad pages {auroc}",
            "accept_from  accepted  error rate among accepted"]
    for row in report["thresholds"]:
        rate = "-" if row["error_rate"] is None else f"{row['error_rate']:.1%}"
        rows.append(f"{row['threshold']:>11.2f}  {row['accepted_share']:>8.0%}  {rate}")
    hint = report["suggestion"]
    target = f"at most {hint['target_error_rate']:.1%} bad pages accepted"
    if hint["accept_from"] is None:
        rows.append(f"no threshold keeps {target}: review every page for now")
    else:
        rows.append(f"suggested for {target}: review_below = {hint['review_below']:.2f}, "
                    f"accept_from = {hint['accept_from']:.2f} (auto-accepts "
                    f"{hint['accepted_share']:.0%}, reviews about {hint['review_share']:.0%})")
    rows.append(f"configured: review_below = {review.review_below}, "
                f"accept_from = {review.accept_from}")
    return "\n".join(rows)


def cmd_review_export(args) -> int:
    from appliance.intake.spool import Spool
    from appliance.review import export_jsonl
    from appliance.store import Database

    settings = load_settings(args.config)
    db = Database(settings.paths.database)
    spool = Spool(settings.paths.spool)
    if str(args.jsonl) == "-":
        count = export_jsonl(db, spool, settings, sys.stdout)
    else:
        with open(args.jsonl, "w", encoding="utf-8") as out:
            count = export_jsonl(db, spool, settings, out)
    sys.stderr.write(f"{count} reviewed pages written\n")
    return 0


def cmd_fields_export(args) -> int:
    import datetime

    from appliance.fields.batch import write_csv, write_jsonl
    from appliance.fields.schema import schemas
    from appliance.store import Database, queries

    settings = load_settings(args.config)
    specs = schemas(settings.fields).get(args.type)
    if specs is None:
        raise InvalidRequest(f"documents of type {args.type} have no fields; configure "
                             f"[[fields.{args.type}]] or choose a type that has them")
    try:
        since = datetime.datetime.fromisoformat(args.since).timestamp() if args.since else 0.0
    except ValueError:
        raise InvalidRequest(f"--since {args.since!r} is not a date; write e.g. 2026-12-01 "
                             f"or 2026-12-01T08:00") from None
    rows = queries.documents_with_fields(Database(settings.paths.database), args.type,
                                         since, args.tag)
    target = args.csv or args.jsonl
    with (contextlib.nullcontext(sys.stdout) if str(target) == "-"
          else open(target, "w", encoding="utf-8", newline="")) as out:
        count = write_csv(rows, specs, out) if args.csv else write_jsonl(rows, out)
    sys.stderr.write(f"{count} documents written\n")
    return 0


def cmd_users(args) -> int:
    from getpass import getpass

    from appliance.users import Users

    users = Users(load_settings(args.config).review.users_file)
    if args.users_command == "list":
        for name in users.names():
            sys.stdout.write(f"{name}\t{users.get(name).role}\n")
        return 0
    if args.users_command == "remove":
        users.remove(args.name)
        sys.stdout.write(f"{args.name} removed from {users.path}; signed out at once\n")
        return 0
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass(f"password for {args.name}: ")
        if getpass("again: ") != password:
            raise InvalidRequest("the two passwords differ; nothing was changed")
    users.add(args.name, args.role, password)
    sys.stdout.write(f"{args.name} ({args.role}) saved in {users.path}\n")
    return 0


def cmd_keys(args) -> int:
    from appliance.security import ApiKeys

    keys = ApiKeys(load_settings(args.config).auth.api_keys_file)
    if args.keys_command == "list":
        for name in keys.names():
            sys.stdout.write(f"{name}\n")
    elif args.keys_command == "remove":
        keys.remove(args.name)
        sys.stdout.write(f"key {args.name} removed from {keys.path}\n")
    else:
        key = keys.add(args.name, args.rate)
        sys.stderr.write(f"key {args.name} saved (as a digest) in {keys.path}; it is shown "
                         f"only now:\n")
        sys.stdout.write(key + "\n")
    return 0


def cmd_install_service(args) -> int:
    from appliance.install import install_service

    for line in install_service(args.root, dry_run=args.dry_run):
        sys.stdout.write(line + "\n")
    return 0


def cmd_doctor(args) -> int:
    from appliance.doctor import doctor, exit_code, render

    checks = doctor(load_settings(args.config))
    sys.stdout.write(render(checks))
    return exit_code(checks)


def cmd_models(args) -> int:
    from appliance import models
    from appliance.doctor import exit_code, render

    if args.models_command == "make-test-model":
        from appliance.gguf.family_models import write_family_test_model
        from appliance.gguf.testmodel import write_test_model

        paths = (write_test_model(args.dir) if args.family == "gemma3"
                 else write_family_test_model(args.dir, args.family))
        for path in paths:
            sys.stdout.write(f"{path}\n")
        return 0
    catalog = models.load_catalog(args.catalog)
    models_dir = args.dir or models.MODELS_DIR
    if args.models_command == "list":
        sys.stdout.write(models.format_list(catalog, models_dir))
        return 0
    bar = models.ProgressBar()
    try:
        if args.models_command == "pull":
            checks = models.pull(models.find_entry(catalog, args.name), models_dir, progress=bar)
        else:
            engine = load_settings(args.config).engine
            checks = models.verify(models_dir, catalog, engine.model, engine.mmproj, progress=bar)
    finally:
        bar.close()
    sys.stdout.write(render(checks))
    return exit_code(checks)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="config file (default: $APPLIANCE_CONFIG, "
                                         "else config.toml at the top of the installation)")
    parser = argparse.ArgumentParser(prog="appliance", description="On-premise document OCR")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", parents=[common], help="run the daemon: REST API and web UI")
    serve.set_defaults(func=cmd_serve)

    ocr = sub.add_parser("ocr", parents=[common], help="recognise files now, without a daemon; result to stdout")
    ocr.add_argument("files", nargs="+", type=Path)
    ocr.add_argument("--format", choices=OUTPUT_FORMATS, default="md")
    ocr.add_argument("--type", choices=DOC_TYPES, default="generic",
                     help="the document type: its key fields (receipt, invoice, fapiao) are "
                          "read, checked and given in the JSON")
    ocr.add_argument("-o", "--output", type=Path, metavar="OUT",
                     help="write the result to this file (one input file; needed for pdf)")
    ocr.add_argument("--text-layer", choices=pdf_text.MODES,
                     help="a PDF page's own text: auto (read it where its checks trust it), "
                          "ignore (OCR every page), prefer (trust any text that maps to "
                          "Unicode); default: the config's pdf.text_layer")
    ocr.set_defaults(func=cmd_ocr)

    bench = sub.add_parser("bench", parents=[common],
                           help="throughput of the daemon against the bare engine")
    bench.add_argument("--pages", "--limit", type=int,
                       help=f"one-page documents to send (default {DEFAULT_BENCH_PAGES}; "
                            "with --parallel: per N, default 2 N)")
    bench.add_argument("--dataset", type=Path,
                       help="send the pages of this eval dataset instead of synthetic ones")
    bench.add_argument("--concurrency", type=int, default=4, help="parallel uploads")
    bench.add_argument("--url", help="drive this running daemon instead of starting one")
    bench.add_argument("--report", type=Path, help="also write the result as JSON here")
    bench.add_argument("--detection-latency", action="store_true",
                       help="watched-folder detection latency, events and poll mode")
    bench.add_argument("--inject-degenerate", action="store_true",
                       help="healthy-page latency with and without a looping page in "
                            "flight (with --parallel: in the slots of one engine)")
    bench.add_argument("--docintel", action="store_true",
                       help="the same pages through the native API and the Document "
                            "Intelligence API (as paperless-ngx sends them), side by side")
    bench.add_argument("--without-choices", action="store_true",
                       help="no auto-tiling and no second opinion: the ratio to the bare "
                            "engine is then the pipeline's pure overhead")
    bench.add_argument("--tokens", type=int, default=0,
                       help="vision model: make every answer exactly this many tokens")
    bench.add_argument("--cost-per-hour", type=float,
                       help="what the host costs per hour; prints C1M, the cost of 1e6 pages")
    bench.add_argument("--shape", help="gemma3-4b (Q4_K_M) or gemma3-1b (Q8_0): run a "
                                       "random-weight model of this real shape, built once "
                            f"into <data_dir>/bench-models (default {SHAPED_MODEL_TOKENS} tokens "
                            "per page; needs disk and time)")
    bench.add_argument("--parallel", type=_page_counts, metavar="N,N,...",
                       help="the vision engine reading N pages at once (e.g. 1,2,4,8), in this "
                            "process, against the raw batched-decode loop; --tokens per page "
                            "(default 64)")
    bench.add_argument("--against-llama-server", type=Path, metavar="BIN",
                       help="with --parallel: the same pages through this llama-server binary")
    bench.add_argument("--searchable-pdf", type=Path, nargs="+", metavar="FILE",
                       help="read these files, then measure their searchable PDFs: size "
                            "against the original, ms per page to make, and recall of the "
                            "accepted words in the text layer (pdftotext where installed)")
    bench.add_argument("--search", type=int, metavar="DOCUMENTS",
                       help="generate a throw-away store of this many documents (five pages "
                            "each) and time the documents browser's searches, filters, sorts "
                            "and pages against the 300 ms target (exit 1 when one misses it)")
    bench.add_argument("--search-cjk", type=int, metavar="PAGES",
                       help="generate a throw-away store of this many pages of Chinese "
                            "text and measure the search's precision, recall and time for "
                            "substrings of 2 to 6 characters, and the size of its indexes")
    bench.add_argument("--remote", action="store_true",
                       help="the local engine, then one and two [[engine.remote]] endpoints "
                            "(llama-cpp-python's server, started here) on the same model, "
                            "pages and --tokens (default 12 pages, 64 tokens), without "
                            "choices: per-page ms, "
                            "remote over local, scaling from one endpoint to two. The model: "
                            "the tiny test model, or --shape (needs llama-cpp-python[server])")
    bench.set_defaults(func=cmd_bench)

    evaluate = sub.add_parser("eval", parents=[common],
                              help="accuracy on datasets with ground truth, through the daemon")
    evaluate.add_argument("datasets", nargs="+", type=Path,
                          help="dataset directories (FUNSD, SROIE or plain layout), or their parent")
    evaluate.add_argument("--engine", choices=registry.config_names(),
                          help="the engine to evaluate (default: the config's)")
    evaluate.add_argument("--limit", type=int, help="the first N pages of each dataset")
    evaluate.add_argument("--doc-type", choices=DOC_TYPES,
                          help="treat every page as this document type")
    evaluate.add_argument("--concurrency", type=int, default=4, help="parallel uploads")
    evaluate.add_argument("--model", action="append", metavar="NAME|MODEL.gguf,MMPROJ.gguf",
                          help="read with this pair instead of engine.model/mmproj: a "
                               "catalog name whose files are in --models-dir, or the two "
                               "paths; give it twice or more to compare the models side "
                               "by side, each gated against the first")
    evaluate.add_argument("--text-layer", action="append", choices=pdf_text.MODES,
                          help="read each PDF's own text so (default: pdf.text_layer); give "
                               "it twice or more (--text-layer auto --text-layer ignore) to "
                               "see the modes side by side on the same pages")
    evaluate.add_argument("--models-dir", type=Path, default=None,
                          help="where --model finds catalog pairs (default models/)")
    evaluate.add_argument("--report", type=Path, action="append",
                          help="write the report here: .json (everything) or .md (the table); "
                               "may be repeated")
    evaluate.add_argument("--baseline", type=Path,
                          help="release gate against this older JSON report: BLOCK and exit 1 "
                               "when a type drops or the overall score does not improve")
    evaluate.add_argument("--snapshot", type=Path,
                          help="save the output structure (block kinds, table shapes) as the "
                               "format contract")
    evaluate.add_argument("--check-contract", type=Path,
                          help="exit 1 when the output structure drifts from this contract")
    evaluate.set_defaults(func=cmd_eval)

    make_set = sub.add_parser("make-eval-set",
                              help="write synthetic datasets with ground truth in reading order "
                                   "(columns, receipts, tables, degraded scans, receipts and invoices "
                                   "with their key fields, born-digital PDFs) for eval")
    make_set.add_argument("dir", type=Path)
    make_set.add_argument("--pages", type=int, default=12, help="pages per dataset")
    make_set.add_argument("--seed", type=int, default=7)
    make_set.set_defaults(func=cmd_make_eval_set)

    calibrate = sub.add_parser("calibrate", parents=[common],
                               help="how well confidence predicts reviewers' corrections; "
                                    "suggests routing thresholds")
    calibrate.add_argument("--target-error-rate", type=float, default=0.02,
                           help="accepted pages that may need a correction (default 2 %%)")
    calibrate.add_argument("--bad-cer", type=float, default=0.05,
                           help="a page with more corrected characters than this is bad")
    calibrate.add_argument("--report", type=Path, help="also write the report as JSON here")
    calibrate.set_defaults(func=cmd_calibrate)

    review = sub.add_parser("review", help="the review queue's data")
    review_sub = review.add_subparsers(dest="review_command", required=True)
    export = review_sub.add_parser("export", parents=[common],
                                   help="reviewed pages as training records")
    export.add_argument("--jsonl", type=Path, required=True,
                        help="file to write, one JSON record per page ('-': stdout)")
    export.set_defaults(func=cmd_review_export)

    fields_parser = sub.add_parser("fields", help="documents' key fields")
    fields_sub = fields_parser.add_subparsers(dest="fields_command", required=True)
    fields_export = fields_sub.add_parser("export", parents=[common],
                                          help="a batch of documents' fields as CSV or JSON Lines")
    fields_export.add_argument("--type", choices=DOC_TYPES, required=True)
    fields_export.add_argument("--since", help="documents received from this date or time "
                                               "(ISO, e.g. 2026-12-01)")
    fields_export.add_argument("--tag", help="only documents with this tag")
    target = fields_export.add_mutually_exclusive_group(required=True)
    target.add_argument("--csv", type=Path, help="file to write, a row per document ('-': stdout)")
    target.add_argument("--jsonl", type=Path, help="file to write, a record per document ('-': stdout)")
    fields_export.set_defaults(func=cmd_fields_export)

    users = sub.add_parser("users", help="reviewer accounts")
    users_sub = users.add_subparsers(dest="users_command", required=True)
    add = users_sub.add_parser("add", parents=[common], help="create an account or set its "
                                                             "password and role")
    add.add_argument("name")
    add.add_argument("--role", choices=("reviewer", "admin"), default="reviewer")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the password from the first line of stdin")
    users_sub.add_parser("list", parents=[common], help="the accounts and their roles")
    remove_user = users_sub.add_parser("remove", parents=[common],
                                       help="delete an account (it is signed out at once)")
    remove_user.add_argument("name")
    users.set_defaults(func=cmd_users)

    keys = sub.add_parser("keys", help="API keys for the REST API")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    add_key = keys_sub.add_parser("add", parents=[common],
                                  help="create a key (printed once) or replace one")
    add_key.add_argument("name")
    add_key.add_argument("--rate", type=int, help="requests a minute for this key "
                                                 "(default: auth.rate_per_minute)")
    keys_sub.add_parser("list", parents=[common], help="the keys' names")
    remove_key = keys_sub.add_parser("remove", parents=[common], help="revoke a key")
    remove_key.add_argument("name")
    keys.set_defaults(func=cmd_keys)

    service = sub.add_parser("install-service",
                             help="install the systemd unit, service user, directories and "
                                  "/etc/ocr-appliance/config.toml (see systemd/README.md)")
    service.add_argument("--root", type=Path, default=Path("/"),
                         help="install under this directory instead of / (an image, a test)")
    service.add_argument("--dry-run", action="store_true", help="say what would be done")
    service.set_defaults(func=cmd_install_service)

    doctor = sub.add_parser("doctor", parents=[common],
                            help="check GPU, llama.cpp build, model files and directories")
    doctor.set_defaults(func=cmd_doctor)

    models = sub.add_parser("models", help="list, download, verify the vision model files")
    models_sub = models.add_subparsers(dest="models_command", required=True)
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--dir", type=Path, help="model directory (default: models/ of the "
                                                "installation)")
    store.add_argument("--catalog", type=Path, help="catalog file (default: models/catalog.toml)")
    models_sub.add_parser("list", parents=[store], help="the catalogued model pairs")
    pull = models_sub.add_parser("pull", parents=[store],
                                 help="download a catalogued pair (resumes; needs internet)")
    pull.add_argument("name", help="a name from `appliance models list`")
    models_sub.add_parser("verify", parents=[store, common],
                          help="sha256 and header checks of the files present and configured")
    make = models_sub.add_parser("make-test-model",
                                 help="write a tiny random-weight model pair (tests, demos)")
    make.add_argument("dir", type=Path)
    make.add_argument("--family", default="gemma3", choices=FAMILIES,
                      help="the model family whose architecture, projector and chat "
                           "template the pair has (default gemma3)")
    models.set_defaults(func=cmd_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ApplianceError as exc:
        sys.stderr.write(f"error ({exc.code}): {exc.message}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
