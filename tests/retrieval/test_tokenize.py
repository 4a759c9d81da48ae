from bot.retrieval.tokenize import has_cjk, tokenize


def test_identifiers_stay_whole() -> None:
    toks = tokenize("NCCL_SOCKET_IFNAME=eth0 gave ncclSystemError and cudaErrorIllegalAddress")
    assert "nccl_socket_ifname" in toks
    assert "ncclsystemerror" in toks
    assert "cudaerrorillegaladdress" in toks
    assert {"socket", "ifname", "system"} <= set(toks)  # parts as well


def test_numbers_and_xid() -> None:
    toks = tokenize("Xid 79 after NCCL 2.18.1, error 12")
    assert "xid79" in toks and "79" in toks
    assert "2.18.1" in toks and "18" not in toks
    assert "12" in toks


def test_chinese_is_segmented_and_stopwords_dropped() -> None:
    toks = tokenize("容器里共享内存太小怎么办")
    assert "容器" in toks and "共享" in toks and "内存" in toks
    assert "怎么办" not in toks and "里" not in toks


def test_mixed_text() -> None:
    toks = tokenize("训练时报 unhandled system error")
    assert toks[:1] == ["训练"] and "unhandled" in toks
    assert has_cjk("训练") and not has_cjk("NCCL timeout")


def test_compact_dictionary_covers_the_cards() -> None:
    """Every word jieba's full dictionary finds in the cards is in data/zh_words.txt, so a
    card's terms (显存, 共享内存...) segment alike in cards and questions. On failure: run
    `.venv/bin/python scripts/build_zh_dict.py` after editing cards."""
    import jieba

    from bot.retrieval.tokenize import ZH_WORDS
    from scripts.build_zh_dict import card_words

    full = jieba.Tokenizer()
    full.initialize()
    have = {line.split(" ", 1)[0] for line in ZH_WORDS.read_text(encoding="utf-8").splitlines()}
    missing = sorted(w for w in card_words(full) - have if full.FREQ.get(w))
    assert not missing, f"run scripts/build_zh_dict.py; missing: {missing[:20]}"
