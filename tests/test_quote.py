"""Quoted answers: pure logic (picking, rendering, marks) and the chat service's three answer styles
over the real sample index (retrieval and the embedder are real; the quote style runs no model,
which the stand-in below proves by refusing to be called). The units quotes are cut into are tested
in test_sentences.py, the grounding check in test_grounding.py."""

from __future__ import annotations

import pytest

from appliance.server.chat import QUOTE_LEAD, ChatService, RagSettings
from knowledge.answer import grounding, quote
from knowledge.answer.sentences import units
from knowledge.index.access import EVERYTHING
from knowledge.ingest.folder import ingest
from knowledge.retrieve.retriever import Retriever

from .kb_helpers import RefusingModel, open_kb


def test_pick_quotes_the_sentence_with_the_fact_and_its_citation():
    excerpts = [(1, "Getting started.\nThe server listens on port 8000 of 127.0.0.1 by default. Logs go to "
                    "the journal."),
                (2, "Backups copy the data directory every night.")]
    idf = {"port": 3.0, "server": 1.0, "listen": 2.0, "default": 1.0}
    picked = quote.pick("Which port does the server listen on by default?", excerpts, "en", idf)
    assert picked[0].n == 1 and "8000" in picked[0].unit.text
    assert "Backups" not in quote.render(picked) and quote.render(picked).endswith("[1]")


def test_a_heading_alone_is_never_the_answer():
    excerpts = [(1, "Data directory\n\nEverything the appliance keeps lives under /srv/appliance/data.")]
    picked = quote.pick("data directory", excerpts, "en", {"data": 1.0, "directori": 2.0})
    assert picked and all(not q.unit.is_heading for q in picked)
    assert "/srv/appliance/data" in quote.render(picked)


def test_a_title_that_closes_an_excerpt_is_not_quoted():
    excerpts = [(1, "The service listens on port 8000 by default."), (2, "Port numbers\n\nConfigure services")]
    rendered = quote.render(quote.pick("Which port does the service use?", excerpts, "en",
                                       {"port": 2.0, "servic": 1.0}))
    assert "port 8000" in rendered and "Configure services" not in rendered and "[2]" not in rendered
    assert quote.pick("port services", [(1, "Configure services")], "en", {"servic": 1.0}) == []


def test_a_documents_footnote_marks_do_not_read_as_citations():
    excerpts = [(1, "Systems with less memory[2] may install. Press Alt+F2^[13] for a shell:\n\n    echo $argv[1]")]
    rendered = quote.render(quote.pick("less memory shell", excerpts, "en", {"memori": 1.0, "shell": 1.0}))
    assert "less memory may install" in rendered and "Alt+F2 for a shell" in rendered
    assert "`echo $argv[1]`" in rendered  # code keeps its brackets
    assert grounding.cited_numbers(rendered.replace("$argv[1]", "")) == {1}


@pytest.mark.parametrize("question, lang, amount", [
    ("How many languages does the installer speak?", "en", "more than 80 languages"),
    ("安装程序支持多少种语言？", "zh", "超过八十种语言"),
])
def test_a_question_for_an_amount_is_answered_with_the_number(question, lang, amount):
    # Found on the installation guide: "How many …" was answered with the sentences that share its
    # words, and the one with the number, a little further down, was left out.
    words = {"en": ("The installer asks which language to use and speaks it throughout.",
                    "It has been translated to more than 80 languages."),
             "zh": ("安装程序会询问使用哪种语言，并在整个安装过程中支持这种语言。",
                    "它已被翻译成超过八十种语言。")}[lang]
    idf = {"en": {"languag": 3.0, "instal": 1.0, "speak": 1.0}, "zh": {"安装程序": 1.0, "支持": 1.0, "语言": 3.0}}[lang]
    excerpts = [(1, words[0]), (2, words[1])]
    assert amount in quote.render(quote.pick(question, excerpts, lang, idf))
    plain = question.replace("How many", "Which").replace("多少种", "哪些")  # no amount asked: no number preferred
    assert amount not in quote.render(quote.pick(plain, excerpts, lang, idf))


