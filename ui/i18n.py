"""The web UI's languages: English and Simplified Chinese, in one catalogue.

``TEXTS`` holds every word the UI shows of its own, by key, as (English, 简体中文); a
key without its Chinese is a test failure (tests/ui/test_i18n.py), never an English
word left on a Chinese screen. Two ways out of it:

- component labels, buttons, tabs and static Markdown are Gradio's own ``gr.I18n``
  (``label(key)``): the browser translates them, by the page's language;
- what the handlers write (status lines, messages, the documents list, table
  headers, the sign-in page) is translated on the server (``text(key, lang)``).

Both follow one choice: the language set with the language link (``/language``,
remembered in the ``appliance-lang`` cookie of that browser, for a year), else the
browser's Accept-Language (zh, zh-CN, zh-Hans, ... is Chinese, anything else English).
The server writes that language into each page of a mounted UI before Gradio's
scripts run (``language_script``), so Gradio's labels and the server's text never
disagree; Gradio's own settings (with its language menu) are hidden.

Reason codes (``low_confidence``, ``corrupt_file``, ...), OCR text, document names and
field values are never translated.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import gradio as gr

from appliance.engine_choice import ENGINE_NOTICES
from appliance.errors import SAID
from appliance.intake.sniff import KIND_WORDS
from appliance.quality.routing import reason_code

EN, ZH = "en", "zh-CN"
LANGUAGES = (EN, ZH)
LANGUAGE_COOKIE = "appliance-lang"
LANGUAGE_PATH = "/language"
LANGUAGE_COOKIE_AGE_S = 365 * 86400

# key: (English, Simplified Chinese). Server-side entries may hold str.format fields
# ({n}); a key ending in _one/_other is a pair chosen by a count (``plural``).
TEXTS: dict[str, tuple[str, str]] = {
    # --- the frame: title, tabs, status line, language -----------------------------
    "app_title": ("OCR Appliance", "OCR 识别一体机"),
    "app_heading": ("## OCR Appliance", "## OCR 识别一体机"),
    "tab_documents": ("Documents", "文档"),
    "tab_document": ("Document", "文档详情"),
    "tab_dashboard": ("Dashboard", "监控面板"),
    "language_switch": ("中文", "English"),
    "note": ("**Note:** {note}", "**提示**：{note}"),
    # why the configured vision model does not read pages (appliance.engine_choice.EngineNotice)
    "engine_notice_no_model": (
        ENGINE_NOTICES["no_model"],
        "尚未配置视觉模型，现由内置的 {engine} 引擎（{library}）识别页面。如需添加：把 Gemma "
        "GGUF 模型及其 mmproj 文件放入 models/，并在配置中填写 engine.model 和 engine.mmproj"
        "（见 models/README.md）。"),
    "engine_notice_model_failed": (
        ENGINE_NOTICES["model_failed"],
        "配置的视觉模型未通过检查（{reason}），现由内置的 {engine} 引擎识别页面。详情请运行 "
        "`appliance doctor`。"),
    "engine_notice_model_failed_remote": (
        ENGINE_NOTICES["model_failed_remote"],
        "配置的视觉模型未通过检查（{reason}），现只由远程服务器识别页面。详情请运行 "
        "`appliance doctor`。"),
    "engine_ready": ("ready", "就绪"),
    "engine_starting": ("starting: the engine is warming up", "启动中：引擎正在预热"),
    "status_line": ("Engine **{engine}**, {ready} · {queued} pages waiting · {memory}",
                    "引擎 **{engine}**，{ready} · {queued} 页等待识别 · {memory}"),
    "review_unstaffed": ("**⚠ Review is on, but {why}. Pages sent to review cannot finish "
                         "until then.**",
                         "**⚠ 已开启人工复核，但{why}。在此之前，送去复核的页面无法完成。**"),
    "no_reviewer": ("no reviewer account exists, so nobody can check it: an administrator "
                    "must add one with `appliance users add NAME`",
                    "还没有复核员账号，没有人能复核：管理员须用 `appliance users add NAME` "
                    "添加一个"),
    # why a page was routed (quality.routing's codes): English shows the code itself,
    # another language its name with the reason as recorded
    "reason_low_confidence": ("low_confidence", "置信度低"),
    "reason_sampled": ("sampled", "抽中复核"),
    "reason_not_sampled": ("not_sampled", "未抽中复核"),
    "reason_confident": ("confident", "置信度达标"),
    "reason_always_review": ("always_review", "该类型一律复核"),
    "reason_missing_field": ("missing_field", "缺少字段"),
    "reason_field_invalid": ("field_invalid", "字段未通过校验"),
    "reason_layout_doubt": ("layout_doubt", "阅读顺序存疑"),
    "reason_sent_to_review": ("sent_to_review", "被人工送回复核"),
    "reason_named": ("{name} ({reason})", "{name}（{reason}）"),
    # document types (appliance.config.DOC_TYPES: the values stay as they are)
    "doctype_generic": ("generic", "通用"),
    "doctype_receipt": ("receipt", "收据"),
    "doctype_invoice": ("invoice", "发票（通用）"),
    "doctype_contract": ("contract", "合同"),
    "doctype_report": ("report", "报告"),
    "doctype_table": ("table", "表格"),
    "doctype_handwriting": ("handwriting", "手写"),
    "doctype_id_card": ("id_card", "身份证"),
    "doctype_fapiao": ("fapiao", "发票"),
    # --- the sign-in page (ui/auth.py) ---------------------------------------------
    "sign_in_title": ("Sign in - OCR Appliance", "登录 - OCR 识别一体机"),
    "sign_in_intro": ("Sign in with your account. An administrator creates accounts with "
                      "<code>appliance users add NAME</code>.",
                      "请用您的账号登录。管理员用 <code>appliance users add NAME</code> 创建账号。"),
    "sign_in_username": ("username", "用户名"),
    "sign_in_password": ("password", "密码"),
    "sign_in_button": ("Login", "登录"),
    "sign_in_failed": ("Wrong name or password (or too many tries: wait a few minutes).",
                       "用户名或密码错误（或尝试次数过多：请等几分钟）。"),
    "sign_in_language": ("Language:", "语言："),
    # --- the Documents tab ---------------------------------------------------------
    "signed_in_as": ("Signed in as **{name}** ({role})", "当前用户 **{name}**（{role}）"),
    "role_admin": ("admin", "管理员"),
    "role_reviewer": ("reviewer", "复核员"),
    "role_unknown": ("unknown", "未知"),
    "delete_for_admins": (" · deleting is for administrators", " · 只有管理员可以删除"),
    "api_docs": ("API docs", "API 文档"),
    "sign_out": ("Sign out", "退出登录"),
    "upload": ("Upload", "上传"),
    "upload_files": ("Drop documents here (PDF, TIFF, PNG, JPEG, ...)",
                     "将文档拖放到这里（PDF、TIFF、PNG、JPEG 等）"),
    "document_type": ("Document type", "文档类型"),
    "lane": ("Lane", "队列通道"),
    "lane_interactive": ("interactive (read first)", "交互（优先识别）"),
    "lane_batch": ("batch (read when the interactive queue is empty)",
                   "批量（交互队列为空时识别）"),
    "read_with": ("Read with", "识别引擎"),
    "configured_engine": ("the configured engine", "配置的引擎"),
    "text_layer": ("A PDF's own text", "PDF 自带文字"),
    "text_layer_default": ("as configured", "按配置"),
    "text_layer_auto": ("read it where it can be trusted (auto)", "可信时直接采用（auto）"),
    "text_layer_ignore": ("always read by OCR (ignore)", "始终用 OCR 识别（ignore）"),
    "text_layer_prefer": ("trust any text that maps to Unicode (prefer)",
                          "凡能映射到 Unicode 的文字都采用（prefer）"),
    "tags_input": ("Tags (comma-separated)", "标签（用逗号分隔）"),
    "pdf_password": ("Password of an encrypted PDF (used to read it, never stored)",
                     "加密 PDF 的密码（仅用于读取，不会保存）"),
    "last_upload": ("Last upload", "最近上传"),
    "upload_file": ("File", "文件"),
    "upload_outcome": ("Outcome", "结果"),
    "upload_details": ("Details", "详情"),
    "upload_refused": ("refused", "已拒绝"),
    "upload_accepted": ("accepted", "已接收"),
    "upload_failed": ("failed", "失败"),
    "upload_gone": ("the document is no longer stored", "该文档已不在系统中"),
    "upload_pages_one": ("{n} page to read; the list shows how far it is",
                         "{n} 页待识别；进度见列表"),
    "upload_pages_other": ("{n} pages to read; the list shows how far it is",
                           "{n} 页待识别；进度见列表"),
    # after a drop: what became of the files, and the queue (ui/upload.py)
    "dropped_head": ("Just dropped ({documents}):", "刚上传（{documents}）："),
    "dropped_queued": ("{n} queued", "{n} 个排队中"),
    "dropped_reading": ("{n} reading", "{n} 个识别中"),
    "dropped_review": ("{n} need review", "{n} 个待复核"),
    "dropped_done": ("{n} done", "{n} 个已完成"),
    "dropped_failed": ("{n} failed", "{n} 个失败"),
    "dropped_refused": ("{n} refused", "{n} 个被拒绝"),
    "dropped_why": ("(why: open Upload)", "（原因：展开“上传”查看）"),
    "queue_head": ("All pages:", "全部页面："),
    "queue_queued": ("{n} queued", "{n} 页排队中"),
    "queue_reading": ("{n} reading", "{n} 页识别中"),
    "queue_review": ("{n} need review", "{n} 页待复核"),
    "queue_idle": ("nothing waiting", "没有等待的页面"),
    "filters": ("Filters", "筛选"),
    "filters_set": ("Filters ({n} set)", "筛选（已设置 {n} 项）"),
    "clear_filters": ("Clear filters", "清除筛选"),
    "api_keys": ("API keys", "API 密钥"),
    "api_keys_none": ("No API key yet: the REST API and /docs' Authorize need one.",
                      "还没有 API 密钥：REST API 和 /docs 的 Authorize 都需要一个。"),
    "api_keys_list": ("Keys: {names}. A key is shown once, when it is made; one lost is "
                      "revoked and made again.",
                      "密钥：{names}。密钥只在创建时显示一次；丢失的密钥请吊销后重新创建。"),
    "api_key_name": ("New key's name", "新密钥名称"),
    "api_key_make": ("Make key", "创建密钥"),
    "api_key_which": ("Key to revoke", "要吊销的密钥"),
    "api_key_revoke": ("Revoke", "吊销"),
    "api_key_secret": ("The new key: copy it now, it is not shown again",
                       "新密钥：请立即复制，之后不会再显示"),
    "api_key_made": ("Key **{name}** made. Send it in the X-API-Key header, or give it to "
                     "Authorize on /docs.",
                     "已创建密钥 **{name}**。请在 X-API-Key 请求头中发送，或在 /docs 的 "
                     "Authorize 中填写。"),
    "api_key_exists": ("A key named **{name}** exists already: revoke it first to replace it.",
                       "已存在名为 **{name}** 的密钥：如需替换，请先吊销。"),
    "api_key_revoked": ("Key **{name}** revoked: requests with it are refused from now on.",
                        "已吊销密钥 **{name}**：此后使用它的请求都会被拒绝。"),
    "api_key_none_chosen": ("Choose the key to revoke first.", "请先选择要吊销的密钥。"),
    "api_keys_refused": ("Only a signed-in administrator may make or revoke API keys.",
                         "只有已登录的管理员可以创建或吊销 API 密钥。"),
    "upload_internal_error": ("the file could not be accepted because of an internal error; "
                              "the server log has the details",
                              "内部错误，文件未能接收；详情见服务器日志"),
    "search": ("Search", "搜索"),
    "search_placeholder": ("words of the text, or of the name", "正文或文件名中的词语"),
    "sort": ("Sort", "排序"),
    "sort_newest": ("newest first", "最新在前"),
    "sort_oldest": ("oldest first", "最早在前"),
    "sort_name_asc": ("name, A to Z", "名称，A 到 Z"),
    "sort_name_desc": ("name, Z to A", "名称，Z 到 A"),
    "sort_status": ("status", "状态"),
    "sort_best": ("best match (when searching)", "最佳匹配（搜索时）"),
    "filter_status": ("Status", "状态"),
    "filter_type": ("Type", "类型"),
    "any_type": ("any type", "全部类型"),
    "filter_tag": ("Tag", "标签"),
    "filter_source": ("Source", "来源"),
    "any_source": ("any source", "全部来源"),
    "source_upload": ("web upload", "网页上传"),
    "source_api": ("REST API", "REST API"),
    "source_watch": ("watched folder", "监控文件夹"),
    "source_cli": ("command line", "命令行"),
    "filter_folder": ("Watched folder", "监控文件夹"),
    "any_folder": ("any folder", "全部文件夹"),
    "filter_engine": ("Engine", "引擎"),
    "any_engine": ("any engine", "全部引擎"),
    "filter_fields": ("Key fields", "关键字段"),
    "fields_any": ("any", "不限"),
    "fields_invalid": ("some field invalid", "有字段未通过校验"),
    "fields_valid": ("all fields valid", "全部字段通过校验"),
    "filter_since": ("From (day)", "起始日期"),
    "filter_until": ("To (day)", "截止日期"),
    "pager_first": ("« First", "« 首页"),
    "pager_previous": ("‹ Previous", "‹ 上一页"),
    "pager_next": ("Next ›", "下一页 ›"),
    "pager_last": ("Last »", "末页 »"),
    "refresh_list": ("Refresh list", "刷新列表"),
    "pager_none": ("No document matches.", "没有匹配的文档。"),
    "pager_range_one": ("{first}–{last} of {total} document", "第 {first}–{last} 个，共 {total} 个文档"),
    "pager_range_other": ("{first}–{last} of {total} documents",
                          "第 {first}–{last} 个，共 {total} 个文档"),
    "pager_changed": (" · **the list has changed since:** Refresh list shows it",
                      " · **列表已有变化**：点“刷新列表”查看"),
    "none_ticked": ("No document ticked.", "未勾选文档。"),
    "ticked": ("**{documents}** ticked: {names}", "已勾选 **{documents}**：{names}"),
    "bulk_retry": ("Retry failed pages (ticked)", "重新识别失败页（已勾选）"),
    "bulk_cancel": ("Cancel (ticked)", "取消（已勾选）"),
    "bulk_review": ("Send to review (ticked)", "送去复核（已勾选）"),
    "bulk_delete": ("Delete (ticked)", "删除（已勾选）"),
    "bulk_zip": ("Download ticked (.zip)", "下载已勾选（.zip）"),
    "bulk_zip_file": ("Outputs of the ticked documents", "已勾选文档的结果"),
    # the list (HTML made on the server)
    "list_select": ("select {name}", "选择 {name}"),
    "list_select_all": ("select every document on this page", "选择本页全部文档"),
    "list_document": ("Document", "文档"),
    "list_status": ("Status", "状态"),
    "list_pages": ("Pages", "页数"),
    "list_where": ("Where the words are", "匹配位置"),
    "list_label": ("Documents", "文档"),
    "list_progress": ("pages done of {name}", "{name} 已完成页数"),
    "list_pages_done": ("{done}/{total} pages", "{done}/{total} 页"),
    "list_left": (" · about {duration} left", " · 约剩 {duration}"),
    "list_waiting_one": (" · {n} read, waiting for review", " · {n} 页已识别，等待复核"),
    "list_waiting_other": (" · {n} read, waiting for review", " · {n} 页已识别，等待复核"),
    "list_failed_one": ("{n} page failed: open it for why", "{n} 页失败：打开查看原因"),
    "list_failed_other": ("{n} pages failed: open it for why", "{n} 页失败：打开查看原因"),
    "list_name_matches": ("the name matches", "文件名匹配"),
    "list_hit_page": ("page {n}", "第 {n} 页"),
    "list_not_reviewed": ("not reviewed yet", "尚未复核"),
    "list_deleted": ("deleted", "已删除"),
    "status_queued": ("queued", "排队中"),
    "status_processing": ("processing", "识别中"),
    "status_running": ("running", "识别中"),
    "status_review": ("review", "待复核"),
    "status_done": ("done", "已完成"),
    "status_partial": ("partial", "部分完成"),
    "status_failed": ("failed", "失败"),
    "duration_s": ("{n} s", "{n} 秒"),
    "duration_min": ("{n} min", "{n} 分钟"),
    "duration_h": ("{n} h", "{n} 小时"),
    # each failure's sentence by its reason code (one for each class of appliance/errors.py,
    # ``error_text``): the code stays beside it, the library's specifics after it
    "error_internal_error": ("an internal error; the server log has the details",
                             "内部错误；详情见服务器日志"),
    "error_config_error": ("the configuration is not valid", "配置无效"),
    "error_schema_mismatch": ("the database was made by another version of the appliance",
                              "数据库由另一版本的一体机创建"),
    "error_bad_input": ("the file cannot be read", "无法读取该文件"),
    "error_empty_file": ("the file is empty: check the scanner or upload and send it again",
                         "文件为空：请检查扫描仪或上传后重新提交"),
    "error_unsupported_type": ("the appliance does not read this type of file: convert it to "
                               "PDF and submit it again",
                               "一体机不识别此类文件：请转换为 PDF 后重新提交"),
    "error_corrupt_file": ("the file is damaged: export or scan it again and submit it again",
                           "文件已损坏：请重新导出或扫描后再提交"),
    "error_encrypted_pdf": ("the PDF is encrypted: give its password, or remove the encryption",
                            "PDF 已加密：请提供密码，或解除加密"),
    "error_too_large": ("the file is over the size limit", "文件超过大小上限"),
    "error_too_many_pages": ("the document has more pages than the limit",
                             "文档页数超过上限"),
    "error_too_many_pixels": ("a page has more pixels than the limit",
                              "页面像素超过上限"),
    "error_truncated_file": ("the file ends early (an interrupted copy, upload or scan): copy "
                             "or scan it again",
                             "文件不完整（复制、上传或扫描被中断）：请重新复制或扫描"),
    "error_unrecognized_file": ("the file is damaged or not a document: check that it opens, "
                                "export it again as PDF or PNG",
                                "文件已损坏或不是文档：请确认它能打开，并重新导出为 PDF 或 PNG"),
    "error_engine_error": ("the engine failed to read the page", "引擎识别此页失败"),
    "error_engine_unavailable": ("the engine asked for is not available",
                                 "所要求的引擎不可用"),
    "error_warmup_timeout": ("the engine did not start in time", "引擎未能按时启动"),
    "error_degenerate": ("the engine's output was unusable (repeated or empty)",
                         "引擎输出无法使用（重复或为空）"),
    "error_page_timeout": ("reading the page took too long", "识别此页超时"),
    "error_preempted": ("the page was taken back from the engine; it is read again",
                        "此页已从引擎收回；将重新识别"),
    "error_endpoint_unavailable": ("the remote engine did not answer; the page is read again",
                                   "远程引擎没有响应；此页将重新识别"),
    "error_worker_crashed": ("the engine crashed while it read the page",
                             "引擎在识别此页时崩溃"),
    "error_crashes_worker": ("the page crashed the engine several times and was set aside: "
                             "check the file, or try the other engine",
                             "此页多次导致引擎崩溃，已搁置：请检查文件，或换用另一个引擎"),
    "error_lease_expired": ("the worker reading this page stopped answering",
                            "识别此页的工作进程没有响应"),
    "error_memory_critical": ("stopped to free memory; it is read again when memory allows",
                              "为释放内存而停止；内存允许时将重新识别"),
    "error_shutdown": ("stopped by a shutdown; read again after the restart",
                       "因关机而停止；重启后将重新识别"),
    "error_crash_suspect": ("the engine died while it read this page with others; it is read "
                            "again alone", "引擎在同时识别此页和其他页时崩溃；此页将单独重新识别"),
    "error_output_failed": ("this download could not be made", "无法生成此下载文件"),
    "error_not_found": ("not found", "未找到"),
    "error_unknown_model": ("no such Document Intelligence model", "没有此 Document Intelligence 模型"),
    "error_http_error": ("the request was refused", "请求被拒绝"),
    "error_method_not_allowed": ("the request's method is not allowed here",
                                 "此处不允许该请求方法"),
    "error_no_result": ("the document was refused when it was submitted: it has no result",
                        "文档提交时已被拒绝：没有识别结果"),
    "error_not_ready": ("not ready yet", "尚未就绪"),
    "error_no_fields": ("this type of document has no key fields", "此类文档没有关键字段"),
    "error_unknown_field": ("this type of document has no such key field",
                            "此类文档没有该关键字段"),
    "error_shutting_down": ("the appliance is stopping: try again after the restart",
                            "一体机正在停止：请在重启后重试"),
    "error_review_lock_lost": ("your review lock on this page is gone: open the next page",
                               "您对此页的复核锁定已失效：请打开下一页"),
    "error_page_busy": ("the page is queued or being read: ask again once it is read",
                        "此页正在排队或识别中：识别完成后再试"),
    "error_queue_full": ("the queue is full: try again later", "队列已满：请稍后重试"),
    "error_disk_full": ("the disk is nearly full: nothing is stored until space is freed",
                        "磁盘空间不足：腾出空间前不会保存任何文件"),
    "error_duplicate": ("the same file was already read", "同一文件已识别过"),
    "error_idempotency_conflict": ("the idempotency key was used before with other content",
                                   "该幂等键之前已用于其他内容"),
    "error_document_busy": ("a page of the document is being read: try again later",
                            "文档有页面正在识别：请稍后重试"),
    "error_original_purged": ("the original file was deleted by retention: its pages cannot be "
                              "read again", "原始文件已按保留策略删除：无法重新识别其页面"),
    "error_cancelled": ("cancelled before it was read; retry the document to read it",
                        "识别前已取消；重新识别该文档即可"),
    "error_rejected_unreadable": ("a reviewer marked the page unreadable: rescan it and submit "
                                  "the document again",
                                  "复核员判定此页无法识别：请重新扫描后再提交文档"),
    "error_pages_failed": ("some pages failed", "部分页面失败"),
    "error_invalid_request": ("the request is not valid", "请求无效"),
    "error_unauthorized": ("not signed in, or the API key is not valid",
                           "未登录，或 API 密钥无效"),
    "error_forbidden_address": ("this address may not use the appliance",
                                "此地址不允许使用一体机"),
    "error_rate_limited": ("too many requests: try again in a minute",
                           "请求过多：请一分钟后重试"),
    "error_dataset_error": ("the dataset cannot be read whole", "数据集无法完整读取"),
    "error_webhook_not_allowed": ("the webhook's host is not allowed", "不允许该 webhook 主机"),
    "error_unsupported_media_type": ("the request's content type is not accepted",
                                     "不接受该请求的内容类型"),
    "error_source_not_allowed": ("the source's host is not allowed", "不允许该来源主机"),
    "error_source_unreachable": ("the source could not be fetched", "无法获取该来源"),
    "error_already_running": ("the appliance is already running", "一体机已在运行"),
    "error_model_error": ("a model file cannot be used", "模型文件无法使用"),
    "error_model_not_gguf": ("the model file is missing, damaged or not a GGUF",
                             "模型文件缺失、损坏或不是 GGUF"),
    "error_model_no_mmproj": ("the model has no vision projector", "模型缺少视觉投影文件"),
    "error_model_mmproj_mismatch": ("the vision projector belongs to another model",
                                    "视觉投影文件属于另一个模型"),
    "error_model_unsupported_arch": ("the model's architecture is not supported",
                                     "不支持该模型的架构"),
    "error_model_does_not_fit": ("the model does not fit in free memory",
                                 "可用内存放不下该模型"),
    "error_network_unavailable": ("the network is not available", "网络不可用"),
    "error_specifics": ("{sentence} ({specifics})", "{sentence}（{specifics}）"),
    # document states in words (ui/document_status.py)
    "failed_reason": ("failed", "失败"),
    "review_needed_one": ("a person has to check {n} page in the review console (/review) "
                          "before this document is finished",
                          "需要有人在复核台（/review）复核 {n} 页，文档才能完成"),
    "review_needed_other": ("a person has to check {n} pages in the review console (/review) "
                            "before this document is finished",
                            "需要有人在复核台（/review）复核 {n} 页，文档才能完成"),
    # actions on documents (ui/actions.py)
    "action_retry": ("Retry failed pages", "重新识别失败页"),
    "action_cancel": ("Cancel", "取消"),
    "action_review": ("Send to review", "送去复核"),
    "action_delete": ("Delete", "删除"),
    "done_retry": ("queued their failed pages again", "已将失败页重新排队"),
    "done_cancel": ("cancelled", "已取消"),
    "done_review": ("sent to review", "已送去复核"),
    "done_delete": ("deleted", "已删除"),
    "documents_one": ("{n} document", "{n} 个文档"),
    "documents_other": ("{n} documents", "{n} 个文档"),
    "pages_one": ("{n} page", "{n} 页"),
    "pages_other": ("{n} pages", "{n} 页"),
    "names_more": (" and {n} more", " 等另外 {n} 个"),
    "names_deleted": ("(deleted)", "（已删除）"),
    "nothing_ticked": ("Tick the documents to act on in the list first.",
                       "请先在列表中勾选要处理的文档。"),
    "delete_refused": ("Only an administrator may delete documents; you are signed in as a "
                       "reviewer. Ask an administrator to delete them.",
                       "只有管理员可以删除文档；您以复核员身份登录。请联系管理员删除。"),
    "action_internal_error": ("the action failed because of an internal error; the server "
                              "log has why", "内部错误，操作失败；原因见服务器日志"),
    "delete_question_one": ("**Delete 1 document for good?** {names}. Its pages, outputs and "
                            "key fields go; the audit trail keeps who deleted it.",
                            "**永久删除 1 个文档？** {names}。该文档的页面、识别结果和关键字段都会"
                            "删除；审计记录会保留删除人。"),
    "delete_question_other": ("**Delete {n} documents for good?** {names}. Their pages, outputs "
                              "and key fields go; the audit trail keeps who deleted them.",
                              "**永久删除 {n} 个文档？** {names}。这些文档的页面、识别结果和"
                              "关键字段都会删除；审计记录会保留删除人。"),
    "confirm_yes": ("Yes, delete", "确定删除"),
    "confirm_no": ("No, don't delete", "不，不删除"),
    "not_retried_refused": ("refused when submitted ({code}), so there are no pages to read "
                            "again; the document view says why: fix the file and upload it again",
                            "提交时已被拒绝（{code}），没有可重新识别的页面；原因见文档视图："
                            "请修正文件后重新上传"),
    "not_retried_none": ("none of its pages failed", "没有失败的页面"),
    "action_line": ("**{label}:** {documents} {past}", "**{label}**：{documents}{past}"),
    "action_pages": (" ({pages})", "（{pages}）"),
    "action_not": ("\n- not {past}: {names}: {why}", "\n- 未{past}：{names}：{why}"),
    "zip_none": ("None of the selected documents is finished: there is nothing to zip.",
                 "所选文档都未完成：没有可打包的内容。"),
    "zip_done": ("**Download:** the outputs of {documents} in one zip.",
                 "**下载**：{documents}的识别结果，打包为一个 zip。"),
    "zip_not_finished": ("{name}: {status}, not finished yet", "{name}：{status}，尚未完成"),
    # the Document tab
    "open_review": ("Open the review console", "打开复核台"),
    "prepare_downloads": ("Prepare downloads", "准备下载"),
    "download_md": ("Download Markdown (.md)", "下载 Markdown（.md）"),
    "download_json": ("Download JSON (.json)", "下载 JSON（.json）"),
    "download_txt": ("Download text (.txt)", "下载纯文本（.txt）"),
    "download_hocr": ("Download hOCR (.hocr)", "下载 hOCR（.hocr）"),
    "download_alto": ("Download ALTO XML (.alto.xml)", "下载 ALTO XML（.alto.xml）"),
    "download_pdf": ("Download searchable PDF (.pdf)", "下载可搜索 PDF（.pdf）"),
    "download_fields": ("Download key fields (.fields.json)", "下载关键字段（.fields.json）"),
    "no_searchable_pdf": ("no searchable PDF: {why}", "无法生成可搜索 PDF：{why}"),
    "thumbnails": ("Pages (click one to show it)", "页面（点击查看）"),
    "page_image": ("Page as the engine read it", "引擎识别的页面"),
    "zoom": ("Zoom (%)", "缩放（%）"),
    "page": ("Page", "页"),
    "rendered": ("Rendered", "排版效果"),
    "text": ("Text", "文本"),
    "recognised_text": ("Recognised text of this page", "本页识别文本"),
    "fields_readonly": ("Key fields (read-only: correct them in the review console)",
                        "关键字段（只读：请在复核台更正）"),
    "history": ("History", "历史记录"),
    "history_when": ("When", "时间"),
    "history_what": ("What", "事件"),
    "history_who": ("Who", "操作人"),
    "history_page": ("Page", "页"),
    "history_details": ("Details", "详情"),
    # the history's kinds (appliance.library.history: the audit trail's event kinds,
    # and each attempt's number and outcome), shown in English as the library names them
    "event_attempt": ("attempt {n}: {outcome}", "第 {n} 次识别：{outcome}"),
    "event_ok": ("ok", "成功"),
    "event_error": ("error", "出错"),
    "event_timeout": ("timeout", "超时"),
    "event_crashed": ("crashed", "崩溃"),
    "event_degenerate": ("degenerate", "输出无效"),
    "event_preempted": ("preempted", "被收回"),
    "event_corrected": ("corrected", "已更正"),
    "event_intake": ("intake", "接收"),
    "event_submitted": ("submitted", "已提交"),
    "event_rejected": ("rejected", "已拒绝"),
    "event_claimed": ("claimed", "开始识别"),
    "event_stale_result_dropped": ("stale_result_dropped", "过期结果已丢弃"),
    "event_routed_to_review": ("routed_to_review", "送去复核"),
    "event_completed": ("completed", "已完成"),
    "event_requeued": ("requeued", "重新排队"),
    "event_failed": ("failed", "失败"),
    "event_requeued_after_restart": ("requeued_after_restart", "重启后重新排队"),
    "event_exported": ("exported", "已导出"),
    "event_output_failed": ("output_failed", "生成结果失败"),
    "event_cancelled": ("cancelled", "已取消"),
    "event_retried": ("retried", "重新识别"),
    "event_sent_to_review": ("sent_to_review", "手动送去复核"),
    "event_disposed": ("disposed", "已处置原件"),
    "event_webhook_delivered": ("webhook_delivered", "Webhook 已送达"),
    "event_webhook_failed": ("webhook_failed", "Webhook 发送失败"),
    "event_fields_read": ("fields_read", "已读取关键字段"),
    "event_fields_corrected": ("fields_corrected", "关键字段已更正"),
    "event_review_claimed": ("review_claimed", "开始复核"),
    "event_review_approve": ("review_approve", "复核通过"),
    "event_review_correct": ("review_correct", "复核更正"),
    "event_review_reject": ("review_reject", "复核退回（无法识别）"),
    "event_review_rerun": ("review_rerun", "复核要求重新识别"),
    "event_review_skip": ("review_skip", "复核跳过"),
    "event_deleted": ("deleted", "已删除"),
    "event_purged": ("purged", "文件已按保留策略清除"),
    "event_forgotten": ("forgotten", "已遗忘"),
    "no_document": ("Open a document from the list (click its name).",
                    "请从列表中打开一个文档（点击文档名）。"),
    "downloads_waiting": ("The downloads can be prepared once every page is finished.",
                          "所有页面完成后才能准备下载。"),
    "downloads_changed": ("The document changed while its downloads were made: prepare them "
                          "again.", "生成下载文件期间文档有变化：请重新准备下载。"),
    "document_gone": ("There is no document with this id (deleted?).",
                      "没有此编号的文档（可能已删除）。"),
    "document_refused": ("This document could not be processed; the reason is shown above.",
                         "此文档无法处理；原因见上方。"),
    "document_title": ("**{status}**, {done}/{total} pages done", "**{status}**，已完成 {done}/{total} 页"),
    "fact_type": ("type {value}", "类型 {value}"),
    "fact_source": ("{source} {when}", "{source} {when}"),
    "fact_lane": ("lane {value}", "通道 {value}"),
    "fact_id": ("id {value}", "编号 {value}"),
    "fact_folder": ("folder {value}", "文件夹 {value}"),
    "fact_tags": ("tags {value}", "标签 {value}"),
    "page_choice": ("page {n} of {count}", "第 {n} 页，共 {count} 页"),
    "page_head": ("**Page {n} of {count}** · {status}", "**第 {n} 页，共 {count} 页** · {status}"),
    "page_not_read": ("not read yet", "尚未识别"),
    "page_confidence": ("confidence {value}", "置信度 {value}"),
    "page_read_by": ("read by {engine}", "识别引擎 {engine}"),
    "page_flags": ("flags: {value}", "标记：{value}"),
    "page_routing": ("routing: {value}", "分流原因：{value}"),
    "page_codes": ("codes: {value}", "条码：{value}"),
    "none": ("none", "无"),
    "none_recorded": ("none recorded", "无记录"),
    "unknown": ("unknown", "未知"),
    "page_missing": ("This page is not there.", "此页不存在。"),
    # turning the page shown (ui/actions.py): the review console's turn, for its people
    "page_turn_right": ("Turn right, read again", "向右转 90°，重新识别"),
    "page_turn_around": ("Turn upside down, read again", "旋转 180°，重新识别"),
    "page_turn_left": ("Turn left, read again", "向左转 90°，重新识别"),
    "turn_done": ("**Page {n}** is read again, turned as you asked; this view shows the new "
                  "reading once it is done.",
                  "**第 {n} 页**已按您的要求旋转，正在重新识别；识别完成后本页显示新结果。"),
    "turn_not": ("**Page {n}** was not turned: {why}", "**第 {n} 页**未旋转：{why}"),
    "turn_refused": ("Turning a page is for those who may use the review console: sign in "
                     "as a reviewer or an administrator.",
                     "只有能使用复核台的人可以旋转页面：请以复核员或管理员身份登录。"),
    "thumbnail_caption": ("page {n}", "第 {n} 页"),
    # key fields (ui/fields_form.py)
    "field_field": ("Field", "字段"),
    "field_value": ("Value", "值"),
    "field_valid": ("Valid", "校验"),
    "field_why": ("Why", "依据"),
    "field_page": ("Evidence page", "所在页"),
    "field_required": (" (required)", "（必填）"),
    "field_on_page_one": ("on page {pages}", "在第 {pages} 页"),
    "field_on_page_other": ("on pages {pages}", "在第 {pages} 页"),
    "field_no_box": ("no box on a page", "页面上无位置"),
    "field_not_found": ("not found", "未找到"),
    "fields_saved_ok": ("saved: {names}; every check passes", "已保存：{names}；全部校验通过"),
    "fields_saved_fail_one": ("saved: {names}; {n} check still fails ({where})",
                              "已保存：{names}；仍有 {n} 项校验未通过（{where}）"),
    "fields_saved_fail_other": ("saved: {names}; {n} checks still fail ({where})",
                                "已保存：{names}；仍有 {n} 项校验未通过（{where}）"),
    "fields_none": ("No key fields were read for this document.", "此文档没有识别出关键字段。"),
    # each field check's words by its code (appliance.fields.validate.WORDS, the same
    # {fields}): why a field passed or failed
    "check_required": ("required, not found", "必填，未找到"),
    # a value that fails its kind's check (appliance.fields.kinds.PROBLEMS)
    "check_format_not_kind": ("not a {kind}", "格式无效：不是{kind}"),
    "check_format_not_a_choice": ("{value} is not one of {choices}",
                                  "格式无效：{value} 不在可选值 {choices} 之中"),
    "check_format_no_match": ("{value} does not match the pattern {pattern}",
                              "格式无效：{value} 不符合格式 {pattern}"),
    "check_format_no_such_date": ("the date {raw} does not exist", "格式无效：日期 {raw} 不存在"),
    "check_format_iban_country": ("{country} is not a country with IBANs",
                                  "格式无效：{country} 不是使用 IBAN 的国家"),
    "check_format_iban_length": ("{country} IBANs have {length} characters, this one {count}",
                                 "格式无效：{country} 的 IBAN 应有 {length} 个字符，此号码有 {count} 个"),
    "check_format_iban_digits": ("IBAN check digits do not match (mod 97)",
                                 "格式无效：IBAN 校验位不符（mod 97）"),
    "check_format_uscc_digit": ("USCC check character does not match (GB 32100-2015)",
                                "格式无效：统一社会信用代码校验码不符（GB 32100-2015）"),
    "check_format_vat_format": ("not in the format of {country} VAT numbers",
                                "格式无效：不符合 {country} 增值税号的格式"),
    "check_format_vat_digits": ("{country} VAT number check digits do not match",
                                "格式无效：{country} 增值税号校验位不符"),
    "check_format_ok": ("valid {kind}", "格式有效（{kind}）"),
    "check_no_check": ("no check applies to this field", "此字段没有适用的校验"),
    "check_date_real": ("{day} is a real date", "{day} 是真实存在的日期"),
    "check_date_past": ("{day} is not in the future", "{day} 不在未来"),
    "check_date_future": ("{day} lies in the future", "{day} 在未来"),
    "check_sum_ok": ("{whole} {total} = {first} {a} + {second} {b}",
                     "{whole} {total} = {first} {a} + {second} {b}，相符"),
    "check_sum_bad": ("{whole} {total} != {first} {a} + {second} {b}",
                      "{whole} {total} ≠ {first} {a} + {second} {b}，不符"),
    "check_capital_ok": ("the total in capitals ({capital}) equals the total ({total})",
                         "大写金额（{capital}）与合计（{total}）相符"),
    "check_capital_bad": ("the total in capitals ({capital}) differs from the total ({total})",
                          "大写金额（{capital}）与合计（{total}）不符"),
    "check_paid_ok": ("total {total} = paid {paid} - change {change}",
                      "合计 {total} = 实付 {paid} - 找零 {change}"),
    "check_paid_bad": ("total {total} != paid {paid} - change {change}",
                       "合计 {total} ≠ 实付 {paid} - 找零 {change}"),
    "check_paid_rounded": ("total {total}, rounded for cash to {owed} = paid {paid} - change "
                           "{change}", "合计 {total}，现金抹零为 {owed} = 实付 {paid} - 找零 {change}"),
    "check_items_ok": ("the {rows} item rows add up to {amount}, as printed under them",
                       "{rows} 行商品合计 {amount}，与其下方印的金额相符"),
    "check_items_bad": ("the {rows} item rows add up to {amount}, which no sum under them shows "
                        "({shown}) and the {name} is not",
                        "{rows} 行商品合计 {amount}，其下方的金额（{shown}）和 {name} 都不是此数"),
    "check_dates_ok": ("due {due} on or after issue {issued}",
                       "到期日 {due} 不早于开票日 {issued}"),
    "check_dates_bad": ("due {due} before issue {issued}", "到期日 {due} 早于开票日 {issued}"),
    "check_not_in_text": ("not in the page's text", "页面文字中没有此值"),
    "check_seen_other": ("document {document} has the same number with {name} {value}",
                         "文档 {document} 号码相同，但 {name} 为 {value}"),
    "check_seen_before": ("the same document was read before ({document})",
                          "同一文档之前已识别过（{document}）"),
    "check_qr_ok": ("as its QR code says", "与二维码一致"),
    "check_qr_bad": ("{value} != {expected} in its QR code", "{value} 与二维码中的 {expected} 不符"),
    "check_name_ok": ("read from a line of words, confidence {confidence}",
                      "读自一行文字，置信度 {confidence}"),
    "check_name_weak": ("read from a line that is no name ({letters} letters, confidence "
                        "{confidence}): a scribble or a stamp?",
                        "读自一行不像名称的文字（{letters} 个字母，置信度 {confidence}）："
                        "是涂写还是印章？"),
    "fields_hidden_one": ("{n} more field of this reading are not shown: the field "
                          "configuration has fewer now.",
                          "本次识别还有 {n} 个字段未显示：当前字段配置中的字段更少。"),
    "fields_hidden_other": ("{n} more fields of this reading are not shown: the field "
                            "configuration has fewer now.",
                            "本次识别还有 {n} 个字段未显示：当前字段配置中的字段更少。"),
    # the memory's state (appliance.gpu's status: its message's words, by state and source)
    "memory_line": ("{state}: {label} {percent} %", "{state}：{label} {percent} %"),
    "memory_no_sample": ("{state}: no memory sample yet", "{state}：尚无内存采样"),
    "memory_state_ok": ("ok", "正常"),
    "memory_state_paused": ("paused", "已暂停派发"),
    "memory_state_critical": ("critical", "严重不足"),
    "memory_source_nvml": ("GPU memory", "显存"),
    "memory_source_host": ("host memory", "主机内存"),
    "memory_source_other": ("memory", "内存"),
    # the dashboard
    "remote_endpoints": ("### Remote endpoints", "### 远程服务端点"),
    "latest_failures": ("### Latest failures", "### 最近的失败"),
    "no_failures": ("No failures.", "没有失败记录。"),
    "plot_queue": ("Queue depth (pages)", "队列长度（页）"),
    "plot_pages_waiting": ("pages waiting", "等待页数"),
    "plot_throughput": ("Pages read per minute", "每分钟识别页数"),
    "plot_pages": ("pages", "页数"),
    "plot_time": ("time", "时间"),
    "plot_latency": ("Page latency, arrival to result (over the 5 minutes before each point)",
                     "页面延迟，从到达到出结果（每个点之前 5 分钟内）"),
    "plot_seconds": ("seconds", "秒"),
    "plot_vram": ("VRAM (GiB)", "显存（GiB）"),
    "plot_watched": ("Watched memory (host RAM: no GPU found) (GiB)",
                     "监控的内存（主机内存：未发现 GPU）（GiB）"),
    "plot_ram": ("Host RAM (GiB)", "主机内存（GiB）"),
    "plot_lane": ("lane", "队列通道"),
    "plot_series": ("series", "数据"),
    "plot_percentile": ("percentile", "百分位"),
    "series_used": ("used", "已用"),
    "series_total": ("total", "总量"),
    "failure_when": ("When", "时间"),
    "failure_document": ("Document", "文档"),
    "failure_page": ("Page", "页"),
    "failure_code": ("Code", "代码"),
    "failure_message": ("Message", "信息"),
    "failure_whole": ("whole document", "整个文档"),
    "endpoint_name": ("Endpoint", "端点"),
    "endpoint_model": ("Model", "模型"),
    "endpoint_in_flight": ("In flight", "处理中"),
    "endpoint_state": ("State", "状态"),
    "endpoint_latency": ("Latency p50 (15 min)", "延迟 p50（15 分钟）"),
    "endpoint_errors": ("Errors (since start)", "错误（自启动）"),
    "endpoint_out": ("out: {why}", "停用：{why}"),
    "endpoint_in_service": ("in service", "服务中"),
    "summary_queue": ("- **Queue:** {waiting} pages waiting ({lanes}), {running} being read",
                      "- **队列**：{waiting} 页等待（{lanes}），{running} 页识别中"),
    "summary_throughput": ("- **Throughput:** {pages} pages in the last {minutes} min "
                           "({rate} per minute)",
                           "- **吞吐量**：最近 {minutes} 分钟 {pages} 页（每分钟 {rate} 页）"),
    "summary_latency": ("- **Page latency** (arrival to result, last {minutes} min): {latency}",
                        "- **页面延迟**（从到达到出结果，最近 {minutes} 分钟）：{latency}"),
    "summary_backlog": ("- **Review backlog:** {waiting} pages waiting, {locked} being reviewed",
                        "- **待复核**：{waiting} 页等待，{locked} 页复核中"),
    "summary_memory": ("- **Memory:** {memory} · host RAM {ram}",
                       "- **内存**：{memory} · 主机内存 {ram}"),
    # where the watched memory is the host's own (no GPU), its figures say it once
    "summary_memory_host": ("- **Memory:** {memory} ({ram})", "- **内存**：{memory}（{ram}）"),
    "summary_ram": ("{used} of {total} GiB", "{used} / {total} GiB"),
    "summary_workers": ("- **Workers:** {workers} ({busy} busy), {restarts} restarts",
                        "- **工作进程**：{workers} 个（{busy} 个忙碌），重启 {restarts} 次"),
    "lane_name_interactive": ("interactive", "交互"),
    "lane_name_batch": ("batch", "批量"),
    # the review console
    "review_title": ("OCR Appliance · Review", "OCR 识别一体机 · 复核"),
    "review_heading": ("## Review", "## 复核"),
    "log_out": ("Log out", "退出登录"),
    "age": ("Age", "等待时长"),
    "any_age": ("any age", "不限"),
    "age_10m": ("waiting 10 min or more", "等待 10 分钟以上"),
    "age_1h": ("waiting 1 h or more", "等待 1 小时以上"),
    "age_4h": ("waiting 4 h or more", "等待 4 小时以上"),
    "age_1d": ("waiting 1 day or more", "等待 1 天以上"),
    "folder": ("Folder", "文件夹"),
    "reason": ("Reason", "原因"),
    "any_reason": ("any reason", "全部原因"),
    "review_next": ("Next page", "下一页"),
    "review_approve": ("Approve", "通过"),
    "review_save": ("Save correction", "保存更正"),
    "review_reject": ("Reject as unreadable", "无法识别，退回"),
    "review_rerun_resolution": ("Rerun at higher resolution", "以更高分辨率重新识别"),
    "review_rerun_engine": ("Rerun with the other engine", "用另一个引擎重新识别"),
    "review_skip": ("Skip", "跳过"),
    "review_revert": ("Revert my edits", "撤销我的修改"),
    "zoom_out": ("Zoom out (−)", "缩小（−）"),
    "zoom_fit": ("Fit (0)", "适合窗口（0）"),
    "zoom_in": ("Zoom in (+)", "放大（+）"),
    "key_fields": ("Key fields", "关键字段"),
    "save_fields": ("Save fields (Enter)", "保存字段（Enter）"),
    "editor": ("Markdown (edit, then Save correction)", "Markdown（编辑后点“保存更正”）"),
    "reading_order": ("Reading order (the numbered blocks on the page)",
                      "阅读顺序（页面上编号的文本块）"),
    "apply_order": ("Apply order", "应用顺序"),
    "reject_note": ("Why unreadable (optional, kept with a rejection)",
                    "无法识别的原因（选填，随退回一起保存）"),
    "preview": ("**Preview** (as the result will read; HTML is shown as text, but for a table "
                "whose cells span)",
                "**预览**（结果的样子；HTML 显示为文本，合并单元格的表格除外）"),
    "other_pages": ("Other pages of this document", "本文档的其他页面"),
    "queue": ("Queue", "队列"),
    "queue_label": ("Waiting pages, in the order Next page takes them",
                    "等待复核的页面，按“下一页”的取用顺序"),
    "queue_document": ("Document", "文档"),
    "queue_page": ("Page", "页"),
    "queue_type": ("Type", "类型"),
    "queue_folder": ("Folder", "文件夹"),
    "queue_why": ("Why", "原因"),
    "queue_confidence": ("Confidence", "置信度"),
    "queue_waiting": ("Waiting", "等待时长"),
    "queue_reviewer": ("Reviewer", "复核员"),
    "other_status": ("Status", "状态"),
    "btn_next": ("Next page (N)", "下一页（N）"),
    "btn_approve": ("Approve (A)", "通过（A）"),
    "btn_correct": ("Save correction (Ctrl+S)", "保存更正（Ctrl+S）"),
    "btn_reject": ("Reject as unreadable (X)", "无法识别，退回（X）"),
    "btn_rerun_resolution": ("Rerun at higher resolution (H)", "以更高分辨率重新识别（H）"),
    "btn_rerun_engine": ("Rerun with the other engine (O)", "用另一个引擎重新识别（O）"),
    "btn_turn_right": ("Turn right, read again (R)", "向右转 90°，重新识别（R）"),
    "btn_turn_around": ("Turn upside down, read again (T)", "旋转 180°，重新识别（T）"),
    "btn_turn_left": ("Turn left, read again (L)", "向左转 90°，重新识别（L）"),
    "btn_skip": ("Skip (K)", "跳过（K）"),
    "btn_revert": ("Revert my edits (U)", "撤销我的修改（U）"),
    "btn_no_engine": ("Other engine (O): none installed", "其他引擎（O）：未安装"),
    "btn_rerun_with": ("Rerun with {engine} (O)", "用 {engine} 重新识别（O）"),
    "keys_help": ("Keys: **N** next page · **A** approve · **Ctrl+S** save correction · **X** "
                  "reject as unreadable · **H** rerun at higher resolution · **O** rerun with "
                  "the other engine · **R** **T** **L** turn the page right, upside down or "
                  "left and read it again · **K** skip · **U** revert my edits · **E** edit the "
                  "text, "
                  "**Esc** leave it · **+ − 0** zoom · in the editor hold **Alt** (Alt+A "
                  "approves, Alt+N opens the next page) · in the key fields **Tab** moves on, "
                  "**Enter** or **Ctrl+S** saves them.",
                  "快捷键：**N** 下一页 · **A** 通过 · **Ctrl+S** 保存更正 · **X** 无法识别，退回 · "
                  "**H** 以更高分辨率重新识别 · **O** 用另一个引擎重新识别 · **R** **T** **L** "
                  "将页面向右、倒转或向左旋转后重新识别 · **K** 跳过 · "
                  "**U** 撤销我的修改 · **E** 编辑文本，**Esc** 退出编辑 · **+ − 0** 缩放 · "
                  "在编辑器中按住 **Alt**（Alt+A 通过，Alt+N 打开下一页）· 在关键字段中 "
                  "**Tab** 切换，**Enter** 或 **Ctrl+S** 保存。"),
    "review_start": ("Press **N** (Next page) to open the oldest page waiting for review.",
                     "按 **N**（下一页）打开等待最久的待复核页面。"),
    "review_empty": ("### The queue is empty\n\nNo page waits for review{filtered}. New pages "
                     "show in the counts above; press **N** to look again.",
                     "### 队列为空\n\n没有{filtered}等待复核的页面。新页面会显示在上方的计数中；"
                     "按 **N** 再看一次。"),
    "review_empty_filtered": (" that matches the filters", "符合筛选条件的"),
    "review_counts_one": ("**{n}** page waiting", "**{n}** 页等待复核"),
    "review_counts_other": ("**{n}** pages waiting", "**{n}** 页等待复核"),
    "review_locked": ("{n} being reviewed", "{n} 页复核中"),
    "review_by_reason": ("by reason: {reasons}", "按原因：{reasons}"),
    "review_signed_in": (" · signed in as **{name}**", " · 当前用户 **{name}**"),
    "any_named": ("any {name}", "全部{name}"),
    "just_now": ("just now", "刚刚"),
    "age_min": ("{n} min", "{n} 分钟"),
    "age_h": ("{n} h", "{n} 小时"),
    "age_d": ("{n} d", "{n} 天"),
    "low_confidence_none": ("No line or token was read with low confidence.",
                            "没有低置信度的行或词。"),
    "low_confidence_lowered": ("No line or token stands out; what lowered the page's "
                               "confidence: {penalties}.",
                               "没有特别突出的低置信度行或词；降低本页置信度的是：{penalties}。"),
    "low_confidence_head": ("**Read with low confidence** ({n}; boxed on the image where the "
                            "engine gave a position):",
                            "**低置信度识别**（{n} 处；引擎给出位置的已在图上框出）："),
    "low_confidence_item": ("{number}. {text} — score {score}", "{number}. {text} — 得分 {score}"),
    "empty_text": ("(empty)", "（空）"),
    "review_page_title": ("### {name} — page {n} of {count}", "### {name} — 第 {n} 页，共 {count} 页"),
    "review_why": ("**Confidence {confidence} · Why here: {reasons}**",
                   "**置信度 {confidence} · 复核原因：{reasons}**"),
    "none_left": ("none left", "已无"),
    "review_waiting_for": ("waiting {age}", "已等待 {age}"),
    "review_yours_until": ("yours until {time}", "由您锁定至 {time}"),
    "review_open_first": ("Open a page first.", "请先打开一个页面。"),
    "review_order_bad": ("Give each block number from 1 to {count} once, in the order the page "
                         "reads, e.g. {example}.",
                         "请按页面的阅读顺序，将 1 到 {count} 的每个块编号各写一次，例如 {example}。"),
    "review_order_whole": ("This page was read whole: it has no blocks to reorder.",
                           "此页是整体识别的：没有可调整顺序的文本块。"),
    "review_order_done": ("The editor holds the page in the new order: check it, then Save "
                          "correction.", "编辑器中已是新顺序的页面：请检查后点“保存更正”。"),
    "review_no_page": ("No page is open: press N to open the next page.",
                       "没有打开的页面：按 N 打开下一页。"),
    "review_edited": ("You edited the text: save it as a correction (Ctrl+S), or revert your "
                      "edits (U) to approve the machine's reading.",
                      "您修改了文本：请保存为更正（Ctrl+S），或撤销修改（U）后通过机器识别结果。"),
    "review_approved": ("Approved.", "已通过。"),
    "review_corrected": ("Correction saved.", "更正已保存。"),
    "review_unchanged": ("Nothing was changed, so the page was approved.",
                         "没有修改，页面已通过。"),
    "review_rejected": ("Rejected as unreadable.", "已作为无法识别退回。"),
    "review_rerun_higher": ("The page is read again at a higher resolution; it comes back to "
                            "the queue if it still needs review.",
                            "该页将以更高分辨率重新识别；如仍需复核，会回到队列。"),
    "review_no_other": ("There is no other engine to read this page with (the vision model is "
                        "not installed); try a higher resolution (H).",
                        "没有可用于识别此页的其他引擎（未安装视觉模型）；请尝试更高分辨率（H）。"),
    "review_rerun_other": ("The page is read again by the {engine} engine; it comes back to the "
                           "queue if it still needs review.",
                           "该页将由 {engine} 引擎重新识别；如仍需复核，会回到队列。"),
    "review_turned": ("The page is read again, turned as you asked; it comes back to the queue "
                      "if it still needs review.",
                      "该页已按您的要求旋转并重新识别；如仍需复核，会回到队列。"),
    "review_skipped": ("Skipped: the page went to the back of the queue.",
                       "已跳过：该页已移到队列末尾。"),
    "review_next_open": ("{done} The next page is open.", "{done}已打开下一页。"),
    "review_no_fields_page": ("No page with key fields is open.", "没有打开带关键字段的页面。"),
    "review_no_field_changed": ("No field was changed.", "没有修改任何字段。"),
    "review_held": ("You still hold this page: it was opened again.",
                    "此页仍由您锁定：已重新打开。"),
    "review_reverted": ("Reverted to the machine's reading.", "已恢复为机器识别结果。"),
    "review_internal_error": ("the action failed because of an internal error; the server log "
                              "has the details", "内部错误，操作失败；详情见服务器日志"),
    "review_log_in": ("Log in to review pages.", "请登录后复核页面。"),
    "other_text": ("Text", "文本"),
    # the history's details (ui.document_view.history_rows): an intake, an attempt, and
    # the names of an event's details (appliance.store.transitions), their values as given
    "history_intake": ("{name} ({n} pages, {doc_type})", "{name}（{n} 页，{doc_type}）"),
    "history_confidence": ("{engine} confidence {confidence}", "{engine} 置信度 {confidence}"),
    "detail_source": ("source", "来源"),
    "detail_pages": ("pages", "页数"),
    "detail_code": ("code", "原因代码"),
    "detail_worker": ("worker", "工作进程"),
    "detail_attempt": ("attempt", "识别轮次"),
    "detail_reasons": ("reasons", "原因"),
    "detail_reason": ("reason", "原因"),
    "detail_files": ("files", "文件"),
    "detail_timings_ms": ("timings_ms", "耗时（毫秒）"),
    "detail_message": ("message", "消息"),
    "detail_disposition": ("disposition", "处置方式"),
    "detail_target": ("target", "目标"),
    "detail_detail": ("detail", "详情"),
    "detail_changes": ("changes", "更改"),
    "detail_name": ("name", "名称"),
}

_PASSWORD_ZH = ("请带密码重新上传（网页界面的密码栏、API 的 `password` 表单字段），放入配置了其密码的"
                "监视文件夹，或解除密码（例如用 `qpdf --decrypt --password=PASSWORD in.pdf "
                "out.pdf`）")
# a failure's specifics in Chinese, by appliance.errors.SAID's key (whose English they
# are): the case's facts and values; the code's sentence (error_<code>) says the remedy
_SAID_ZH = {
    "empty": "0 字节",
    "signature_cut": "文件只有 {size} 字节，在其文件签名处就已结束",
    "other_format": "此文件是 {what}；一体机只识别扫描文档和图像（PDF、PNG、JPEG、TIFF、BMP、WebP 和 GIF）",
    "misnamed": "文件名表明它是 {named}，但内容并非如此，也不是一体机认识的任何文件类型",
    "no_signature": "文件开头没有任何已知的文件签名：文件已损坏（例如被截断或覆盖），或者不是文档",
    "over_bytes": "上限为 {limit} 字节；请拆分文件，或调高 limits.max_bytes",
    "over_pages": "文档有 {pages} 页，上限为 {limit} 页；请拆分文档，或调高 limits.max_pages",
    "over_pixels": "图像为 {width}×{height} 像素，超过上限 {limit} 像素；请以较低分辨率扫描或导出后重新提交",
    "bomb": "图像过大，无法安全处理（{detail}）；请以较低分辨率扫描或导出后重新提交",
    "frame_bomb": "图像过大，无法安全处理（{detail}）",
    "pdf_password": "PDF 受密码保护。" + _PASSWORD_ZH,
    "pdf_wrong_password": "所给密码打不开此 PDF。" + _PASSWORD_ZH,
    "pdf_watch_password": "PDF 的密码打不开它：请检查监视文件夹配置的密码。" + _PASSWORD_ZH,
    "pdf_unopened": "PDF 无法打开（{detail}）",
    "pdf_cut": "PDF 无法打开（{detail}），且没有文件结束标记",
    "pdf_page_unrendered": "PDF 第 {page} 页无法渲染（{detail}）",
    "image_unread": "{kind} 图像无法读取（{detail}）",
    "image_unread_cut": "{kind} 图像无法读取（{detail}）",
    "image_undecoded": "{kind} 图像无法解码（{detail}）",
    "image_undecoded_cut": "{kind} 图像无法解码（{detail}）",
    "frame_undecoded": "{kind} 图像第 {page} 页无法解码（{detail}）",
    "frame_undecoded_cut": "{kind} 图像第 {page} 页无法解码（{detail}）",
    "rejected": "复核员 {reviewer} 判定此页无法识别",
    "rejected_note": "复核员 {reviewer} 判定此页无法识别：{note}",
}
TEXTS.update({f"said_{key}": (SAID[key], zh) for key, zh in _SAID_ZH.items()})
# the kinds of file an intake refusal names, by appliance.intake.sniff.KIND_WORDS' key
_KIND_ZH = {
    "pdf": "PDF 文件", "png": "PNG 图像", "jpeg": "JPEG 图像", "tiff": "TIFF 图像",
    "bmp": "BMP 图像", "webp": "WebP 图像", "gif": "GIF 图像", "rtf": "RTF 文档",
    "ole": "旧版 Microsoft Office 文档（.doc、.xls 或 .ppt）", "postscript": "PostScript 文件",
    "jpeg2000": "JPEG 2000 图像", "djvu": "DjVu 文档", "gzip": "gzip 压缩包",
    "7z": "7-Zip 压缩包", "rar": "RAR 压缩包", "docx": "Word 文档（.docx）",
    "xlsx": "Excel 工作簿（.xlsx）", "pptx": "PowerPoint 演示文稿（.pptx）",
    "opendocument": "OpenDocument 文件（.odt、.ods 或 .odp）", "epub": "EPUB 电子书",
    "office": "Microsoft Office 文档", "zip": "ZIP 压缩包（请解压后提交其中的扫描件）",
    "heic": "HEIC 图像", "heif": "HEIF 图像", "avif": "AVIF 图像", "svg": "SVG 矢量图",
    "html": "HTML 网页", "xml": "XML 文件", "text": "纯文本文件",
}
TEXTS.update({f"kind_{key}": (KIND_WORDS[key], zh) for key, zh in _KIND_ZH.items()})
_KIND_KEYS = {words: key for key, words in KIND_WORDS.items()}


def _check() -> None:
    for key, pair in TEXTS.items():
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ValueError(f"ui.i18n: {key!r} is not (English, Chinese)")


_check()

# Gradio's translations, by the page's language (the browser does the lookup)
I18N = gr.I18n(**{EN: {key: en for key, (en, _zh) in TEXTS.items()},
                  ZH: {key: zh for key, (_en, zh) in TEXTS.items()}})


def label(key: str) -> gr.i18n.I18nData:
    """A component's label, button or static Markdown: translated in the browser."""
    if key not in TEXTS:
        raise KeyError(f"ui.i18n: no text {key!r}")
    return I18N(key)


