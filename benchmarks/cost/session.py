"""The scripted sessions of the cost benchmark (`cost.line1`): scenarios, real files, models.

A scenario is a list of turns; each turn is a user task followed by tool calls that view one
file each with a `view_text_file` tool (AgentScope 1.x's own; its twin on 2.x), and a final
answer. Of every four outputs, three are cut from real sources on this machine (the standard
library's, concatenated in sorted order: the same files under either AgentScope line) and one
is CJK prose generated from a fixed seed (this machine holds no CJK corpus of size: the
largest found is 18 KB). A scenario with `json` makes one of the three source outputs JSON
records with Chinese fields instead (what a database or API tool returns): Chinese and JSON
are where a bytes / 4 estimate undercounts tokens. Everything is
seeded: the same scenario gives the same files and the same script (the scripted models are
in `cost.models1` and `cost.models2`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import random
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SYS_PROMPT = (
    "You are a careful software engineer working in a repository. Read the files the user "
    "points you to with your tools, keep exact file paths, function names and error "
    "messages, and report your findings concisely at the end of each task."
)
_TOPICS = (
    "error handling",
    "async code paths",
    "configuration",
    "logging",
    "tests",
    "public API",
    "data formats",
    "performance",
    "documentation",
    "security",
)
_CJK_WORDS = (
    "配置 文件 模型 智能体 工具 调用 结果 上下文 记忆 摘要 压缩 消息 用户 任务 进度 错误 日志 "
    "测试 接口 函数 参数 返回 数据 格式 缓存 请求 响应 超时 重试 线程 进程 路径 目录 版本 依赖 "
    "安装 运行 部署 服务 客户端 服务器 网络 存储 数据库 索引 查询 检索 令牌 预算 成本 性能 "
    "延迟 吞吐 稳定 可靠 安全 权限 验证 文档 示例 说明 注意 建议 问题 原因 方法 步骤 我们 需要 "
    "可以 应该 已经 没有 因为 所以 如果 但是 然后 同时 以及 对于 通过 使用 支持 实现 处理 保存 "
    "读取 写入 更新 删除 创建 检查 比较 计算 统计 分析 报告 完成 开始 结束 继续 重新 自动"
).split()
_CJK_ENDS = ("，", "，", "。", "。", "；", "！", "？")


@dataclass(frozen=True)
class Scenario:
    """One scripted session: `turns` user tasks of `calls` tool calls each."""

    name: str
    budget: int
    """`max_input_tokens` of agentscope_ctx; the built-in compression triggers at 75% of it."""
    turns: int
    calls: int
    sizes: tuple[int, ...]
    """UTF-8 size of each viewed file, `turns * calls` of them, in call order."""
    seed: int = 0
    json: bool = False
    """Whether every fourth output (the second of four) is JSON records with Chinese fields."""
    pause: float = 0.0
    """Seconds the user takes before each task after the first (`cost.providers`' virtual
    clock: past the providers' 5-minute cache TTL, each task starts on a cold cache)."""


def stress(turns: int = 6, calls: int = 8, budget: int = 24_000, seed: int = 1) -> Scenario:
    """Budget 24k, outputs of 30 KB to 1.3 MB (log-uniform)."""
    rng = random.Random(seed)
    sizes = tuple(_log_uniform(rng, 30_000, 1_300_000) for _ in range(turns * calls))
    return Scenario("stress", budget, turns, calls, sizes, seed)


def everyday(turns: int = 10, calls: int = 10, budget: int = 128_000, seed: int = 2) -> Scenario:
    """The default budget, outputs of 1.5 to 40 KB (log-uniform), every 23rd one 200 KB."""
    rng = random.Random(seed)
    sizes = tuple(
        200_000 if i % 23 == 22 else _log_uniform(rng, 1_500, 40_000) for i in range(turns * calls)
    )
    return Scenario("everyday", budget, turns, calls, sizes, seed)


def everyday_json() -> Scenario:
    """`everyday` with JSON outputs: the same sizes, a quarter of the outputs JSON records."""
    return dataclasses.replace(everyday(), name="everyday-json", json=True)


def _log_uniform(rng: random.Random, low: int, high: int) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))