def test_a_unit_a_colon_introduces_is_quoted_with_its_introduction():
    # Found on Debian Policy: a definition list's term stood on its own line ("0-99:"), and the quote
    # gave the definition without the range the question asked for.
    text = ("0-99:\n\nGlobally allocated by the Debian project, the same on every Debian system.\n\n"
            "100-999:\n\nDynamically allocated system users and groups.")
    rendered = quote.render(quote.pick("Which user IDs does the Debian project hand out globally?", [(1, text)],
                                       "en", {"global": 3.0, "alloc": 1.0, "debian": 0.5, "project": 1.0}))
    assert "0-99: Globally allocated by the Debian project" in rendered


def test_a_written_answers_prompt_has_no_footnote_marks_that_read_as_citations():
    from appliance.server.chat import question_turn

    text = "Systems with less memory[2] may install.\n\n    echo $argv[1]\n"
    turn = question_turn("memory?", [{"n": 1, "source": "a.html", "page": None, "heading": "", "text": text}], "en")
    assert "less memory may install" in turn["content"] and "echo $argv[1]" in turn["content"]  # code keeps its own
    assert grounding.cited_numbers(turn["content"].replace("$argv[1]", "")) == {1}


def test_a_numbered_section_title_is_a_heading_at_any_length():
    assert units("3.1.3 Services running on the main server")[0].is_heading
    assert not units("3.1 The answer is in this sentence, which goes on for a while.")[0].is_heading
    text = ("The main server is called tjener and it has the address 10.0.2.2 by default in every school.\n"
            "3.1.3 Services running on the main server\nWith the exception of thin clients, all services run on it.")
    rendered = quote.render(quote.pick("what is the main server called", [(1, text)], "en",
                                       {"main": 1.0, "server": 1.0, "call": 1.0}))
    assert "tjener" in rendered and "3.1.3" not in rendered


def test_a_faqs_question_is_not_quoted_its_answer_is():
    faq = "Can I ship my commercial program as a Debian package? Go right ahead. You need no permission."
    rendered = quote.render(quote.pick("ship a commercial program as a package", [(1, faq)], "en",
                                       {"commerci": 2.0, "program": 1.0, "packag": 0.5}))
    assert rendered.startswith("> Go right ahead.") and "?" not in rendered
    assert quote.pick("ship commercial programs", [(1, "Can I ship commercial programs?")], "en",
                      {"commerci": 2.0, "program": 1.0}) == []
    faqs = "The daemon is restarted during a package upgrade. Do I have to keep all those .deb files?"
    rendered = quote.render(quote.pick("restart daemon during upgrade", [(1, faqs)], "en",
                                       {"daemon": 2.0, "restart": 1.0, "upgrad": 1.0}))
    assert "package upgrade." in rendered and "?" not in rendered  # the next entry's question stays out


def test_a_sentence_ending_in_a_colon_brings_its_whole_command():
    excerpts = [(1, "To rebuild the index run:\n\n    appliance ingest ./docs --reindex --yes\n\nIt takes a while.")]
    rendered = quote.render(quote.pick("How do I rebuild the index?", excerpts, "en", {"rebuild": 2.0, "index": 1.0}))
    assert "`appliance ingest ./docs --reindex --yes`" in rendered


def test_an_english_answer_leaves_out_chinese_sentences_and_a_chinese_one_keeps_english():
    excerpts = [(1, "Create an account with appliance users add alice."),
                (2, "用 appliance users add alice 命令创建账号。")]
    idf = {"add": 1.0, "user": 1.0, "alic": 2.0}  # the question's terms, as the index weighs them
    english = quote.render(quote.pick("How do I add the user alice?", excerpts, "en", idf))
    assert "appliance users add alice." in english and "账号" not in english
    chinese = quote.render(quote.pick("alice 的账号", excerpts[::-1], "zh", {"alic": 2.0, "账号": 1.0}))
    assert "账号" in chinese and "Create an account" in chinese  # the English original stays beside it
    only = quote.render(quote.pick("How do I add the user alice?", excerpts[1:], "en", idf))
    assert "账号" in only  # no English sentence at all: the Chinese one is still the answer


