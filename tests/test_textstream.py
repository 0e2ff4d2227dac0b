from appliance.engine.sequence import TextStream


def feed_all(stream, pieces):
    out = "".join(stream.feed(p) for p in pieces)
    return out + stream.flush()


def test_utf8_split_character_is_emitted_whole():
    data = "你好，世界".encode()
    pieces = [data[i:i + 1] for i in range(len(data))]
    s = TextStream([])
    emitted = [s.feed(p) for p in pieces]
    assert all("\ufffd" not in e for e in emitted)
    assert "".join(emitted) + s.flush() == "你好，世界"


def test_stop_string_never_leaks_partially():
    s = TextStream(["###"])
    out = [s.feed(b) for b in [b"Hello #", b"#", b"# tail"]]
    assert "".join(out) == "Hello "
    assert s.stopped and s.flush() == ""
    assert all("#" not in o for o in out)


def test_held_prefix_released_when_not_a_stop():
    s = TextStream(["STOP"])
    assert s.feed(b"ab ST") == "ab "
    assert s.feed(b"ay") == "STay"
    assert not s.stopped


def test_stop_across_multibyte():
    s = TextStream(["。"])
    data = "答案是四。多余".encode()
    assert feed_all(s, [data[i:i + 2] for i in range(0, len(data), 2)]) == "答案是四"
