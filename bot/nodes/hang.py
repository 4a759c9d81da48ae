"""The `hang` diagnostic's samples from several nodes at once, for the CLI and for Slack."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from bot.errors import NcclbotError
from tools.hang.model import HangSample
from tools.result import ToolResult

#: run(node) -> that node's `hang` ToolResult (or its JSON); raises NcclbotError
RunHang = Callable[[str], ToolResult | Mapping[str, object]]


def read_sample(result: ToolResult | Mapping[str, object], where: str) -> HangSample | str:
    """The sample in one `hang` result (validated: the tool's `HangSample`), or what went
    wrong there."""
    try:
        got = result if isinstance(result, ToolResult) else ToolResult.model_validate(result)
    except ValueError as exc:
        return f"{where}: malformed result ({str(exc)[:200]})"
    if got.status != "success":
        return f"{where}: {got.error or got.status}"
    try:
        return HangSample.model_validate(got.data)
    except ValueError as exc:
        return f"{where}: malformed hang sample ({str(exc)[:200]})"


def gather(nodes: Sequence[str], run: RunHang) -> tuple[list[HangSample], list[str]]:
    """Every node's sample, asked in parallel and named as the node is (its host name may
    differ), and what failed where."""
    def one(node: str) -> HangSample | str:
        try:
            sample = read_sample(run(node), node)
        except NcclbotError as exc:
            return f"{node}: {exc.message}"
        if isinstance(sample, HangSample):
            sample.host = node
        return sample

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
        got = list(pool.map(one, nodes))
    return [g for g in got if isinstance(g, HangSample)], [g for g in got if isinstance(g, str)]