def test_a_sentence_in_another_copys_wording_is_quoted_once():
    html = 'It is possible to copy a CD/BD .iso image to USB flash drives (also known as "USB sticks") and boot.'
    pdf = "It is possible to copy a CD/BD ISO image to USB flash drives (also known as ”USB sticks”) and boot."
    idf = {"copi": 1.0, "iso": 2.0, "usb": 2.0}
    picked = quote.pick("copy the iso image to usb", [(1, html), (2, pdf)], "en", idf)
    assert [q.n for q in picked] == [1]
    other = "It is possible to copy a CD/BD ISO image to USB flash drives but not to boot from them."
    assert [q.n for q in quote.pick("copy the iso image to usb", [(1, html), (2, other)], "en", idf)] == [1, 2]


def test_copies_are_quoted_once_and_empty_excerpts_give_nothing():
    same = "The default port is 8000."
    picked = quote.pick("default port", [(1, same), (2, same)], "en", {"default": 1.0, "port": 2.0})
    assert [q.n for q in picked] == [1]
    assert quote.pick("default port", [(1, ""), (2, "   ")], "en", {"port": 1.0}) == []


@pytest.mark.parametrize("question,fact", [("Which port does the server listen on by default?", "8000"),
                                           ("默认情况下服务监听哪个端口？", "8000 端口。如果"),
                                           ("How do I back up the appliance?", "copy the whole data directory"),
                                           ("怎样备份一体机？", "复制整个数据目录")])
def test_quote_style_answers_the_readme_questions_with_the_fact(retriever, question, fact):
    chat = ChatService(RefusingModel(), retriever, RagSettings(top_k=2, answer_style="quote"))
    prepared = chat.prepare([{"role": "user", "content": question}], scope=EVERYTHING)
    answer = prepared.fixed_answer
    assert prepared.style == "quote" and chat.submit(prepared, chat.answer_params("t")) is None
    assert answer.startswith(QUOTE_LEAD[prepared.lang]) and fact in answer and "[1]" in answer
    assert all(c.supported is not False for c in chat.ground(prepared, answer))


def test_hybrid_style_prompts_with_the_quotes_and_appends_them(retriever):
    chat = ChatService(RefusingModel(), retriever, RagSettings(top_k=2, answer_style="hybrid"))
    prepared = chat.prepare([{"role": "user", "content": "Which port does the server listen on by default?"}],
                            scope=EVERYTHING)
    assert prepared.style == "hybrid" and prepared.fixed_answer is None
    assert prepared.quoted in prepared.messages[-1]["content"] and prepared.suffix.endswith(prepared.quoted)


def test_generate_style_and_a_wrong_style(retriever):
    chat = ChatService(RefusingModel(), retriever, RagSettings(top_k=2))
    prepared = chat.prepare([{"role": "user", "content": "Which port does the server listen on by default?"}],
                            scope=EVERYTHING)
    assert prepared.style == "generate" and not prepared.quoted and prepared.suffix == ""
    with pytest.raises(ValueError, match="answer style must be one of"):
        ChatService(RefusingModel(), retriever, RagSettings(answer_style="poem"))


@pytest.mark.parametrize("question,words", [("Which port?", "knowledge base is empty"), ("哪个端口？", "知识库是空的")])
def test_an_empty_knowledge_base_says_so_in_every_style(tmp_path, embedder, question, words):
    chat = ChatService(RefusingModel(), Retriever(open_kb(tmp_path, embedder)), RagSettings(answer_style="quote"))
    prepared = chat.prepare([{"role": "user", "content": question}], scope=EVERYTHING)
    assert not prepared.covered and words in prepared.fixed_answer and not prepared.citations