def text(key: str, lang: str = EN, **values: Any) -> str:
    """The text of ``key`` in ``lang`` (English for any other), ``values`` filled in."""
    en, zh = TEXTS[key]
    chosen = zh if lang == ZH else en
    return chosen.format(**values) if values else chosen


def said_value(value: str, lang: str = EN) -> str:
    """A value of a failure's specifics in ``lang``: a kind of file the intake named
    translated, any other (a size, a limit, a decoder's own words) as it is."""
    key = _KIND_KEYS.get(value)
    return text(f"kind_{key}", lang) if key else value


def plural(key: str, n: int, lang: str = EN, **values: Any) -> str:
    """``key``_one or ``key``_other by ``n`` (given to the text as {n})."""
    return text(f"{key}_one" if n == 1 else f"{key}_other", lang, n=n, **values)


def texts(keys, lang: str = EN) -> list[str]:
    return [text(key, lang) for key in keys]


def status_text(status: str, lang: str = EN) -> str:
    """A document's or page's status word ("done"), translated; an unknown one as it is."""
    key = f"status_{status}"
    return text(key, lang) if key in TEXTS else str(status)


def check_text(check: Mapping[str, Any], lang: str = EN) -> str:
    """A field check's words (``fields.validate``): by its code and values, translated;
    a check stored before checks had codes, as its message."""
    key = f"check_{check.get('code')}"
    if key in TEXTS and isinstance(check.get("values"), Mapping):
        try:
            return text(key, lang, **check["values"])
        except KeyError:  # values of another version of the words
            pass
    return str(check.get("message", ""))


