"""A quote finishes its thought: a unit that announces what follows it ("as follows:", "the following
command.", "下列命令…。", "如下") is quoted with the block it announces, across a chunk boundary when
the chunk ends on it, and a long block is shortened, never dropped (issue 42). Pure logic: the
picker and the chunk completion, on text cut from real manuals."""

from __future__ import annotations

import pytest

from knowledge.answer import quote
from knowledge.answer.sentences import units


@pytest.mark.parametrize("text, announces", [
    ("The daemon can also be invoked from the command line as follows.", True),
    ("Use the following command to list the installed packages.", True),
    ("另外，可以使用下列命令使非特权用户无需密码就获得管理员权限。", True),
    ("分区表格的格式如下。", True),
    ("可以用以下命令查看。", True),
    ("Insert the disc and use the apt-cdrom command:", True),
    ("The following year the project released its second version", False),  # no block announced
    ("内存在 512 MB 以下的机器不能运行图形安装程序。", False),  # 以下 = "below", not "the following"
    ("The server listens on port 8000.", False),
])
def test_a_unit_announces_what_follows_it(text, announces):
    assert units(text)[-1].announces is announces


@pytest.mark.parametrize("lang, text, question, idf, command", [
    ("zh", "另外，可以使用下列命令使非特权用户无需密码就获得管理员权限。\n\n    echo 'user ALL=(ALL) NOPASSWD: ALL' "
           "> /etc/sudoers.d/user\n\n安装完成后重新启动。",
     "怎样让非特权用户无需密码就获得管理员权限？", {"非特权": 3.0, "密码": 2.0, "管理员": 2.0, "权限": 1.0},
     "NOPASSWD"),
    ("en", "The mirror script can also be invoked by hand as follows.\n\n"
           "    $ sudo debmirror --progress /srv/mirror\n\nMirrors are updated nightly.",
     "How do I run the mirror script by hand?", {"mirror": 3.0, "script": 2.0, "hand": 1.0}, "debmirror --progress"),
])
def test_a_sentence_that_announces_a_command_is_quoted_with_it(lang, text, question, idf, command):
    rendered = quote.render(quote.pick(question, [(1, text)], lang, idf))
    assert command in rendered, rendered


def test_a_chunk_ending_on_an_announcing_sentence_gets_the_block_from_the_next_chunk():
    tail = "\n\n    echo 'user ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/user\n\n安装完成后重新启动。"
    done = quote.sentence_end("另外，可以使用下列命令使非特权用户无需密码就获得管理员权限。", tail)
    assert done.endswith("/etc/sudoers.d/user") and "重新启动" not in done
    # cut mid-sentence: the sentence is finished, then its block follows
    done = quote.sentence_end("The mirror script can also be invoked",
                              " by hand as follows.\n\n    $ debmirror /srv\n\nNext.")
    assert done.endswith("$ debmirror /srv")
    assert quote.sentence_end("The server listens on port 8000.", "\n\n    $ curl localhost:8000") == \
        "The server listens on port 8000."


def test_a_long_announced_block_is_shortened_not_dropped():
    command = "    $ apt-get install " + " ".join(f"package-number-{n}" for n in range(40))
    text = f"Install the tools with the following command.\n\n{command}\n\nThat is all."
    picked = quote.pick("How do I install the tools?", [(1, text)], "en", {"tool": 3.0, "instal": 1.0})
    rendered = quote.render(picked)
    assert "the following command" in rendered and "apt-get install package-number-0" in rendered
    follower = [q.unit.text for q in picked if "apt-get" in q.unit.text][0]
    assert follower.endswith("…") and len(follower) <= quote.FOLLOWER_CHARS + 1
    assert all(len(q.unit.text) <= len(command) for q in picked)


def test_what_a_colon_announces_is_quoted_however_short_it_is():
    """Found on LibreOffice's help and Debian Policy: a formula or a name after a colon is short and
    has no full stop, like a title, and it is the answer."""
    text = ("If you want to calculate time differences, for example, the time between 23:30 and 01:10 in the "
            "same night, use the following formula:\n\n=(B2<A2)+B2-A2\n\nNext topic.")
    rendered = quote.render(quote.pick("What formula gives the time between 23:30 and 01:10?", [(1, text)], "en",
                                       {"formula": 3.0, "time": 1.0}))
    assert "=(B2<A2)+B2-A2" in rendered


def test_the_block_announced_stops_at_a_question():
    text = "Run it like this:\n\nCan I run it twice?\n\nYes, it is safe."
    rendered = quote.render(quote.pick("How do I run it?", [(1, text)], "en", {"run": 2.0}))
    assert "Can I run it twice?" not in rendered


def test_an_announced_list_is_quoted_whole_not_its_first_items():
    """Found on LibreOffice's help: "the following characters are not allowed in sheet names:" and
    eight short items, one a line. Three were quoted, so "question mark ?" and the brackets were not."""
    items = ["colon :", "back slash \\", "forward slash /", "question mark ?", "asterisk *",
             "left square bracket [", "right square bracket ]"]
    text = ("Sheet names can contain almost any character. Some naming restrictions apply, the following "
            "characters are not allowed in sheet names:\n\n" + "\n\n".join(items) +
            "\n\nThe single quote is Unicode U+0027, also known as apostrophe, and it has a long story of its own.")
    rendered = quote.render(quote.pick("Which characters are not allowed in a sheet name?", [(1, text)], "en",
                                       {"charact": 3.0, "sheet": 1.0, "allow": 1.0}))
    assert all(item in rendered for item in items), rendered
    assert "long story" not in rendered  # the paragraph after the list is not part of it


def test_an_announced_list_stops_at_the_block_budget():
    items = [f"item number {n} of a very long list" for n in range(30)]
    text = "The following entries are allowed:\n\n" + "\n\n".join(items)
    picked = quote.pick("Which entries are allowed?", [(1, text)], "en", {"entri": 3.0, "allow": 1.0})
    listed = [q for q in picked if q.unit.text.startswith("item number")]
    assert 3 <= len(listed) <= quote.FOLLOWER_UNITS
    assert sum(len(q.unit.text) for q in listed) <= quote.BLOCK_CHARS


def test_a_best_sentence_that_refers_back_mid_sentence_brings_the_sentence_it_refers_to():
    """Found on LibreOffice's help: the best match, "the first time you press this key combination",
    names no key; the sentence before it does (F4)."""
    text = ("Dollar signs mark a fixed reference. LibreOffice converts the current reference when you press F4. "
            "If you start with a relative address such as A1, the first time you press this key combination, "
            "both row and column are set to absolute references ($A$1).")
    question = "Which key switches a relative address such as A1 to absolute references like $A$1?"
    rendered = quote.render(quote.pick(question, [(1, text)], "en", {"relat": 2.0, "absolut": 2.0, "address": 2.0,
                                                                    "key": 1.0}))
    assert "press F4" in rendered, rendered
    assert "Dollar signs" not in rendered  # only the sentence referred to, not the paragraph


def test_a_sentence_about_this_manual_does_not_pull_in_the_one_before():
    text = ("Debian is a free operating system. Installation is covered in this manual, chapter by chapter, "
            "from booting the installer to the first login.")
    rendered = quote.render(quote.pick("Where is the installation covered?", [(1, text)], "en",
                                       {"instal": 3.0, "cover": 2.0}))
    assert "free operating system" not in rendered