def test_the_chat_page_marks_an_invented_sentence(retriever):
    """The UI's final answer: ⚠ after the sentence the excerpts do not support, and the note."""
    from types import SimpleNamespace

    from ui.chat import _grounded

    chat = ChatService(RefusingModel(), retriever, RagSettings(top_k=2))
    prepared = chat.prepare([{"role": "user", "content": "Which port does the server listen on by default?"}],
                            scope=EVERYTHING)
    svc = SimpleNamespace(chat=chat)
    true = "The server listens on port 8000 by default [1]."
    assert _grounded(svc, prepared, true, None) == true
    marked = _grounded(svc, prepared, f"{true} It also mirrors every answer to a Slack channel nightly.", None)
    assert "nightly. ⚠" in marked and "8000 by default [1]. ⚠" not in marked and "⚠ marks a sentence" in marked
    assert chat.counts["unsupported"] == 1 and chat.counts["supported"] >= 2


def test_a_question_in_the_other_language_gets_an_honest_answer(tmp_path, embedder):
    """Chinese asked of English-only documents: declined, or quoted in the documents' own words
    with citations; never an empty quote."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Ports\n\nThe server listens on port 8000 by default.\n")
    kb = open_kb(tmp_path / "data", embedder)
    ingest(kb, tmp_path / "docs")
    chat = ChatService(RefusingModel(), Retriever(kb), RagSettings(top_k=2, answer_style="quote"))
    prepared = chat.prepare([{"role": "user", "content": "服务器默认监听哪个端口？"}], scope=EVERYTHING)
    assert prepared.lang == "zh" and prepared.fixed_answer
    assert not prepared.covered or ("[1]" in prepared.fixed_answer and "8000" in prepared.fixed_answer)


def test_a_chunk_cut_mid_sentence_is_completed_from_the_document():
    assert quote.sentence_end("codenames used are: buzz for release", "\n1.1, rex for release 1.2. Later") == \
        "codenames used are: buzz for release\n1.1, rex for release 1.2."
    assert quote.sentence_end("A whole sentence.", " Next one.") == "A whole sentence."
    assert quote.sentence_end("默认监听", "8000 端口。如果") == "默认监听8000 端口。"
    assert quote.sentence_end("no end in", " sight at all") == "no end in sight at…"


def test_the_document_text_after_an_offset_comes_from_the_chunk_that_holds_it(retriever):
    db, kb = retriever.kb.db, retriever.kb.cfg.name
    hit = retriever.search("Which port does the server listen on by default?", k=1, scope=EVERYTHING)[0]
    after = db.text_after(kb, hit.source, hit.start + 10, 40)
    assert after and hit.text[10:50].startswith(after[:20])
    assert db.text_after(kb, "no/such/file.md", 0, 40) == ""


def test_the_quote_lead_is_its_own_sentence():
    """"文档中的原文：" then a quoted question-like heading: two units, not one half-supported one."""
    checked = grounding.check("文档中的原文：\n\n> “不稳定版”包含什么？ [1]", ["“不稳定版”包含什么？"])
    assert [c.text for c in checked] == ["文档中的原文：", "“不稳定版”包含什么？ [1]"]


def test_a_gap_between_two_quoted_sentences_is_shown():
    text = "The port is 8000. Logs go to the journal. Weather is fine. The port can be changed with --port."
    rendered = quote.render([quote.Quote(1, u, 1.0) for u in units(text) if "port" in u.text])
    assert rendered == "> The port is 8000. … The port can be changed with --port. [1]"


def test_a_chunk_ending_on_a_colon_gets_the_block_it_introduces():
    tail = "\n\n    ldapvi -ZD '(cn=admin)'\n\nNote: the default editor is used."
    assert quote.sentence_end("The following needs to be executed:", tail) == \
        "The following needs to be executed:\n\n    ldapvi -ZD '(cn=admin)'"


def test_a_following_sentence_that_ends_in_a_colon_brings_its_command():
    """The best sentence names the tool; the one after it opens the command: both, and the command."""
    excerpts = [(1, "ldapvi edits the LDAP database in a text editor.\n\nThe following needs to be executed:\n\n"
                    "ldapvi -ZD '(cn=admin)'\n\nNote: ldapvi uses the default editor.")]
    idf = {"ldap": 3.0, "databas": 1.0, "text": 1.0, "editor": 2.0}
    rendered = quote.render(quote.pick("How do I edit the LDAP database in a text editor?", excerpts, "en", idf))
    assert "ldapvi -ZD '(cn=admin)'" in rendered


def test_a_copy_with_other_footnote_marks_is_quoted_once_and_keeps_its_neighbour():
    """The HTML copy ("system[16]") and the PDF ("system²") of one passage: the sentence after the
    best one is quoted even when the other copy holds the same sentence, and the best is not repeated."""
    html = "Tools on the system[16] send notices by e-mail. Install exim4 and mutt with apt install exim4 mutt."
    pdf = "Tools on the system² send notices by e-mail.\nInstall exim4 and mutt with apt install exim4 mutt."
    idf = {"system": 1.0, "notic": 3.0, "e-mail": 2.0, "mail": 2.0}
    rendered = quote.render(quote.pick("Which tools send notices by e-mail?", [(1, pdf), (2, html)], "en", idf))
    assert "apt install exim4 mutt" in rendered and rendered.count("send notices") == 1


def test_quotes_are_picked_from_more_excerpts_than_a_small_model_reads(retriever):
    """quote_excerpts widens what is quoted from; the gate judges the top_k alone, so a question the
    top_k does not cover is declined however wide the quotes may look."""
    question = [{"role": "user", "content": "How do I back up the appliance?"}]
    quoting = ChatService(RefusingModel(), retriever, RagSettings(top_k=2, quote_excerpts=4, answer_style="quote"))
    assert len(quoting.prepare(question, scope=EVERYTHING).citations) == 4
    writing = ChatService(RefusingModel(), retriever, RagSettings(top_k=2, quote_excerpts=4))
    assert len(writing.prepare(question, scope=EVERYTHING).citations) == 2
    # The gate is handed the top_k excerpts, never the wider quoting set. (Comparing the two scores
    # instead depended on the CPU: the int8 embedder's vectors move with their batch, and on an
    # AVX-512 VNNI machine the wider score came out lower.)
    judged: list[int] = []
    relevance = quoting.relevance
    quoting.relevance = lambda q, hits, lang: judged.append(len(hits)) or relevance(q, hits, lang)
    prepared = quoting.prepare([{"role": "user", "content": "How many vacation days do I get?"}], scope=EVERYTHING)
    assert judged == [2] and prepared.coverage != "full"  # declined, or passages under a warning


@pytest.mark.parametrize("question", ["What is the biggest file the ingest accepts by default?",
                                      "How do I give another internal tool access through the API?"])
def test_a_paraphrase_that_matches_one_sentence_is_covered(retriever, question):
    """The English gate scores the best sentence, not the whole chunk: these sample paraphrases share
    one sentence's meaning and few of its words, and were declined when the chunk's vector judged."""
    chat = ChatService(RefusingModel(), retriever, RagSettings(top_k=2, answer_style="quote"))
    assert chat.prepare([{"role": "user", "content": question}], scope=EVERYTHING).covered
    off_topic = chat.prepare([{"role": "user", "content": "Who won the football match last night?"}], scope=EVERYTHING)
    assert not off_topic.covered


def test_a_comment_sentence_wrapped_over_lines_is_quoted_to_its_end_with_its_commands():
    """A configuration file's comment is prose wrapped by hand, each line a unit: the lines that finish
    the best line's sentence come with it, then the commands its colon introduces, not the prose after."""
    text = ("# Other questions may be asked. To get a list of every\n"
            "# possible question that could be asked, do an\n"
            "# installation, and then run these commands:\n"
            "#   debconf-get-selections --installer > file\n"
            "#   debconf-get-selections >> file\n\n"
            "Preseeding the locale sets the default of the installed system.")
    idf = {"list": 2.0, "everi": 1.0, "question": 2.0}
    rendered = quote.render(quote.pick("How do I get a list of every question?", [(1, text)], "en", idf))
    assert "`#   debconf-get-selections >> file` [1]" in rendered and "do an`" in rendered
    assert "locale" not in rendered


