"""Excerpts cut into quotable units (knowledge.answer.sentences): sentences, whole lines of code and
tables, titles, contents lines. Pure logic."""

from __future__ import annotations

from knowledge.answer.sentences import units


def test_hard_wrapped_prose_is_joined_into_sentences():
    text = "The data lives in\n/var/lib/appliance. Back it up\nevery night.\n\nA new paragraph."
    assert [u.text for u in units(text)] == ["The data lives in /var/lib/appliance.", "Back it up every night.",
                                             "A new paragraph."]


def test_chinese_lines_join_without_a_space():
    assert [u.text for u in units("默认只监听本机地址的\n8000 端口。数据保存在\n数据目录中。")] == [
        "默认只监听本机地址的 8000 端口。", "数据保存在数据目录中。"]


def test_code_and_table_rows_stay_whole_lines():
    text = "Start it with:\n\n    appliance serve --port 8000 --host 0.0.0.0\n\n| key | default |\n| port | 8000 |"
    got = units(text)
    assert [u.text for u in got] == ["Start it with:", "appliance serve --port 8000 --host 0.0.0.0",
                                     "| key | default |", "| port | 8000 |"]
    assert [u.whole_line for u in got] == [False, True, True, True]
    assert got[0].opens_list


def test_a_plain_text_rendering_indented_throughout_is_prose():
    text = "The installer asks for\n     a host name. Pick a short one.\n     It must be unique."
    assert all(not u.whole_line for u in units(text))
    assert "a host name." in units(text)[0].text


def test_contents_lines_and_headings_are_recognised():
    toc, heading, sentence = units("6.2 What are all those names? . . . . . . 21\n\nData directory\n\n"
                                   "The data directory holds the index.")
    assert toc.is_contents and heading.is_heading and not sentence.is_heading


def test_a_full_stop_inside_a_word_ends_no_sentence():
    assert [u.text for u in units("Put daily jobs in /etc/cron.{daily,weekly}. Then restart cron.")] == [
        "Put daily jobs in /etc/cron.{daily,weekly}.", "Then restart cron."]


def test_a_pdf_title_line_is_not_glued_to_the_paragraph_under_it():
    text = ("Chapter 8\nNext Steps\n8.1 Shutting down the system\nTo shut down a running system, you must not "
            "use the reset switch on the front or back\nof your computer. Use poweroff or shutdown -h now.")
    got = [u.text for u in units(text)]
    assert got[:3] == ["Chapter 8", "Next Steps", "8.1 Shutting down the system"]
    assert got[3].startswith("To shut down") and got[-1] == "Use poweroff or shutdown -h now."
    wrapped = "A hard-wrapped paragraph of prose runs on to\nthe next line, which is not a title line at all."
    assert len(units(wrapped)) == 1


def test_a_plain_text_listing_longer_than_its_paragraph_stays_code():
    """The base indentation is the prose's (its long lines), not the most common one: a plain-text
    page with one indented paragraph and a longer, deeper-indented listing keeps the listing whole."""
    text = ("     The preseed file below sets the locale and the keyboard layout of the new system.\n\n"
            "         d-i debian-installer/locale string en_US\n"
            "         d-i keyboard-configuration/xkb-keymap select us\n"
            "         d-i netcfg/choose_interface select auto\n")
    got = units(text)
    assert not got[0].whole_line and got[0].text.startswith("The preseed file")
    assert [u.text for u in got[1:]] == ["d-i debian-installer/locale string en_US",
                                         "d-i keyboard-configuration/xkb-keymap select us",
                                         "d-i netcfg/choose_interface select auto"]
    assert all(u.whole_line for u in got[1:])
