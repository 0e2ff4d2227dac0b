"""The UI's words in English and Simplified Chinese.

Labels go through Gradio's I18n, so the page follows the browser's language and the language
switch in Gradio's settings panel. Messages the server writes (errors, reports) follow the
request's Accept-Language, since they are built with numbers and names inside.
"""

from __future__ import annotations

import gradio as gr

EN: dict[str, str] = {
    "title": "Knowledge appliance",
    "logout": "Log out",
    "tab_chat": "Chat", "tab_documents": "Documents", "tab_admin": "Admin", "tab_account": "Account",
    "new_chat": "New chat", "conversations": "Conversations", "delete_chat": "Delete chat",
    "answer": "Answer", "question_placeholder": "Ask a question about your documents…",
    "ask": "Ask", "stop": "Stop", "sources": "Sources", "sources_hint": "Sources appear here.",
    "upload": "Upload documents", "upload_go": "Upload and index", "indexed": "Indexed documents",
    "upload_collection": "Collection",
    "upload_not_allowed": "You may not add documents to the collection “{collection}”.",
    "remove_source": "Source to remove", "remove": "Remove", "reindex": "Re-index all folders",
    "latency": "Latency (s)", "throughput": "Throughput (tokens/s)", "requests": "Requests",
    "kv_cells": "KV cells", "users": "Users", "user": "User", "new_password": "Password (new users)",
    "administrator": "Administrator", "add_user": "Add user", "create_key": "Create API key",
    "revoke_keys": "Revoke user's keys", "current_password": "Current password",
    "password_new": "New password", "password_repeat": "New password again", "change_password": "Change password",
    "auth_message": "Knowledge appliance: log in with your account. 知识库一体机：请用您的账号登录。",
    # Server-written messages (format fields in braces).
    "busy": "The server is busy answering other questions. Please try again in {seconds} s.",
    "engine_failed": "The answer could not be completed: {error}",
    "busy_title": "Busy", "session_ended": "Your session has ended. Please log in again.",
    "admins_only": "Administrators only.", "upload_admins_only": "Only administrators can upload documents.",
    "choose_files": "Choose files first.", "removed": "Removed {n} document(s).", "indexing": "indexing",
    "password_changed": "Password changed. Other sessions of this account have ended.",
    "passwords_differ": "The two new passwords differ.", "wrong_password": "The current password is wrong.",
    "no_sources": "No sources.", "not_covered_head": "Not covered by the documents. Nearest sources:",
    "page_n": "page {n}", "open_source": "open the document", "also_in": "The same passage is also in:",
    "not_cited": "searched, not cited",
    "document": "Document (click a row above)", "doc_question": "Question about this whole document",
    "summarise": "Summarise", "ask_document": "Ask about this document",
    "doc_progress_map": "Reading the document: section {done} of {total}…",
    "doc_progress_reduce": "Combining notes: {done} of {total}…",
    "unsupported_note": "⚠ marks a sentence the cited excerpts do not support: check it in the sources.",
}
ZH: dict[str, str] = {
    "title": "知识库一体机",
    "logout": "退出登录",
    "tab_chat": "对话", "tab_documents": "文档", "tab_admin": "管理", "tab_account": "账号",
    "new_chat": "新对话", "conversations": "对话记录", "delete_chat": "删除对话",
    "answer": "回答", "question_placeholder": "输入关于文档的问题…",
    "ask": "提问", "stop": "停止", "sources": "来源", "sources_hint": "来源会显示在这里。",
    "upload": "上传文档", "upload_go": "上传并建立索引", "indexed": "已索引的文档",
    "upload_collection": "文档集合",
    "upload_not_allowed": "你无权向文档集合“{collection}”添加文档。",
    "remove_source": "要移除的来源", "remove": "移除", "reindex": "重新索引全部文件夹",
    "latency": "延迟（秒）", "throughput": "吞吐量（词元/秒）", "requests": "请求",
    "kv_cells": "键值缓存单元", "users": "用户", "user": "用户名", "new_password": "密码（新用户）",
    "administrator": "管理员", "add_user": "添加用户", "create_key": "创建 API 密钥",
    "revoke_keys": "吊销该用户的密钥", "current_password": "当前密码",
    "password_new": "新密码", "password_repeat": "再次输入新密码", "change_password": "修改密码",
    "auth_message": EN["auth_message"],
    "busy": "服务器正忙于回答其他问题，请在 {seconds} 秒后重试。",
    "engine_failed": "无法完成回答：{error}",
    "busy_title": "繁忙", "session_ended": "会话已结束，请重新登录。",
    "admins_only": "仅限管理员。", "upload_admins_only": "只有管理员可以上传文档。",
    "choose_files": "请先选择文件。", "removed": "已移除 {n} 个文档。", "indexing": "正在建立索引",
    "password_changed": "密码已修改，此账号的其他会话已结束。",
    "passwords_differ": "两次输入的新密码不一致。", "wrong_password": "当前密码不正确。",
    "no_sources": "没有来源。", "not_covered_head": "文档中没有涉及。最接近的来源：",
    "page_n": "第 {n} 页", "open_source": "打开文档", "also_in": "相同段落也见于：",
    "not_cited": "已检索，未引用",
    "document": "文档（点击上方的一行）", "doc_question": "关于整份文档的问题",
    "summarise": "总结", "ask_document": "就此文档提问",
    "doc_progress_map": "正在阅读文档：第 {done} 节，共 {total} 节…",
    "doc_progress_reduce": "正在合并笔记：{done}/{total}…",
    "unsupported_note": "⚠ 标出的句子在引用的摘录中找不到依据，请对照来源核实。",
}
I18N = gr.I18n(en=EN, **{"zh-CN": ZH})


def t(key: str):
    """A label translated in the browser."""
    return I18N(key)


def lang_of(request: gr.Request | None) -> str:
    """'zh' when the browser prefers Chinese, else 'en'."""
    header = ""
    if request is not None and getattr(request, "headers", None) is not None:
        header = request.headers.get("accept-language", "") or ""
    return "zh" if header.lower().lstrip().startswith("zh") else "en"


def say(request: gr.Request | None, key: str, **fields) -> str:
    """A server-written message in the request's language."""
    table = ZH if lang_of(request) == "zh" else EN
    return table[key].format(**fields)
