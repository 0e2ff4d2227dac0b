"""The grounding check on answers (knowledge.answer.grounding), with negative controls. Pure logic."""

from __future__ import annotations

from knowledge.answer import grounding


def test_grounding_supports_a_quote_and_marks_an_invented_sentence():
    excerpts = ["The appliance stores its index and users in the data directory, /var/lib/appliance."]
    quoted = grounding.check("> The appliance stores its index and users in the data directory [1]", excerpts)
    assert [c.supported for c in quoted] == [True]
    invented = "The appliance uploads its index to Amazon S3 every Friday."  # negative control
    checked = grounding.check(f"The data directory is /var/lib/appliance [1]. {invented}", excerpts)
    assert [c.supported for c in checked] == [True, False]
    assert grounding.summary(checked) == {"sentences": 2, "supported": 1, "unsupported": [invented]}
    assert f"{invented} ⚠" in grounding.mark(f"Yes. {invented}", checked)


def test_grounding_in_chinese_and_short_sentences_are_not_judged():
    excerpts = ["默认只监听本机地址 127.0.0.1 的 8000 端口。"]
    checked = grounding.check("服务默认监听 8000 端口。服务每天把数据上传到阿里云存储桶。好的。", excerpts)
    assert [c.supported for c in checked] == [True, False, None]