@functools.lru_cache(maxsize=1)
def source_pool(limit: int = 8_000_000) -> bytes:
    """Real source text: the standard library's top-level modules, then its packages (not
    its tests, nor site-packages), in sorted path order, up to `limit` bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "test", "tests", "idlelib", "lib2to3"}
    packages = (p for p in sorted(root.glob("*/**/*.py")) if not skip & set(p.parts))
    parts: list[bytes] = []
    size = 0
    for paths in (sorted(root.glob("*.py")), packages):
        for path in paths:
            try:
                data = path.read_bytes()
                data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            parts.append(f"# ---- {path.name} ----\n".encode() + data)
            size += len(parts[-1])
            if size >= limit:
                return b"".join(parts)
    return b"".join(parts)


def cjk_text(size: int, seed: int) -> str:
    """About `size` UTF-8 bytes of CJK prose (with a few ASCII terms), generated from `seed`."""
    rng = random.Random(seed)
    lines: list[str] = []
    total = 0
    while total < size:
        sentences = []
        for _ in range(rng.randint(1, 4)):
            words = [rng.choice(_CJK_WORDS) for _ in range(rng.randint(4, 18))]
            if rng.random() < 0.3:
                words.insert(rng.randrange(len(words)), f" {rng.choice(_TOPICS)} ")
            if rng.random() < 0.2:
                words.append(f"{rng.randint(1, 9999)}")
            sentences.append("".join(words) + rng.choice(_CJK_ENDS))
        lines.append("".join(sentences) + "\n")
        total += len(lines[-1].encode("utf-8"))
    return _cut_bytes("".join(lines).encode("utf-8"), size)


def json_records(size: int, seed: int) -> str:
    """About `size` UTF-8 bytes of JSON records with Chinese fields (indented, one field a
    line), generated from `seed`."""
    rng = random.Random(seed)
    rows: list[dict[str, object]] = []
    total = 0
    while total < size:
        words = [rng.choice(_CJK_WORDS) for _ in range(rng.randint(3, 10))]
        row = {
            "id": len(rows) + 1,
            "名称": "".join(words[:2]),
            "城市": rng.choice(["上海", "北京", "深圳", "杭州", "成都"]),
            "状态": rng.choice(["完成", "进行中", "失败"]),
            "金额": round(rng.random() * 10_000, 2),
            "标签": words[2:5],
            "备注": "".join(words) + rng.choice(_CJK_ENDS),
        }
        rows.append(row)
        total += len(json.dumps(row, ensure_ascii=False, indent=1).encode("utf-8")) + 2
    return _cut_bytes(json.dumps(rows, ensure_ascii=False, indent=1).encode("utf-8"), size)


def _cut_bytes(data: bytes, size: int) -> str:
    """`data` cut to at most `size` bytes, at a line end (whole characters)."""
    text = data[:size].decode("utf-8", errors="ignore")
    end = text.rfind("\n")
    return text[: end + 1] if end > 0 else text


@dataclass(frozen=True)
class Step:
    """One scripted tool call."""

    call_id: str
    file_path: str


def write_files(scenario: Scenario, root: Path) -> list[list[Step]]:
    """Write the scenario's files below `root`; return the script: the steps of each turn."""
    pool = source_pool()
    rng = random.Random(scenario.seed)
    plan: list[list[Step]] = []
    for turn in range(scenario.turns):
        steps = []
        for i in range(scenario.calls):
            n = turn * scenario.calls + i
            size = scenario.sizes[n]
            if n % 4 == 3:
                path = root / "docs" / f"notes_{n:03d}.txt"
                text = cjk_text(size, scenario.seed * 1_000 + n)
            elif scenario.json and n % 4 == 1:
                path = root / "data" / f"records_{n:03d}.json"
                text = json_records(size, scenario.seed * 1_000 + n)
            else:
                path = root / "src" / f"module_{n:03d}.py"
                start = rng.randrange(max(len(pool) - size, 1))
                start = pool.find(b"\n", start) + 1
                text = _cut_bytes(pool[start:], size)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            steps.append(Step(f"call-{turn + 1}-{i + 1}", str(path)))
        plan.append(steps)
    return plan


def user_task(turn: int, steps: Sequence[Step]) -> str:
    """The user's message opening `turn` (0-based)."""
    topic = _TOPICS[turn % len(_TOPICS)]
    names = ", ".join(Path(step.file_path).name for step in steps)
    return f"Task {turn + 1}: review these files for {topic} and report what you find: {names}."