def test_copies_of_a_quoted_sentence_leave_room_for_the_next_one():
    """The HTML, PDF and DOCX copies of the best passage rank right under it: they add nothing to the
    quote, so they must not use up its units before the sentence from another passage is reached."""
    same = "The default port is 8000. Logs go to the journal."
    excerpts = [(1, same), (2, same), (3, same), (4, "Change the port with --port.")]
    idf = {"port": 2.0, "default": 1.0, "chang": 0.5}
    rendered = quote.render(quote.pick("Which default port, and how to change it?", excerpts, "en", idf))
    assert "--port" in rendered and rendered.count("8000") == 1


def test_a_further_pick_brings_the_sentence_after_it_when_the_quote_has_room():
    """"You can open a shell in several ways." names the subject; the way follows it."""
    excerpts = [(1, "Open a shell during the installation from the menu."),
                (2, "During the installation you can open a shell in several ways. Press Left Alt+F2.")]
    idf = {"open": 1.0, "shell": 2.0, "instal": 1.0}
    rendered = quote.render(quote.pick("How do I open a shell during the installation?", excerpts, "en", idf))
    assert "Press Left Alt+F2. [2]" in rendered


def test_a_chunk_that_starts_mid_sentence_does_not_repeat_the_sentence_quoted_whole():
    whole = "If the preparer is not a maintainer, the first line of the changelog explains why."
    piece = "a maintainer, the first line of the changelog explains why. Mention the NMU there."
    idf = {"first": 1.0, "line": 1.0, "changelog": 3.0, "nmu": 2.0}
    rendered = quote.render(quote.pick("What does the first changelog line say?", [(1, whole), (2, piece)], "en", idf))
    assert rendered.count("first line of the changelog") == 1 and rendered.startswith("> If the preparer")