def memory_text(memory: Mapping[str, Any], lang: str = EN) -> str:
    """The memory's state (``MemoryWatch.status``), e.g. "paused: GPU memory 87 %", in
    ``lang``; a state of another version, as its message."""
    state = f"memory_state_{memory.get('state')}"
    if state not in TEXTS:
        return str(memory.get("message", ""))
    if memory.get("fraction") is None:
        return text("memory_no_sample", lang, state=text(state, lang))
    source = f"memory_source_{memory.get('source')}"
    return text("memory_line", lang, state=text(state, lang),
                label=text(source if source in TEXTS else "memory_source_other", lang),
                percent=f"{memory['fraction'] * 100:.0f}")


def history_kind_text(kind: str, attempt: int | None, lang: str = EN) -> str:
    """A history entry's kind (``library.HistoryEntry``) in ``lang``: an attempt's
    number and outcome, or an event; a kind of another version, as it is."""
    key = f"event_{kind}"
    said = text(key, lang) if key in TEXTS else str(kind)
    return said if attempt is None else text("event_attempt", lang, n=attempt, outcome=said)


def reason_name(code: str, lang: str = EN) -> str:
    """A routing reason's code (``quality.routing``) named in ``lang``; an unknown one as
    it is."""
    key = f"reason_{code}"
    return text(key, lang) if key in TEXTS else str(code)


