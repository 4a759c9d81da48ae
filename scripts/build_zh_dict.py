"""Write bot/retrieval/data/zh_words.txt: the Chinese dictionary BM25 segments with.

Loading jieba's full dictionary (349,046 words) takes ~1.5 s, half of `ncclbot ask`'s cold
start. This one holds, with their frequencies in jieba's dictionary:
- the WORDS most frequent words;
- every dictionary word that jieba finds in the cards' Chinese text (so a card's own terms,
  e.g. 显存, always segment the same way in a card and in a question);
- DOMAIN: everyday words of GPU training chat that a question may use and a card may not.
It loads in ~0.2 s. Re-run it when cards change (a test fails when a card word is missing).
jieba is MIT-licensed; see bot/retrieval/data/README.md.

    .venv/bin/python scripts/build_zh_dict.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import jieba

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WORDS = 60_000
OUT = ROOT / "bot" / "retrieval" / "data" / "zh_words.txt"
CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
DOMAIN = """显存 显卡 多卡 单卡 多机 单机 卡住 卡死 死锁 挂起 超时 报错 崩溃 节点 网卡 网口 带宽
延迟 拓扑 驱动 内核 容器 镜像 共享内存 内存 进程 线程 端口 防火墙 集群 训练 推理 微调 分布式
通信 集合通信 梯度 权重 同步 断点 检查点 保存 加载 评估 验证 数据集 日志 环境变量""".split()  # noqa: SIM905


def card_words(tokenizer: jieba.Tokenizer) -> set[str]:
    from bot.knowledge.cards import load_cards

    words: set[str] = set()
    for card in load_cards():
        for run in CJK_RUN.findall(card.text("both")):
            words.update(tokenizer.lcut_for_search(run))
    return words


def main() -> None:
    source = Path(jieba.__file__).with_name("dict.txt")
    freq: dict[str, int] = {}
    for line in source.read_text(encoding="utf-8").splitlines():
        word, count = line.split(" ")[:2]
        if int(count) > 0:
            freq[word] = int(count)
    # Most frequent first; ties in dictionary order (sorted() is stable).
    keep = dict(sorted(freq.items(), key=lambda wf: -wf[1])[:WORDS])
    extra = sorted((card_words(jieba.Tokenizer()) | set(DOMAIN)) - keep.keys())
    for word in extra:
        if word in freq:
            keep[word] = freq[word]
    OUT.write_text("".join(f"{w} {f}\n" for w, f in keep.items()), encoding="utf-8")
    print(f"{OUT}: {len(keep)} words ({WORDS} most frequent + {len(keep) - WORDS} from the "
          f"cards and the domain list) of {len(freq)} (jieba {jieba.__version__})")


if __name__ == "__main__":
    main()