@pytest.mark.parametrize("lang, text, question, idf, before", [
    ("en", "Spare text first. The engine keeps a ledger of memory and admits a request only when it fits. "
     "This is what prevents crashes.", "What prevents crashes?", {"prevent": 2.0, "crash": 2.0}, "ledger"),
    ("zh", "先说别的。引擎为内存记账，只在放得下时才接受请求。这样就不会崩溃。", "怎样才不会崩溃？",
     {"崩溃": 2.0}, "记账")])
def test_a_sentence_that_points_back_is_quoted_with_the_one_before_it(lang, text, question, idf, before):
    """"This is what prevents crashes." alone does not say what does: the sentence before it does."""
    rendered = quote.render(quote.pick(question, [(1, text)], lang, idf))
    assert before in rendered and "Spare" not in rendered and "别的" not in rendered


def test_a_sentence_cut_into_paragraphs_by_its_listings_is_quoted_whole():
    """An HTML page's <pre> blocks cut "Then run apt-get update followed by apt-get dist-upgrade" into
    four short paragraphs: none of them is a title ("Then run" stands over no sentence's start), and the
    one that scores brings the rest."""
    text = ("To use apt-get, edit the sources.list file first.\n\nThen run\n\napt-get update\n\nfollowed by\n\n"
            "apt-get dist-upgrade\n\nAnswer any questions that might come up.")
    idf = {"apt": 2.0, "get": 2.0, "updat": 2.0, "command": 1.0}
    rendered = quote.render(quote.pick("Which apt-get commands update the system?", [(1, text)], "en", idf))
    assert "apt-get update followed by apt-get dist-upgrade" in rendered
    assert units("Data directory\n\nThe data directory holds the index.")[0].is_heading  # a title stays one


def test_short_sentences_do_not_use_up_the_quote_before_the_fact():
    # Four short Chinese sentences that share the question's words fill a four-unit quote; the
    # fact, in the next excerpt, still fits the character budget and is quoted (the LibreOffice
    # and install guide's Chinese misses, 2026-12-07).
    excerpts = [(1, "多核处理器用在桌面系统上。桌面系统的处理器有两个核心。"
                    "桌面系统的处理器很快。内核可以侦测桌面系统的处理器。"),
                (2, "桌面系统的最低推荐配置是 1GHz。")]
    idf = {"桌面": 2.0, "系统": 1.0, "推荐": 2.0, "最低": 2.0, "处理器": 4.0}
    rendered = quote.render(quote.pick("桌面系统推荐的最低处理器是什么？", excerpts, "zh", idf))
    assert "1GHz" in rendered and len(rendered) <= quote.MAX_CHARS + 20