def reason_text(reason: str, lang: str = EN) -> str:
    """A routing reason as recorded ("low_confidence: 0.420 < 0.5"), after its name in
    ``lang`` where that is not the code itself: the code stays what a filter, the API
    and the README name it by."""
    code = reason_code(reason)
    name = reason_name(code, lang)
    return reason if name == code else text("reason_named", lang, name=name, reason=reason)


def doc_type_text(doc_type: str, lang: str = EN) -> str:
    """A document type's name in ``lang``; an unknown one as it is."""
    key = f"doctype_{doc_type}"
    return text(key, lang) if key in TEXTS else str(doc_type)


def doc_type_choices() -> list:
    """The document types as dropdown entries: (translated name, type)."""
    from appliance.config import DOC_TYPES
    return [(label(f"doctype_{t}"), t) for t in DOC_TYPES]


def source_text(source: str, lang: str = EN) -> str:
    key = f"source_{source}"
    return text(key, lang) if key in TEXTS else str(source)


def from_accept_language(header: str | None) -> str:
    """The language of an Accept-Language header: Chinese when the first language the
    browser names that we have is Chinese (zh, zh-CN, zh-Hans, zh-SG, ...), else English."""
    weighted = []
    for position, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        if params.strip().startswith("q="):
            try:
                quality = float(params.strip()[2:])
            except ValueError:
                quality = 0.0
        if tag and quality > 0:
            weighted.append((-quality, position, tag.strip().lower()))
    for _q, _p, tag in sorted(weighted):
        if tag == "zh" or tag.startswith("zh-"):
            # Traditional Chinese is not offered: Simplified is closer than English
            return ZH
        if tag == "en" or tag.startswith("en-"):
            return EN
    return EN


def chosen_language(cookie: str | None) -> str | None:
    """The language a person chose (the cookie), if it is one we have."""
    return cookie if cookie in LANGUAGES else None


def language_of(request: Any) -> str:
    """The language of a request (a Starlette or Gradio request, or None): the one chosen
    in this browser, else its Accept-Language."""
    if request is None:
        return EN
    cookies: Mapping[str, str] = getattr(request, "cookies", None) or {}
    headers: Mapping[str, str] = getattr(request, "headers", None) or {}
    return chosen_language(cookies.get(LANGUAGE_COOKIE)) or from_accept_language(
        headers.get("accept-language"))


def language_script(lang: str, title_key: str = "app_title") -> str:
    """Put first in a page of a mounted UI: Gradio picks its language from
    ``navigator.language`` as it starts, and takes the server's. The page's title (a
    plain string to Gradio) is kept in that language too."""
    return f"""<script>(() => {{
  const lang = {json.dumps(lang)}, title = {json.dumps(text(title_key, lang), ensure_ascii=False)};
  for (const name of ["language", "languages"]) {{
    Object.defineProperty(Navigator.prototype, name, {{
      configurable: true, get: () => name === "language" ? lang : [lang]}});
  }}
  document.documentElement.lang = lang;
  const titled = () => {{ if (document.title !== title) document.title = title; }};
  new MutationObserver(titled).observe(document.head,
                                  {{subtree: true, childList: true, characterData: true}});
  titled();
}})();</script>"""
